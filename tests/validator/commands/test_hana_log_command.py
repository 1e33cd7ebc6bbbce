"""``replcheck hana log-position`` on recorded HANA views: its one line and its exit code.

The command runs in-process through ``validator.cli.run``; only the database read
(``read_retention``) is replaced, by one that returns the recorded rows.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc_core.errors import TerminalError
from connectors.hana.connector import HanaConnector
from connectors.hana.log_retention import LogRetention
from tests.connectors.hana.recorded import RETENTION
from validator import cli

URL = "hana+hdbcli://monitor@hana01.example:30015/?encrypt=true"


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HANA_MONITOR_PW", "s3cret")
    path = tmp_path / "replcheck.yaml"
    path.write_text(
        f"connections:\n  h01: {{url: '{URL}', password: {{env: HANA_MONITOR_PW}}}}\n",
        encoding="utf-8",
    )
    return path


@pytest.fixture
def connectors(monkeypatch: pytest.MonkeyPatch) -> list[HanaConnector]:
    """The connectors the command read with; the read returns the recorded views."""
    used: list[HanaConnector] = []

    def recorded(connector: HanaConnector) -> LogRetention:
        used.append(connector)
        return RETENTION

    monkeypatch.setattr("validator.commands.hana_log.read_retention", recorded)
    return used


def run(config: Path, position: int, volume: int = 2) -> list[str]:
    argv = ["-c", str(config), "--connection", "h01", "--position", str(position)]
    return ["hana", "log-position", *argv, "--volume", str(volume)]


@pytest.mark.parametrize(
    ("position", "volume", "line"),
    [
        (
            10683243519,
            2,
            "position 10683243519 of HANA log volume 2 is online: log segment 42 (BackedUp)",
        ),
        (
            10683210000,
            1,
            "position 10683210000 of HANA log volume 1 is online: log segment 8 (RetainedFree)",
        ),
        (
            10683180608,
            2,
            "position 10683180608 of HANA log volume 2 is archived: log backup 1700000990000"
            " of 2023-11-14 22:29:50 UTC, /usr/sap/H01/HDB00/backup/log/DB_H01/"
            "log_backup_2_0_10683180608_10683196416.1700000990000",
        ),
    ],
)
def test_an_online_or_archived_position_exits_0_with_one_line(
    config: Path,
    connectors: list[HanaConnector],
    capsys: pytest.CaptureFixture[str],
    position: int,
    volume: int,
    line: str,
) -> None:
    assert cli.run(run(config, position, volume)) == 0
    assert capsys.readouterr().out.splitlines() == [line]
    (connector,) = connectors
    assert connector.connect_args() == {
        "address": "hana01.example",
        "port": 30015,
        "user": "monitor",
        "password": "s3cret",
        "encrypt": "true",
    }


@pytest.mark.parametrize(
    ("position", "reason"),
    [
        (10682999999, "the oldest position still available is 10683000000"),
        (
            10683060000,
            "the log has a gap there (a log backup is missing); the oldest position is 10683000000",
        ),
    ],
)
def test_a_gone_position_exits_3_naming_what_is_left_and_the_fix(
    config: Path,
    connectors: list[HanaConnector],
    capsys: pytest.CaptureFixture[str],
    position: int,
    reason: str,
) -> None:
    assert cli.run(run(config, position)) == cli.EXIT_LOG_GONE == 3
    assert capsys.readouterr().out.splitlines() == [
        f"position {position} of HANA log volume 2 is gone: {reason}; restore the log backups"
        " that hold it, or take a new snapshot and resume at its position"
    ]


def test_a_volume_without_log_exits_2_with_one_error_line(
    config: Path, connectors: list[HanaConnector], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.run(run(config, 1, volume=7)) == 2
    printed = capsys.readouterr()
    assert printed.out == ""
    assert printed.err.splitlines() == ["error: HANA log volume 7 partition 0 has no log"]


def test_a_failed_read_exits_2_through_the_cli_error_path(
    config: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def refused(connector: HanaConnector) -> LogRetention:
        raise TerminalError(f"cannot read the log segments on {connector.where}: no privilege")

    monkeypatch.setattr("validator.commands.hana_log.read_retention", refused)
    assert cli.run(run(config, 1)) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "error: cannot read the log segments on HANA hana01.example:30015: no privilege"
    ]
    assert "s3cret" not in err
