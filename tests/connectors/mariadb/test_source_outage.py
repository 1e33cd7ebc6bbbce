"""``replcheck cdc run`` when its MariaDB server stops mid-stream: without retries it exits
2 naming the server (password masked), how far the binlog was read and how far the lake
is, and that a restart resumes from there; with retries it waits for the server and goes
on from its checkpoint, losing and duplicating nothing.

Each test runs its own server (``haltable_mariadb``): the session's shared ones must stay
up for the other tests.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli_runs import WAIT_S, catch_up, cdc_running, stop, wait_for
from tests.connectors.mariadb.pipeline_helpers import execute, source_rows
from tests.connectors.source_outage import (
    RETRIES,
    assert_each_change_once,
    assert_not_retried,
    mirror,
    outage_config,
)
from tests.private_servers import MariaDBServer, _MariaDBProcess, haltable_mariadb

pytestmark = [pytest.mark.integration, pytest.mark.mariadb]

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
    url = f"{server.url('test')}?heartbeat_s=0.2&server_id=4343"
    return outage_config(work, url, TABLE, retry)


def _source(server: MariaDBServer) -> dict[object, dict[str, Any]]:
    """The source table by id, read as the snapshot reader reads it."""
    return {key: row for (key,), row in source_rows(server, "test", "a", ["id"]).items()}


def _in_lake(work: Path, key: int) -> Callable[[], bool]:
    """Whether the lake's mirror holds the row of ``key`` (the binlog stream is live)."""
    return lambda: key in mirror(work, TABLE)


def _in_sync(work: Path, server: MariaDBServer) -> Callable[[], bool]:
    return lambda: mirror(work, TABLE) == _source(server)


def test_no_retry_exits_2_naming_the_server_and_the_position(
    server: _MariaDBProcess, tmp_path: Path
) -> None:
    handle, log = server.handle(), tmp_path / "stderr.log"
    with cdc_running(_config(tmp_path, handle, "{attempts: 0}"), log) as process:
        wait_for(_in_lake(tmp_path, 1), process, log)  # the initial load
        execute(handle, "test", "INSERT INTO a VALUES (4, 'w')")
        wait_for(_in_lake(tmp_path, 4), process, log)  # from the binlog
        server.halt()
        process.communicate(timeout=WAIT_S)
    err = log.read_text()

    assert process.returncode == 2, err[-3000:]
    where = re.escape(f"mysql+pymysql://root@127.0.0.1:{handle.port}/test")
    lost = rf"the binlog connection to server {where} was lost \(.+\); the stream had read"
    assert re.search(rf"{lost} the binlog up to mariadb-bin\.\d+:\d+;", err), err[-3000:]
    assert_not_retried(err, tmp_path)


def test_a_server_back_within_the_retries_is_followed_without_loss_or_duplicates(
    server: _MariaDBProcess, tmp_path: Path
) -> None:
    handle, log = server.handle(), tmp_path / "stderr.log"
    with cdc_running(_config(tmp_path, handle, RETRIES), log) as process:
        wait_for(_in_lake(tmp_path, 1), process, log)  # the initial load
        execute(handle, "test", "INSERT INTO a VALUES (4, 'w')")
        wait_for(_in_lake(tmp_path, 4), process, log)  # from the binlog
        execute(
            handle, "test", "INSERT INTO a VALUES (5, 'v')", "UPDATE a SET v = 'X' WHERE id = 1"
        )
        server.halt()  # the pipeline may not have written these yet: it reads them again
        wait_for(lambda: "attempt 2 of 30" in log.read_text(), process, log)
        server.resume()
        execute(handle, "test", "DELETE FROM a WHERE id = 2", "UPDATE a SET v = 'Z' WHERE id = 3")
        execute(handle, "test", "INSERT INTO a VALUES (6, 'u')")
        wait_for(_in_sync(tmp_path, handle), process, log)
        stop(process)
    err = log.read_text()

    assert process.returncode == 0, err[-3000:]
    assert re.search(
        r"source mysql\S+ unreachable \(.+\); retrying in 0\.2 s, attempt 1 of 30", err
    )
    assert_each_change_once(tmp_path, TABLE, {"r": 3, "c": 3, "u": 2, "d": 1})


def test_a_server_down_at_the_start_is_not_waited_for(
    server: _MariaDBProcess, tmp_path: Path
) -> None:
    # A pipeline that never reached its source (no checkpoint yet) says so at once (a wrong
    # URL would otherwise cost minutes of retries); a source lost after that is retried.
    handle = server.handle()
    server.halt()
    finished = catch_up(_config(tmp_path, handle, RETRIES), expect=2)

    assert f"cannot reach server mysql+pymysql://root@127.0.0.1:{handle.port}/test (" in (
        finished.stderr
    )
    assert "not retried: the pipeline has never reached its source" in finished.stderr
    assert "retrying" not in finished.stderr
