"""Safety of re-syncs: limits, dry-run default, audit record, library API and command line.

A SQLite source and a SQLite target keep these tests free of servers; the repair paths
are the same as for any SQLAlchemy target (test_resync_sql.py runs them on PostgreSQL and
MariaDB).
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
import subprocess
import sys
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path

import pytest

from cdc_core.errors import ConfigError
from reports.html import build_html_report
from tests.validator.resync.helpers import result_for, write_config
from validator.config import ValidatorConfig, load_validator_config
from validator.resync.audit import JSONL_NAME
from validator.resync.run import ResyncRefused, resync

SOURCE = [(1, "a@x", "one"), (2, "b@x", "two"), (3, "c@x", "three"), (4, "d@x", "four")]
TARGET = [(1, "a@x", "one"), (2, "b@x", "TWO"), (4, "d@x", "four"), (5, "e@x", "five")]
DIFFERENCES = [
    ("changed", ("2",)),
    ("missing_in_target", ("3",)),
    ("extra_in_target", ("5",)),
]


def _database(path: Path, rows: Sequence[tuple[object, ...]]) -> str:
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("CREATE TABLE people (id INTEGER PRIMARY KEY, email TEXT, name TEXT)")
        conn.executemany("INSERT INTO people VALUES (?, ?, ?)", rows)
    return f"sqlite:///{path}"


def _rows(url: str) -> list[tuple[object, ...]]:
    with closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as conn:
        return conn.execute("SELECT * FROM people ORDER BY id").fetchall()


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    comparison = """\
  - name: people
    source: {connection: src, table: people}
    target: {connection: tgt, table: people}
    key: [id]
    columns: {sensitive: [email]}"""
    return write_config(
        tmp_path / "replcheck.yaml",
        {
            "src": _database(tmp_path / "source.db", SOURCE),
            "tgt": _database(tmp_path / "target.db", TARGET),
        },
        comparison,
        "validation: {recheck_lag_s: 0}\nresync: {max_rows: 3, max_result_age_h: 1}",
    )


@pytest.fixture
def config(config_path: Path) -> ValidatorConfig:
    return load_validator_config(config_path, environ={})


def _target(config: ValidatorConfig) -> str:
    url = config.connections["tgt"].url
    assert url is not None
    return url


def test_a_dry_run_is_the_default_and_changes_nothing(
    config: ValidatorConfig, tmp_path: Path
) -> None:
    outcome = resync(
        config, result_for(config.comparison("people"), DIFFERENCES), out_dir=tmp_path / "out"
    )
    (done,) = outcome.comparisons
    assert done.mode.value == "dry_run" and done.revalidation.value == "none"
    assert _rows(_target(config)) == TARGET
    sql = (tmp_path / "out" / "repair-people.sql").read_text(encoding="utf-8")
    assert "INSERT INTO people" in sql and "DELETE FROM people" in sql
    assert "c@x" not in sql and "sensitive column email" in sql
    assert outcome.exit_code == 0


def test_apply_repairs_revalidates_and_audits(config: ValidatorConfig, tmp_path: Path) -> None:
    outcome = resync(
        config, result_for(config.comparison("people"), DIFFERENCES), apply=True, out_dir=tmp_path
    )
    (done,) = outcome.comparisons
    assert _rows(_target(config)) == SOURCE
    assert done.action_counts == {"update": 1, "insert": 1, "delete": 1}
    assert [a.columns for a in done.actions if a.kind == "update"] == [("name",)]
    assert done.repaired and outcome.exit_code == 0
    (record,) = [json.loads(x) for x in (tmp_path / JSONL_NAME).read_text().splitlines()]
    assert record["user"] and record["comparison"] == "people" and not record["forced"]
    assert record["keys"] == [["2"], ["3"], ["5"]] and record["mode"] == "applied"
    assert dt.datetime.fromisoformat(record["at"]).tzinfo is not None
    assert "@x" not in json.dumps(record) and "@x" not in json.dumps(outcome.to_dict())


def test_an_old_result_is_refused_unless_forced(config: ValidatorConfig, tmp_path: Path) -> None:
    old = result_for(
        config.comparison("people"), DIFFERENCES, dt.datetime.now(dt.UTC) - dt.timedelta(hours=2)
    )
    with pytest.raises(ResyncRefused, match=r"max_result_age_h \(1 h\).*--force"):
        resync(config, old, apply=True, out_dir=tmp_path)
    assert _rows(_target(config)) == TARGET and not (tmp_path / JSONL_NAME).exists()
    forced = resync(config, old, apply=True, force=True, out_dir=tmp_path)
    assert forced.comparisons[0].repaired and _rows(_target(config)) == SOURCE
    assert json.loads((tmp_path / JSONL_NAME).read_text())["forced"] is True


def test_more_keys_than_the_limit_are_refused_unless_forced_or_raised(
    config: ValidatorConfig, tmp_path: Path
) -> None:
    many = result_for(config.comparison("people"), [*DIFFERENCES, ("changed", ("1",))])
    with pytest.raises(ResyncRefused, match=r"4 keys to repair, more than the limit of 3"):
        resync(config, many, apply=True, out_dir=tmp_path)
    assert _rows(_target(config)) == TARGET
    assert resync(config, many, apply=True, max_rows=4, out_dir=tmp_path).exit_code == 0
    assert resync(config, many, apply=True, force=True, out_dir=tmp_path).exit_code == 0


def test_unrepairable_findings_leave_exit_code_1(config: ValidatorConfig, tmp_path: Path) -> None:
    found = result_for(config.comparison("people"), [*DIFFERENCES, ("duplicate_key", ("4",))])
    outcome = resync(config, found, apply=True, out_dir=tmp_path)
    (done,) = outcome.comparisons
    assert done.skipped == {"duplicate_key": 1} and done.remaining_total == 0
    assert not done.repaired and outcome.exit_code == 1


def test_unknown_comparisons_and_keys_of_the_wrong_shape_are_errors(
    config: ValidatorConfig, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match="no comparison named nope"):
        resync(config, result_for(config.comparison("people"), DIFFERENCES), comparisons=["nope"])
    wrong = resync(
        config, result_for(config.comparison("people"), [("changed", ("2", "x"))]), out_dir=tmp_path
    )
    assert wrong.comparisons[0].mode.value == "failed" and wrong.exit_code == 2
    assert "has 2 parts" in (wrong.comparisons[0].error or "")
    bad = resync(
        config, result_for(config.comparison("people"), [("changed", ("two",))]), out_dir=tmp_path
    )
    assert "not a valid integer" in (bad.comparisons[0].error or "")
    assert "two" not in (bad.comparisons[0].error or "")  # never the value


def test_the_report_shows_the_repairs_escaped(config: ValidatorConfig, tmp_path: Path) -> None:
    document = result_for(config.comparison("people"), DIFFERENCES)
    outcome = resync(config, document, out_dir=tmp_path)
    data = outcome.to_dict()
    data["comparisons"][0]["actions"][0]["key"] = ["<script>x</script>"]
    html = build_html_report(document, resync=data)
    assert 'id="c0-resync"' in html and "repairs proposed, nothing written (dry run)" in html
    assert "&lt;script&gt;x&lt;/script&gt;" in html and "<script>x</script>" not in html
    assert "repair-people.sql" in html
    assert "not checked (nothing was applied)" in html


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "validator.cli", "resync", *args]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def test_the_command_line_writes_its_outputs_and_exits_by_outcome(
    config_path: Path, config: ValidatorConfig, tmp_path: Path
) -> None:
    result = tmp_path / "run" / "result.json"
    result.parent.mkdir()
    result.write_text(
        json.dumps(result_for(config.comparison("people"), DIFFERENCES)), encoding="utf-8"
    )
    dry = _cli("--config", str(config_path), "--result", str(result))
    assert dry.returncode == 0, dry.stderr
    assert "repair SQL written" in dry.stdout and (tmp_path / "run/repair-people.sql").exists()
    assert json.loads((tmp_path / "run/resync.json").read_text())["exit_code"] == 0
    assert "Re-sync" in (tmp_path / "run/resync-report.html").read_text(encoding="utf-8")
    refused = _cli("--config", str(config_path), "--result", str(result), "--max-rows", "1")
    assert refused.returncode == 2 and "--force" in refused.stderr
    applied = _cli("--config", str(config_path), "--result", str(result), "--apply")
    assert applied.returncode == 0, applied.stderr
    assert "every difference is gone" in applied.stdout and _rows(_target(config)) == SOURCE


def test_the_resync_section_of_the_config_is_checked(tmp_path: Path, config_path: Path) -> None:
    text = config_path.read_text(encoding="utf-8")
    for section, problem in (
        ("resync: {max_rows: 0}", "must be above 0"),
        ("resync: {audit: lake}", "no connection is a lake"),
        ("resync: {audit: cloud}", "must be one of: lake, file"),
        ("resync: {batch: 3}", "unknown key"),
    ):
        bad = tmp_path / "bad.yaml"
        bad.write_text(text.replace("resync: {max_rows: 3, max_result_age_h: 1}", section))
        with pytest.raises(ConfigError, match=problem):
            load_validator_config(bad, environ={})
