"""Issue 37, item 1: a re-sync into a lake lasts. MariaDB with MINIMAL row images: rows
drift at the source behind the binlog's back (``SET sql_log_bin = 0``), ``validate`` finds
them, ``resync --apply`` repairs them, and then ordinary logged changes touch the repaired
rows -- updates that carry one column, a key change, a key inserted again. The pipeline
completes those from its row image store, which must have learned the repaired rows: the
old values never come back. Run with the pipeline stopped during the re-sync, and running.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from cdc_core.lake import LakeTable
from cdc_core.names import format_table
from cdc_core.resync_requests import read_requests
from tests.private_servers import MariaDBServer

pytestmark = [pytest.mark.integration, pytest.mark.mariadb]
ROOT = Path(__file__).resolve().parents[3]
DRIFT = (
    "UPDATE items SET a = 'drifted', b = b + 100 WHERE id IN (3, 4)",
    "DELETE FROM items WHERE id = 5",
    "INSERT INTO items VALUES (30, 'unlogged', 30, 0)",
)
LATER = (  # logged; with MINIMAL images each carries the key and the columns it sets
    "UPDATE items SET v = v + 1 WHERE id IN (3, 30)",
    "UPDATE items SET id = 104 WHERE id = 4",
    "INSERT INTO items VALUES (5, 'back', 5, 5)",
    "UPDATE items SET v = 7 WHERE id = 104",
)


def _config(work: Path, url: str, database: str) -> Path:
    config = work / "replcheck.yaml"
    config.write_text(
        "connections:\n"
        f"  src: {{url: {json.dumps(url)}}}\n"
        f"  lake: {{lake: {json.dumps(str(work / 'lake'))}}}\n"
        "pipelines:\n"
        "  - {name: p, source: src, target: lake, tables: [items],"
        f" state_dir: {json.dumps(str(work / 'state'))}, batch: {{max_seconds: 0.3}}}}\n"
        "comparisons:\n"
        "  - {name: items, source: {connection: src, table: items},"
        f" target: {{connection: lake, table: {json.dumps(format_table(database, 'items'))}}}}}\n"
        "validation: {engine: local, lake_wait_timeout_s: 60}\n",
        encoding="utf-8",
    )
    return config


def _replcheck(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "validator.cli", *args]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)


def _validate(config: Path, out: Path) -> tuple[int, dict[str, Any]]:
    finished = _replcheck("validate", "--config", str(config), "--out", str(out))
    (comparison,) = json.loads((out / "result.json").read_text())["comparisons"]
    return finished.returncode, comparison


def _catch_up(config: Path) -> None:
    finished = _replcheck(
        "cdc", "run", "--config", str(config), "--pipeline", "p", "--until-caught-up"
    )
    assert finished.returncode == 0, finished.stderr


@contextlib.contextmanager
def _running(config: Path, log: Path) -> Iterator[None]:
    """``cdc run`` following the log in the background, stopped with SIGTERM at the end."""
    command = [sys.executable, "-m", "validator.cli", "cdc", "run", "--config", str(config)]
    with log.open("wb") as output:
        process = subprocess.Popen(
            [*command, "--pipeline", "p"], cwd=ROOT, stdout=output, stderr=output
        )
    try:
        time.sleep(3.0)  # its signal handlers are installed (a catch-up ran before)
        yield
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(120) == 0, log.read_text()


def _run(server: MariaDBServer, database: str, statements: tuple[str, ...], logged: bool) -> None:
    with contextlib.closing(server.connect(database)) as conn, conn.cursor() as cur:
        if not logged:
            cur.execute("SET SESSION sql_log_bin = 0")  # drift no binlog shows
        for statement in statements:
            cur.execute(statement)
        conn.commit()


def _rows(server: MariaDBServer, database: str, lake: Path) -> tuple[list[Any], list[Any]]:
    """The source's rows and the lake mirror's, read independently of the product."""
    with contextlib.closing(server.connect(database)) as conn, conn.cursor() as cur:
        cur.execute("SELECT id, a, b, v FROM items ORDER BY id")
        source = [list(row) for row in cur.fetchall()]
    mirror = LakeTable(lake, format_table(database, "items")).mirror
    rows = DeltaTable(str(mirror)).to_pyarrow_table().to_pylist()
    return source, sorted([r[c] for c in ("id", "a", "b", "v")] for r in rows)


# The pipeline running (and SIGKILLed) is the generative tester's re-sync mode
# (tests/generative/sql/test_sql_generative.py); both ran here in session 36.
@pytest.mark.parametrize("running", [False], ids=["pipeline stopped"])
def test_a_resync_lasts_through_later_partial_changes(
    mariadb_minimal: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    tmp_path: Path,
    running: bool,
) -> None:
    server, database = mariadb_minimal, mariadb_database(mariadb_minimal)
    rows = ", ".join(f"({k}, 'a{k}', {k}, 0)" for k in range(1, 21))
    create = "CREATE TABLE items (id INT PRIMARY KEY, a VARCHAR(20), b INT, v INT)"
    _run(server, database, (create, f"INSERT INTO items VALUES {rows}"), logged=True)
    config = _config(tmp_path, server.url(database), database)
    lake = tmp_path / "lake"
    _catch_up(config)

    with _running(config, tmp_path / "cdc.log") if running else contextlib.nullcontext():
        _run(server, database, DRIFT, logged=False)
        code, comparison = _validate(config, tmp_path / "before")
        assert code == 1, comparison
        keys = sorted(d["key"] for d in comparison["differences"])
        assert keys == [["3"], ["30"], ["4"], ["5"]]
        result = tmp_path / "before" / "result.json"
        repaired = _replcheck("resync", "--config", str(config), "--result", str(result), "--apply")
        assert repaired.returncode == 0, repaired.stdout + repaired.stderr
        _run(server, database, LATER, logged=True)
    _catch_up(config)

    code, comparison = _validate(config, tmp_path / "after")
    assert (code, comparison["status"]) == (0, "in_sync"), comparison.get("differences")
    source, mirror = _rows(server, database, lake)
    assert mirror == source
    assert [104, "drifted", 104, 7] in source and [3, "drifted", 103, 1] in source
    assert read_requests(lake, [format_table(database, "items")]) == []
