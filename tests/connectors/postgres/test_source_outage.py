"""``replcheck cdc run`` when its PostgreSQL server stops mid-stream: without retries it
exits 2 saying that the server closed the replication connection, how far the stream and
the lake got, and that a restart resumes from there; with retries it waits for the server
and goes on from its checkpoint, losing and duplicating nothing.

Each test runs its own cluster (``haltable_postgres``): the session's shared one must stay
up for the other tests.
"""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc_core.checkpoint import read_checkpoint
from cdc_core.lake import COMMIT_POS, META_COLUMNS, OP, SEQ, LakeTable
from tests.cdc_core.kill_loop import ROOT
from tests.private_servers import PostgresServer, _PostgresProcess, haltable_postgres

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

WAIT_S = 120.0  # how long the test waits for the command to reach a point before failing
TABLE = "public.a"


@pytest.fixture
def cluster() -> Iterator[_PostgresProcess]:
    """A cluster of this test's own, with table ``a`` holding three rows."""
    with haltable_postgres() as process:
        _sql(
            process.handle(),
            "CREATE TABLE a (id int PRIMARY KEY, v text)",
            "INSERT INTO a VALUES (1, 'x'), (2, 'y'), (3, 'z')",
        )
        yield process


def _sql(server: PostgresServer, *statements: str) -> None:
    with contextlib.closing(server.connect("test")) as connection:
        connection.execute("SET synchronous_commit = on")  # flushed: the stream sees it
        for statement in statements:
            connection.execute(statement)


def _config(work: Path, server: PostgresServer, retry: str) -> Path:
    config = work / "pipeline.yaml"
    config.write_text(
        "connections:\n"
        f'  src: {{url: "{server.url("test")}?idle_s=0.2"}}\n'
        f"  lake: {{lake: {work / 'lake'}}}\n"
        "pipelines:\n"
        "  - name: pg\n"
        "    source: src\n"
        "    target: lake\n"
        f"    tables: [{TABLE}]\n"
        f"    state_dir: {work / 'state'}\n"
        f"    retry: {retry}\n",
        encoding="utf-8",
    )
    return config


def _cdc_run(config: Path, log: Path) -> subprocess.Popen[str]:
    """``cdc run`` in the background, its stderr going to ``log`` (read while it runs)."""
    command = [sys.executable, "-m", "validator.cli", "cdc", "run", "--config", str(config)]
    with log.open("w", encoding="utf-8") as stderr:
        return subprocess.Popen(
            [*command, "--pipeline", "pg"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )


def _wait_for(done: Callable[[], bool], process: subprocess.Popen[str], log: Path) -> None:
    """Wait until ``done()``; fail with the command's log if it exits or takes too long."""
    deadline = time.monotonic() + WAIT_S
    while not done():
        if process.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"cdc run (rc {process.poll()}): {log.read_text()[-3000:]}")
        time.sleep(0.1)


def _streaming(log: Path) -> Callable[[], bool]:
    """Whether the pipeline has loaded the table and reads the slot."""
    return lambda: "streaming slot replcheck" in log.read_text()


def _source(server: PostgresServer) -> dict[int, dict[str, Any]]:
    with contextlib.closing(server.connect("test")) as connection:
        rows = connection.execute("SELECT id, v FROM a").fetchall()
    return {id_: {"id": id_, "v": v} for id_, v in rows}


def _lake(work: Path) -> dict[int, dict[str, Any]]:
    from deltalake import DeltaTable

    table = DeltaTable(str(LakeTable(work / "lake", TABLE).mirror)).to_pyarrow_table()
    return {
        row["id"]: {k: v for k, v in row.items() if k not in META_COLUMNS}
        for row in table.to_pylist()
    }


def _changelog(work: Path) -> list[dict[str, Any]]:
    from deltalake import DeltaTable

    return DeltaTable(str(LakeTable(work / "lake", TABLE).changelog)).to_pyarrow_table().to_pylist()


