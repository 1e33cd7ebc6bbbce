"""``replcheck cdc run`` when its MariaDB server stops mid-stream: without retries it exits
2 naming the server (password masked), how far the binlog was read and how far the lake
is, and that a restart resumes from there; with retries it waits for the server and goes
on from its checkpoint, losing and duplicating nothing.

Each test runs its own server (``haltable_mariadb``): the session's shared ones must stay
up for the other tests.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cdc_core.checkpoint import read_checkpoint
from cdc_core.lake import COMMIT_POS, OP, SEQ, LakeTable
from tests.connectors.mariadb.pipeline_helpers import changelog, execute, lake_rows, source_rows
from tests.private_servers import MariaDBServer, _MariaDBProcess, haltable_mariadb

pytestmark = [pytest.mark.integration, pytest.mark.mariadb]

ROOT = Path(__file__).resolve().parents[3]
WAIT_S = 120.0  # how long the test waits for the command to reach a point before failing
TABLE = "test.a"


@pytest.fixture
def server() -> Iterator[_MariaDBProcess]:
    """A server of this test's own, with table ``test.a`` holding three rows."""
    with haltable_mariadb() as process:
        execute(
            process.handle(),
            "test",
            "CREATE TABLE a (id INT PRIMARY KEY, v VARCHAR(10))",
            "INSERT INTO a VALUES (1, 'x'), (2, 'y'), (3, 'z')",
        )
        yield process


def _config(work: Path, server: MariaDBServer, retry: str) -> Path:
    config = work / "pipeline.yaml"
    config.write_text(
        "connections:\n"
        f'  src: {{url: "{server.url("test")}?heartbeat_s=0.2&server_id=4343"}}\n'
        f"  lake: {{lake: {work / 'lake'}}}\n"
        "pipelines:\n"
        "  - name: shop\n"
        "    source: src\n"
        "    target: lake\n"
        f"    tables: [{TABLE}]\n"
        f"    state_dir: {work / 'state'}\n"
        f"    retry: {retry}\n",
        encoding="utf-8",
    )
    return config


def _cdc_run(config: Path, log: Path, *extra: str) -> subprocess.Popen[str]:
    """``cdc run`` in the background, its stderr going to ``log`` (read while it runs)."""
    command = [sys.executable, "-m", "validator.cli", "cdc", "run", "--config", str(config)]
    with log.open("w", encoding="utf-8") as stderr:
        return subprocess.Popen(
            [*command, "--pipeline", "shop", *extra],
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


def _mirror(work: Path) -> dict[tuple[object, ...], dict[str, object]]:
    """The lake's mirror of the table by key (empty before the initial load wrote it)."""
    if not (LakeTable(work / "lake", TABLE).mirror / "_delta_log").exists():
        return {}
    return lake_rows(work / "lake", TABLE, ["id"])


def _in_lake(work: Path, key: int) -> Callable[[], bool]:
    """Whether the lake's mirror holds the row of ``key`` (the binlog stream is live)."""
    return lambda: (key,) in _mirror(work)


def _in_sync(work: Path, server: MariaDBServer) -> Callable[[], bool]:
    return lambda: _mirror(work) == source_rows(server, "test", "a", ["id"])


def test_no_retry_exits_2_naming_the_server_and_the_position(
    server: _MariaDBProcess, tmp_path: Path
) -> None:
    handle, log = server.handle(), tmp_path / "stderr.log"
    process = _cdc_run(_config(tmp_path, handle, "{attempts: 0}"), log)
    try:
        _wait_for(_in_lake(tmp_path, 1), process, log)  # the initial load
        execute(handle, "test", "INSERT INTO a VALUES (4, 'w')")
        _wait_for(_in_lake(tmp_path, 4), process, log)  # from the binlog
        server.halt()
        process.communicate(timeout=WAIT_S)
    finally:
        if process.poll() is None:
            process.kill()
    err = log.read_text()

    assert process.returncode == 2, err[-3000:]
    held = read_checkpoint(tmp_path / "state")
    assert held is not None and held.lake_position is not None
    where = re.escape(f"mysql+pymysql://root@127.0.0.1:{handle.port}/test")
    lost = rf"the binlog connection to server {where} was lost \(.+\); the stream had read"
    assert re.search(rf"{lost} the binlog up to mariadb-bin\.\d+:\d+;", err), err[-3000:]
    assert "not retried (pipelines[].retry.attempts is 0)" in err
    assert f"The lake holds every change up to {held.lake_position}; once the source" in err
    assert "`replcheck cdc run` started again resumes from there" in err
    assert "retrying" not in err


def test_a_server_back_within_the_retries_is_followed_without_loss_or_duplicates(
    server: _MariaDBProcess, tmp_path: Path
) -> None:
    handle, log = server.handle(), tmp_path / "stderr.log"
    retry = "{attempts: 30, first_wait_s: 0.2, max_wait_s: 0.5}"
    process = _cdc_run(_config(tmp_path, handle, retry), log)
    try:
        _wait_for(_in_lake(tmp_path, 1), process, log)  # the initial load
        execute(handle, "test", "INSERT INTO a VALUES (4, 'w')")
        _wait_for(_in_lake(tmp_path, 4), process, log)  # from the binlog
        execute(
            handle, "test", "INSERT INTO a VALUES (5, 'v')", "UPDATE a SET v = 'X' WHERE id = 1"
        )
        server.halt()  # the pipeline may not have written these yet: it reads them again
        _wait_for(lambda: "attempt 2 of 30" in log.read_text(), process, log)
        server.resume()
        execute(handle, "test", "DELETE FROM a WHERE id = 2", "UPDATE a SET v = 'Z' WHERE id = 3")
        execute(handle, "test", "INSERT INTO a VALUES (6, 'u')")
        _wait_for(_in_sync(tmp_path, handle), process, log)
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=WAIT_S)
    finally:
        if process.poll() is None:
            process.kill()
    err = log.read_text()

    assert process.returncode == 0, err[-3000:]
    assert re.search(
        r"source mysql\S+ unreachable \(.+\); retrying in 0\.2 s, attempt 1 of 30", err
    )
    events = changelog(tmp_path / "lake", TABLE)
    assert Counter(event[OP] for event in events) == {"r": 3, "c": 3, "u": 2, "d": 1}
    assert len({(event[COMMIT_POS], event[SEQ]) for event in events}) == len(events)


def test_until_caught_up_waits_for_a_server_down_at_the_start(
    server: _MariaDBProcess, tmp_path: Path
) -> None:
    handle, log = server.handle(), tmp_path / "stderr.log"
    execute(handle, "test", "INSERT INTO a VALUES (4, 'w')")
    server.halt()
    retry = "{attempts: 30, first_wait_s: 0.2, max_wait_s: 0.5}"
    process = _cdc_run(_config(tmp_path, handle, retry), log, "--until-caught-up")
    try:
        _wait_for(lambda: "attempt 1 of 30" in log.read_text(), process, log)
        server.resume()
        out, _ = process.communicate(timeout=WAIT_S)
    finally:
        if process.poll() is None:
            process.kill()
    err = log.read_text()

    assert process.returncode == 0, err[-3000:]
    assert f"cannot reach server mysql+pymysql://root@127.0.0.1:{handle.port}/test (" in err
    assert "the lake holds everything up to position" in out
    assert _mirror(tmp_path) == source_rows(handle, "test", "a", ["id"])
