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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc_core.capture.source import Idle
from cdc_core.errors import TransientError
from connectors.postgres.log_reader import PostgresLogReader
from connectors.postgres.source_config import PostgresSourceConfig
from tests.cli_runs import WAIT_S, cdc_running, stop, wait_for
from tests.connectors.source_outage import (
    RETRIES,
    assert_each_change_once,
    assert_not_retried,
    lake_position,
    mirror,
    outage_config,
)
from tests.private_servers import PostgresServer, _PostgresProcess, haltable_postgres

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

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
    return outage_config(work, f"{server.url('test')}?idle_s=0.2", TABLE, retry)


def _streaming(log: Path) -> Callable[[], bool]:
    """Whether the pipeline has loaded the table and reads the slot."""
    return lambda: "streaming slot replcheck" in log.read_text()


def _source(server: PostgresServer) -> dict[int, dict[str, Any]]:
    with contextlib.closing(server.connect("test")) as connection:
        rows = connection.execute("SELECT id, v FROM a").fetchall()
    return {id_: {"id": id_, "v": v} for id_, v in rows}


def test_no_retry_exits_2_naming_the_closed_connection_and_the_position(
    cluster: _PostgresProcess, tmp_path: Path
) -> None:
    server, log = cluster.handle(), tmp_path / "stderr.log"
    with cdc_running(_config(tmp_path, server, "{attempts: 0}"), log) as process:
        wait_for(_streaming(log), process, log)
        _sql(server, "INSERT INTO a VALUES (4, 'w')")
        wait_for(lambda: 4 in mirror(tmp_path, TABLE), process, log)  # its Relation was read
        cluster.halt()
        process.communicate(timeout=WAIT_S)
    err = log.read_text()

    assert process.returncode == 2, err[-3000:]
    # the stream's own connection, or a catalog query between its messages, finds it gone
    closed = "closed the replication connection of slot 'replcheck'"
    assert closed in err or "while streaming slot 'replcheck'" in err, err[-3000:]
    assert re.search(r"the stream had reached LSN [0-9A-F]+/[0-9A-F]+;", err), err[-3000:]
    assert_not_retried(err, tmp_path)
    assert "PGRES_COPY_BOTH" not in err and "no COPY in progress" not in err


def test_a_server_back_within_the_retries_is_followed_without_loss_or_duplicates(
    cluster: _PostgresProcess, tmp_path: Path
) -> None:
    server, log = cluster.handle(), tmp_path / "stderr.log"
    with cdc_running(_config(tmp_path, server, RETRIES), log) as process:
        wait_for(_streaming(log), process, log)
        _sql(server, "INSERT INTO a VALUES (4, 'w'), (5, 'v')", "UPDATE a SET v = 'X' WHERE id = 1")
        cluster.halt()  # the pipeline may not have written these yet: it reads them again
        wait_for(lambda: "attempt 2 of 30" in log.read_text(), process, log)
        cluster.resume()
        _sql(server, "DELETE FROM a WHERE id = 2", "UPDATE a SET v = 'Z' WHERE id = 3")
        _sql(server, "INSERT INTO a VALUES (6, 'u')")
        wait_for(lambda: mirror(tmp_path, TABLE) == _source(server), process, log)
        stop(process)
    err = log.read_text()

    assert process.returncode == 0, err[-3000:]
    assert re.search(
        r"source postgresql\S+ unreachable \(.+\); retrying in 0\.2 s, attempt 1 of 30", err
    )
    assert mirror(tmp_path, TABLE) == _source(server)
    assert_each_change_once(tmp_path, TABLE, {"r": 3, "c": 3, "u": 2, "d": 1})


def test_sigterm_while_waiting_for_the_server_stops_cleanly(
    cluster: _PostgresProcess, tmp_path: Path
) -> None:
    server, log = cluster.handle(), tmp_path / "stderr.log"
    retry = "{attempts: 30, first_wait_s: 5, max_wait_s: 5}"  # a wait SIGTERM must cut short
    with cdc_running(_config(tmp_path, server, retry), log) as process:
        wait_for(_streaming(log), process, log)
        cluster.halt()
        wait_for(lambda: "retrying in 5 s, attempt 1 of 30" in log.read_text(), process, log)
        out = stop(process)
    err = log.read_text()

    assert process.returncode == 0, err[-3000:]
    assert "stopped cleanly" in err and "attempt 2 of 30" not in err
    assert f"the lake holds everything up to position {lake_position(tmp_path)}" in out


def test_a_catalog_query_that_finds_the_server_gone_says_how_far_the_stream_got(
    cluster: _PostgresProcess,
) -> None:
    reader = PostgresLogReader(PostgresSourceConfig(cluster.handle().url("test"), [TABLE]))
    with contextlib.closing(reader.iter_changes(None)) as changes:
        next(item for item in changes if isinstance(item, Idle))  # streaming, between messages
        # An immediate shutdown (a crash): a fast one would wait for the walsender, whose
        # client is not reading here.
        assert cluster.process is not None
        cluster.process.send_signal(signal.SIGQUIT)
        cluster.process.wait(WAIT_S)
        with pytest.raises(TransientError) as caught:
            reader.table_shape(TABLE)  # as the pipeline asks at a quiet moment
    message = str(caught.value)

    assert "cannot connect to Postgres" in message, message
    assert re.search(
        r"while streaming slot 'replcheck'; the stream had reached LSN 0/[0-9A-F]+", message
    )
    assert caught.value.context["slot"] == "replcheck"