def test_no_retry_exits_2_naming_the_closed_connection_and_the_position(
    cluster: _PostgresProcess, tmp_path: Path
) -> None:
    server, log = cluster.handle(), tmp_path / "stderr.log"
    process = _cdc_run(_config(tmp_path, server, "{attempts: 0}"), log)
    try:
        _wait_for(_streaming(log), process, log)
        _sql(server, "INSERT INTO a VALUES (4, 'w')")
        _wait_for(lambda: 4 in _lake(tmp_path), process, log)  # its Relation was read
        cluster.halt()
        process.communicate(timeout=WAIT_S)
    finally:
        if process.poll() is None:
            process.kill()
    err = log.read_text()

    assert process.returncode == 2, err[-3000:]
    held = read_checkpoint(tmp_path / "state")
    assert held is not None and held.lake_position is not None
    assert "closed the replication connection of slot 'replcheck'" in err
    assert re.search(r"the stream had reached LSN [0-9A-F]+/[0-9A-F]+;", err), err
    assert "not retried (pipelines[].retry.attempts is 0)" in err
    assert f"The lake holds every change up to {held.lake_position}; once the source" in err
    assert "`replcheck cdc run` started again resumes from there" in err
    assert "PGRES_COPY_BOTH" not in err and "no COPY in progress" not in err
    assert "retrying" not in err


def test_a_server_back_within_the_retries_is_followed_without_loss_or_duplicates(
    cluster: _PostgresProcess, tmp_path: Path
) -> None:
    server, log = cluster.handle(), tmp_path / "stderr.log"
    retry = "{attempts: 30, first_wait_s: 0.2, max_wait_s: 0.5}"
    process = _cdc_run(_config(tmp_path, server, retry), log)
    try:
        _wait_for(_streaming(log), process, log)
        _sql(server, "INSERT INTO a VALUES (4, 'w'), (5, 'v')", "UPDATE a SET v = 'X' WHERE id = 1")
        cluster.halt()  # the pipeline may not have written these yet: it reads them again
        _wait_for(lambda: "attempt 2 of 30" in log.read_text(), process, log)
        cluster.resume()
        _sql(server, "DELETE FROM a WHERE id = 2", "UPDATE a SET v = 'Z' WHERE id = 3")
        _sql(server, "INSERT INTO a VALUES (6, 'u')")
        _wait_for(lambda: _lake(tmp_path) == _source(server), process, log)
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=WAIT_S)
    finally:
        if process.poll() is None:
            process.kill()
    err = log.read_text()

    assert process.returncode == 0, err[-3000:]
    assert re.search(
        r"source postgresql\S+ unreachable \(.+\); retrying in 0\.2 s, attempt 1 of 30", err
    )
    assert _lake(tmp_path) == _source(server)
    events = _changelog(tmp_path)
    assert Counter(event[OP] for event in events) == {"r": 3, "c": 3, "u": 2, "d": 1}
    assert len({(event[COMMIT_POS], event[SEQ]) for event in events}) == len(events)


def test_sigterm_while_waiting_for_the_server_stops_cleanly(
    cluster: _PostgresProcess, tmp_path: Path
) -> None:
    server, log = cluster.handle(), tmp_path / "stderr.log"
    retry = "{attempts: 30, first_wait_s: 5, max_wait_s: 5}"  # a wait SIGTERM must cut short
    process = _cdc_run(_config(tmp_path, server, retry), log)
    try:
        _wait_for(_streaming(log), process, log)
        cluster.halt()
        _wait_for(lambda: "retrying in 5 s, attempt 1 of 30" in log.read_text(), process, log)
        process.send_signal(signal.SIGTERM)
        out, _ = process.communicate(timeout=WAIT_S)
    finally:
        if process.poll() is None:
            process.kill()
    err = log.read_text()

    assert process.returncode == 0, err[-3000:]
    held = read_checkpoint(tmp_path / "state")
    assert held is not None and held.lake_position is not None
    assert "stopped cleanly" in err and "attempt 2 of 30" not in err
    assert f"the lake holds everything up to position {held.lake_position}" in out
