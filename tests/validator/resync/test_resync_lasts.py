"""Issue 37, item 1: a re-sync into a lake lasts. MariaDB with MINIMAL row images: rows
drift at the source behind the binlog's back (``SET sql_log_bin = 0``), ``validate`` finds
them, ``resync --apply`` repairs them, and then ordinary logged changes touch the repaired
rows -- updates that carry one column, a key change, a key inserted again. The pipeline
completes those from its row image store, which must have learned the repaired rows: the
old values never come back. Run with the pipeline stopped during the re-sync, and running.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from cdc_core.lake.layout import LakeTable
from cdc_core.names import format_table
from cdc_core.resync.requests import read_requests
from tests.cli_runs import catch_up, cdc_running, replcheck, stop, validate, write_config
from tests.private_servers import MariaDBServer

pytestmark = [pytest.mark.integration, pytest.mark.mariadb]
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
    items = ("items", format_table(database, "items"))
    return write_config(work, url, ["items"], options="batch: {max_seconds: 0.3}", compared=items)


@contextlib.contextmanager
def _running(config: Path, log: Path) -> Iterator[None]:
    """``cdc run`` following the log in the background, stopped with SIGTERM at the end."""
    with cdc_running(config, log) as process:
        time.sleep(3.0)  # its signal handlers are installed (a catch-up ran before)
        yield
        stop(process)
    assert process.returncode == 0, log.read_text()


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


@pytest.mark.parametrize("running", [False, True], ids=["pipeline stopped", "pipeline running"])
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
    catch_up(config)

    with _running(config, tmp_path / "cdc.log") if running else contextlib.nullcontext():
        _run(server, database, DRIFT, logged=False)
        code, comparison = validate(config, tmp_path / "before")
        assert code == 1, comparison
        keys = sorted(d["key"] for d in comparison["differences"])
        assert keys == [["3"], ["30"], ["4"], ["5"]]
        result = tmp_path / "before" / "result.json"
        repaired = replcheck("resync", "--config", str(config), "--result", str(result), "--apply")
        assert repaired.returncode == 0, repaired.stdout + repaired.stderr
        _run(server, database, LATER, logged=True)
    catch_up(config)

    code, comparison = validate(config, tmp_path / "after")
    assert (code, comparison["status"]) == (0, "in_sync"), comparison.get("differences")
    source, mirror = _rows(server, database, lake)
    assert mirror == source
    assert [104, "drifted", 104, 7] in source and [3, "drifted", 103, 1] in source
    assert read_requests(lake, [format_table(database, "items")]) == []
