"""Canaries: a password and a sensitive value that no command may print or write.

One MariaDB source (user ``canary``, whose password is the canary) and one PostgreSQL
target; the ``secret`` column is sensitive and part of the key, and its values start with
the canary value. Every command runs -- validate, gate with JUnit, report in every format,
resync dry-run and apply, cdc run (and cdc run and validate against a wrong port, so that
error messages print the URL) -- and everything printed and every file written is searched.
The password may appear nowhere, not even in the lake or the pipeline's state; the value
nowhere but in the data copies themselves (the lake and the pipeline's row image store).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.private_servers import MariaDBServer, PostgresServer
from validator import cli

pytestmark = [pytest.mark.integration, pytest.mark.mariadb, pytest.mark.postgres]

PASSWORD = "CanaryPw-5e1f9a"
VALUE = "CanaryVal-77b3"
SOURCE = [(f"{VALUE}-1", 1, f"{VALUE}-note-1"), (f"{VALUE}-2", 2, "b"), (f"{VALUE}-3", 3, "c")]
TARGET = [(f"{VALUE}-1", 1, "drifted"), (f"{VALUE}-2", 2, "b"), (f"{VALUE}-9", 9, "gone")]


def _source(server: MariaDBServer, database: str) -> None:
    with contextlib.closing(server.connect(database)) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE USER IF NOT EXISTS 'canary'@'%' IDENTIFIED BY '{PASSWORD}'")
        cur.execute("GRANT ALL PRIVILEGES ON *.* TO 'canary'@'%'")
        cur.execute(
            "CREATE TABLE t (secret VARCHAR(40), n INT, note TEXT, PRIMARY KEY (secret, n))"
        )
        cur.executemany("INSERT INTO t VALUES (%s, %s, %s)", SOURCE)


def _target(server: PostgresServer, database: str) -> None:
    with contextlib.closing(server.connect(database)) as conn:
        with contextlib.suppress(Exception):
            conn.execute(f"CREATE ROLE canary LOGIN SUPERUSER PASSWORD '{PASSWORD}'")
        conn.execute(
            "CREATE TABLE t (secret varchar(40), n int, note text, PRIMARY KEY (secret, n))"
        )
        conn.cursor().executemany("INSERT INTO t VALUES (%s, %s, %s)", TARGET)


def _config(
    work: Path,
    maria: MariaDBServer,
    source: str,
    pg: PostgresServer,
    target: str,
    port: int | None = None,
    inline: str = "",
) -> Path:
    """``port``: MariaDB's, to make it unreachable; ``inline``: a password written into both
    URLs' query strings (``&password=...``), which every command must refuse unechoed."""
    maria_port = port or maria.port
    name = "replcheck" if port is None else "wrong-port"
    path = work / (f"{name}-inline.yaml" if inline else f"{name}.yaml")
    path.write_text(
        "connections:\n"
        f"  src: {{url: 'mysql+pymysql://canary@{maria.host}:{maria_port}/{source}"
        f"?heartbeat_s=0.2&server_id=4343{inline}', password: {{env: CANARY_PW}}}}\n"
        f"  tgt: {{url: 'postgresql+psycopg://canary@{pg.host}:{pg.port}/{target}"
        f"{inline.replace('&', '?', 1)}', password: {{env: CANARY_PW}}}}\n"
        f"  lake: {{lake: '{work / 'lake'}'}}\n"
        "comparisons:\n"
        "  - name: t\n"
        "    source: {connection: src, table: t}\n"
        "    target: {connection: tgt, table: t}\n"
        "    columns: {sensitive: [secret, note]}\n"
        "validation: {recheck_lag_s: 0, engine: database}\n"
        "resync: {audit: file}\n"
        "pipelines:\n"
        f"  - {{name: p, source: src, target: lake, tables: [{source}.t],"
        f" state_dir: '{work / 'state'}', retry: {{attempts: 0}}}}\n",  # the wrong port: at once
        encoding="utf-8",
    )
    return path


def _written(root: Path, *, data_too: bool) -> str:
    data = {"lake", "state"}
    texts = []
    for path in root.rglob("*"):
        if path.is_file() and (data_too or not data & set(path.relative_to(root).parts)):
            texts.append(path.read_bytes().decode("utf-8", errors="replace"))
    return "".join(texts)


def test_no_command_prints_or_writes_the_canaries(
    tmp_path: Path,
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    postgres: PostgresServer,
    postgres_database: Callable[[PostgresServer], str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("CANARY_PW", PASSWORD)
    source, target = mariadb_database(mariadb_full), postgres_database(postgres)
    _source(mariadb_full, source)
    _target(postgres, target)
    work = tmp_path / "work"
    work.mkdir()
    config = str(_config(work, mariadb_full, source, postgres, target))
    wrong = str(_config(work, mariadb_full, source, postgres, target, port=1))
    inline = str(
        _config(work, mariadb_full, source, postgres, target, inline=f"&password={PASSWORD}")
    )
    out, result = work / "out", str(work / "out" / "result.json")
    codes = [
        cli.run(["validate", "-c", config, "--out", str(out)]),
        cli.run(
            ["gate", "-c", config, "--out", str(work / "gate"), "--junit", str(work / "g.xml")]
        ),
        cli.run(
            ["report", result, "--html", str(work / "r.html"), "--markdown", str(work / "r.md")]
        ),
        cli.run(["report", result, "--junit", str(work / "r.xml")]),
        cli.run(["resync", "-c", config, "--result", result]),
        cli.run(["resync", "-c", config, "--result", result, "--apply"]),
        cli.run(["cdc", "run", "-c", config, "--pipeline", "p", "--until-caught-up"]),
        cli.run(["validate", "-c", wrong, "--out", str(work / "wrong")]),
        cli.run(["cdc", "run", "-c", wrong, "--pipeline", "p", "--until-caught-up"]),
        cli.run(["validate", "-c", inline, "--out", str(work / "inline")]),
        cli.run(["cdc", "run", "-c", inline, "--pipeline", "p", "--until-caught-up"]),
    ]
    assert codes == [1, 1, 0, 0, 0, 0, 0, 2, 2, 2, 2]
    printed = "".join(capsys.readouterr()) + caplog.text
    assert printed.count("has an inline password in its query string") == 2
    everything = printed + _written(work, data_too=True).replace(Path(inline).read_text(), "")
    assert PASSWORD not in everything
    outputs = printed + _written(work, data_too=False)
    assert VALUE not in outputs
    assert VALUE in _written(work / "lake", data_too=True)  # the canary is in the data
