"""SIGKILL ``replcheck cdc run`` while it refreshes a table after a DDL, and restart it.

The refresh's progress is in the checkpoint: a restart resumes it from the last chunk the
lake holds (re-reading at most the chunks written after it), never acts on the DDL twice,
and ends with a lake equal to the source. Kill moments are random but the run is bounded:
the last run stops by itself once caught up.
"""

from __future__ import annotations

import random
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from cdc_core.lake.layout import read_marks
from cdc_core.pipeline.checkpoint import read_checkpoint
from tests.cdc_core.lake_model import changelog_state
from tests.cli_runs import catch_up_logged, start_catching_up
from tests.connectors.mariadb.pipeline_helpers import execute, lake_rows, source_rows
from tests.private_servers import MariaDBServer

pytestmark = [pytest.mark.integration, pytest.mark.mariadb]

ROWS = 3000
KILLS = 6


def _config(work: Path, server: MariaDBServer, database: str) -> Path:
    config = work / "replcheck.yaml"
    config.write_text(
        "connections:\n"
        f'  src: {{url: "{server.url(database)}?heartbeat_s=0.2&server_id=4343"}}\n'
        f"  lake: {{lake: {work / 'lake'}}}\n"
        "pipelines:\n"
        "  - name: kills\n"
        "    source: src\n"
        "    target: lake\n"
        f"    tables: [{database}.t]\n"
        f"    state_dir: {work / 'state'}\n"
        "    batch: {max_events: 300, max_seconds: 0.3}\n"
        "    refresh: {chunk_rows: 100}\n",
        encoding="utf-8",
    )
    return config


def _wait_until_reading(log: Path, offset: int, process: subprocess.Popen[bytes]) -> None:
    """Until the run started after ``offset`` of its log reads the binlog (or has ended)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        with log.open("rb") as file:
            file.seek(offset)
            if b"reading the log from" in file.read():
                return
        time.sleep(0.05)


def test_kills_during_a_refresh_leave_the_lake_equal_to_the_source(
    mariadb_full: MariaDBServer, mariadb_database: Callable[[MariaDBServer], str], tmp_path: Path
) -> None:
    server, rng = mariadb_full, random.Random(14)
    database = mariadb_database(server)
    execute(server, database, "CREATE TABLE t (id INT PRIMARY KEY, v INT, s VARCHAR(20))")
    for first in range(1, ROWS + 1, 500):
        values = ", ".join(f"({i}, {i}, 'row {i}')" for i in range(first, first + 500))
        execute(server, database, f"INSERT INTO t VALUES {values}")
    config, log = _config(tmp_path, server, database), tmp_path / "cdc.log"
    catch_up_logged(config, log, "kills")  # the initial load
    execute(
        server,
        database,
        "ALTER TABLE t ADD COLUMN c VARCHAR(5) NOT NULL DEFAULT 'new'",
        "UPDATE t SET v = -v WHERE id % 97 = 0",
        "DELETE FROM t WHERE id % 89 = 0",
    )
    kills = during = 0
    for _ in range(KILLS):
        offset = log.stat().st_size
        process = start_catching_up(config, log, "kills")
        _wait_until_reading(log, offset, process)  # started: a busy machine starts slowly
        time.sleep(rng.uniform(0.0, 1.5))
        if process.poll() is not None:
            break  # it finished before this kill
        process.send_signal(signal.SIGKILL)
        process.wait()
        kills += 1
        checkpoint = read_checkpoint(tmp_path / "state")
        during += bool(checkpoint is not None and checkpoint.refreshes)
        execute(server, database, f"UPDATE t SET v = v + 1 WHERE id = {rng.randrange(1, ROWS)}")
    catch_up_logged(config, log, "kills")

    assert during > 0, f"none of {kills} kills hit the refresh: nothing was tested"
    table = f"{database}.t"
    source = source_rows(server, database, "t", ["id"])
    assert lake_rows(tmp_path / "lake", table, ["id"]) == source
    assert changelog_state(tmp_path / "lake", table, ("id",)) == source
    assert table not in read_marks(tmp_path / "lake").refreshing
