"""Exact resumption: restarting the reader from any position it handed out (inside a
transaction, across a binlog rotation) loses and repeats nothing; and the traps of
mysql-replication the reader avoids."""

from __future__ import annotations

import contextlib

import pytest

from cdc_core.capture.events import Commit, RawChange, RowChange
from cdc_core.capture.position import Position
from cdc_core.capture.source import Idle
from connectors.mariadb.position import split_position
from tests.connectors.mariadb.binlog_helpers import BinlogCase, check_order, read_until_end

pytestmark = [pytest.mark.integration, pytest.mark.mariadb]


def _workload(case: BinlogCase) -> None:
    case.sql("CREATE TABLE r (id INT PRIMARY KEY, v INT)", "CREATE TABLE q (id INT PRIMARY KEY)")
    case.sql(
        "BEGIN",
        "INSERT INTO r VALUES (1, 1), (2, 2)",
        "INSERT INTO q VALUES (1)",
        "UPDATE r SET v = v + 10",
        "COMMIT",
        "FLUSH BINARY LOGS",
        "BEGIN",
        "DELETE FROM r WHERE id = 1",
        "INSERT INTO q VALUES (2), (3)",
        "COMMIT",
        "INSERT INTO r VALUES (3, 3)",
    )


def _after(changes: list[RawChange], position: Position) -> list[RawChange]:
    return [change for change in changes if change.position > position]


def _at(changes: list[RawChange], position: Position) -> list[RawChange]:
    return [change for change in changes if change.position == position]


def test_restart_from_any_handed_out_position_loses_and_repeats_nothing(
    case: BinlogCase,
) -> None:
    reader = case.reader("r", "q")
    start = reader.end_position()
    _workload(case)
    end = reader.end_position()
    changes = read_until_end(reader, start, end)
    check_order(changes)
    files = {split_position(c.position.value, "mariadb-bin")[0] for c in changes}
    assert len(files) == 2, "the workload spans a binlog rotation"
    assert len([c for c in changes if isinstance(c, RowChange)]) == 9
    for position in sorted({change.position for change in changes}):
        again = read_until_end(reader, position, end)
        # Everything after the restart position, in the same order; what lies at it is
        # yielded again in full, except a Commit there (the next transaction starts there).
        assert _after(again, position) == _after(changes, position), f"restart at {position}"
        at = _at(changes, position)
        expected_again = [] if isinstance(at[0], Commit) else at
        assert _at(again, position) == expected_again, f"restart at {position}"


def test_restart_inside_a_transaction_knows_its_id_and_its_tables(case: BinlogCase) -> None:
    reader = case.reader("r", "q")
    start = reader.end_position()
    _workload(case)
    changes = read_until_end(reader, start)
    inside = next(c for c in changes if isinstance(c, RowChange) and c.table.endswith(".q"))
    again = read_until_end(reader, inside.position)
    assert isinstance(again[0], RowChange) and again[0].txid == inside.txid
    assert again[0] == inside  # decoded although its table map precedes the start


def test_a_large_transaction_is_read_once_then_the_reader_idles(case: BinlogCase) -> None:
    # blocking=False makes mysql-replication stop (or reconnect in a loop) at the log's
    # end; the reader blocks and turns the server's heartbeats into Idle markers instead.
    case.sql("CREATE TABLE big (id INT PRIMARY KEY, pad VARCHAR(200))")
    reader = case.reader("big")
    start = reader.end_position()
    values = ", ".join(f"({i}, REPEAT('x', 200))" for i in range(1, 3001))
    case.sql("BEGIN", f"INSERT INTO big VALUES {values}", "UPDATE big SET pad = 'y'", "COMMIT")
    end = reader.end_position()
    seen: list[RawChange] = []
    idles: list[Idle] = []
    iterator = reader.iter_changes(start)
    with contextlib.closing(iterator):
        for item in iterator:
            if isinstance(item, Idle):
                idles.append(item)
                if len(idles) == 3:
                    break
            else:
                assert not idles, "a change came after the reader was idle"
                seen.append(item)
    rows = [c for c in seen if isinstance(c, RowChange)]
    assert [c.op for c in rows] == ["c"] * 3000 + ["u"] * 3000
    created = [c.locator for c in rows if c.op == "c"]
    assert sorted(created, key=repr) == sorted([(i,) for i in range(1, 3001)], key=repr)
    assert isinstance(seen[-1], Commit) and seen[-1].position == end
    assert all(idle.position == end for idle in idles)


def test_mysql_replication_with_is_mariadb_ignores_the_start_position(
    full_case: BinlogCase,
) -> None:
    """The trap the reader avoids by asking for a file+offset dump (is_mariadb=False)."""
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.event import RotateEvent

    case = full_case
    case.sql("CREATE TABLE early (id INT PRIMARY KEY)", "INSERT INTO early VALUES (1)")
    case.sql("FLUSH BINARY LOGS")
    reader = case.reader("early")
    start = reader.end_position()
    case.sql("INSERT INTO early VALUES (2)")
    log_file, offset = split_position(start.value, "mariadb-bin")
    server = case.server
    stream = BinLogStreamReader(
        connection_settings={
            "host": server.host,
            "port": server.port,
            "user": server.user,
            "password": server.password,
        },
        server_id=4242,
        is_mariadb=True,
        log_file=log_file,
        log_pos=offset,
        resume_stream=True,
        blocking=False,
        only_events=[RotateEvent],
        enable_logging=False,
    )
    try:
        first = next(iter(stream))  # the server names where it starts sending
        sent_from = (first.next_binlog, first.position)
    finally:
        stream.close()
    assert sent_from != (log_file, offset)
    # The oldest binlog the server still has: the start position was ignored.
    assert sent_from[1] == 4 and sent_from[0] < log_file
    ours = [c.locator for c in read_until_end(reader, start) if isinstance(c, RowChange)]
    assert ours == [(2,)]
