"""The pipeline's snapshots: the first one creates the slot and meets its stream at one LSN,
so snapshot rows plus the stream from P equal the source, under a concurrent writer; later
ones (a slot exists) use a temporary slot's snapshot; key-set reads for re-syncs."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Hashable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc_core.buffer.transaction_buffer import BufferConfig, TransactionBuffer
from cdc_core.capture.events import Commit
from connectors.postgres.errors import SlotAheadError
from connectors.postgres.log_reader import position_of
from connectors.postgres.position import lsn_to_int
from connectors.postgres.snapshot import PostgresSnapshotReader
from tests.connectors.postgres.helpers import PgCase, read_until_end

pytestmark = [pytest.mark.integration, pytest.mark.postgres]


def _confirmed(case: PgCase) -> int:
    row = case.connection.execute(
        "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = 'replcheck'"
    ).fetchone()
    assert row is not None
    return lsn_to_int(row[0])


def _rows(tables: Any) -> dict[Hashable, dict[str, Any]]:
    rows = [row for table in tables for batch in table.batches for row in batch.to_pylist()]
    return {(row["id"],): row for row in rows}


def _writer(case: PgCase, stop: threading.Event, commits: list[int]) -> None:
    session = case.session()
    key = 1000
    while not stop.is_set():
        session.execute("INSERT INTO t VALUES (%s, %s)", (key, key))
        session.execute("UPDATE t SET n = n + 1 WHERE id = %s", (key % 500 + 1,))
        session.execute("DELETE FROM t WHERE id = %s", (key - 500,))
        session.commit()
        commits.append(key)
        key += 1


def _after(commits: list[int], more: int, writer: threading.Thread) -> None:
    """Wait until the writer committed ``more`` transactions beyond those seen now (however
    slowly a loaded machine runs it)."""
    target = len(commits) + more
    while len(commits) < target and writer.is_alive():
        threading.Event().wait(0.01)


def test_snapshot_and_stream_meet_at_the_slots_position(case: PgCase, tmp_path: Path) -> None:
    case.sql(
        "CREATE TABLE t (id int PRIMARY KEY, n int)",
        "INSERT INTO t SELECT g, 0 FROM generate_series(1, 500) AS g",
    )
    stop = threading.Event()
    commits: list[int] = []
    writer = threading.Thread(target=_writer, args=(case, stop, commits), daemon=True)
    writer.start()
    try:
        with PostgresSnapshotReader(case.config("t")).snapshot(["t"]) as (position, tables):
            image = _rows(tables)
        _after(commits, 5, writer)  # at least 5 transactions, 15 changes, after the snapshot
    finally:
        stop.set()
        writer.join(timeout=30)
    assert position.value == _confirmed(case)  # the slot was created with the snapshot
    changes = read_until_end(case.reader("t"), position)
    assert all(c.position > position for c in changes if isinstance(c, Commit))
    buffer = TransactionBuffer(BufferConfig(1 << 20, tmp_path / "spill"))
    for change in changes:  # committed changes in commit order; no TOAST: images are whole
        for transaction in buffer.feed(change):
            for committed in transaction.changes:
                row = committed.change
                if row.op == "d":
                    image.pop(row.locator)
                else:
                    assert row.after is not None
                    image[row.locator] = dict(row.after)
    now = case.connection.execute("SELECT id, n FROM t").fetchall()
    assert image == {(key,): {"id": key, "n": n} for key, n in now}
    assert len(changes) > 10  # the writer wrote after the snapshot too


def test_later_snapshots_and_key_set_reads(case: PgCase) -> None:
    case.sql(
        "CREATE TABLE t (id int PRIMARY KEY, n int)",
        "INSERT INTO t VALUES (1, 10), (2, 20), (3, 30)",
    )
    snapshots = PostgresSnapshotReader(case.config("t"))
    with snapshots.snapshot(["t"]) as (first, tables):
        assert len(_rows(tables)) == 3
    case.sql("UPDATE t SET n = 11 WHERE id = 1")
    with snapshots.snapshot(["t"], keys={"t": [(1,), (3,)]}) as (later, tables):
        rows = _rows(tables)
    assert later > first and _confirmed(case) == first.value  # a temporary slot's snapshot
    assert rows == {(1,): {"id": 1, "n": 11}, (3,): {"id": 3, "n": 30}}


def test_asked_keys_with_time_values_as_the_lake_holds_them(case: PgCase) -> None:
    """A table without a key is read again by all its columns; a time there is held as
    microseconds and goes to the server as its text (found by the generative tester,
    postgres-default seed 4005: the pipeline stopped on ``time = bigint``)."""
    case.sql(
        "CREATE TABLE k (id int, t time(6))",
        "INSERT INTO k VALUES (1, '24:00:00'), (2, '23:59:59.999999'), (3, NULL), (4, '00:00')",
    )
    snapshots = PostgresSnapshotReader(case.config("k"))
    asked = [(1, 86_400_000_000), (2, 86_399_999_999), (3, None)]
    with snapshots.snapshot(["k"], keys={"k": asked}) as (_, tables):
        rows = _rows(tables)
    assert sorted((row["id"], row["t"]) for row in rows.values()) == asked


def test_a_slot_confirmed_past_the_snapshot_is_refused(case: PgCase) -> None:
    """A slot that confirmed the log beyond a new snapshot's position (a slot copied from a
    server that was ahead, a client that confirmed too far) would skip the changes between:
    the snapshot reader refuses it, naming the slot and both positions."""
    case.sql("CREATE TABLE t (id int PRIMARY KEY)", "INSERT INTO t VALUES (1)")
    reader = case.reader("t")
    assert read_until_end(reader, None) == []  # creates the slot
    start = reader.end_position()
    ahead = position_of(start.value + 16 * 1024 * 1024)  # beyond the WAL's end
    # The server takes a client's confirmation as it is (LogicalConfirmReceivedLocation).
    reader.acknowledge(ahead)
    assert read_until_end(reader, start) == []  # its status update confirms `ahead`
    deadline = time.monotonic() + 30  # the walsender applies the update on its own time
    while _confirmed(case) != ahead.value:
        assert time.monotonic() < deadline, "the slot never confirmed the acknowledged position"
        time.sleep(0.05)
    snapshots = PostgresSnapshotReader(case.config("t"))
    with pytest.raises(SlotAheadError) as refused, snapshots.snapshot(["t"]):
        pytest.fail("a snapshot behind the slot's confirmed position was read")
    message = str(refused.value)
    assert f"replication slot 'replcheck' has confirmed the log up to {ahead.text}" in message
    assert "Drop the slot" in message
    snapshot_position = refused.value.context["position"]
    assert start.value <= lsn_to_int(snapshot_position) < ahead.value


def test_a_chunk_whose_table_lost_a_column_under_it_is_read_again(case: PgCase) -> None:
    """A refresh's chunk read the table's description, then its definition; a DROP COLUMN
    in between stopped ``cdc run`` with an unexpected ``KeyError`` (postgres-full seed 621).
    The chunk is read again, with the new description."""
    case.sql("CREATE TABLE r (id int PRIMARY KEY, c int, d int)", "INSERT INTO r VALUES (1, 5, 6)")
    reader = PostgresSnapshotReader(case.config("r"))
    reflect = reader.connector.reflect
    reflected: list[str] = []

    def drop_first(table: str) -> Any:
        # describe_table reflects once, then read_one_chunk: drop c before the second.
        reflected.append(table)
        if len(reflected) == 2:
            case.sql("ALTER TABLE r DROP COLUMN c")
        return reflect(table)

    reader.connector.reflect = drop_first  # type: ignore[method-assign]
    chunk = reader.read_chunk("public.r", None, 10)
    rows = [row for batch in chunk.snapshot.batches for row in batch.to_pylist()]
    assert chunk.snapshot.description.schema.names == ["id", "d"]
    assert rows == [{"id": 1, "d": 6}]
    assert len(reflected) == 6  # read twice: three definitions a read (the last under a lock)


def test_a_column_named_like_its_table_dropped_before_the_chunk_is_read(case: PgCase) -> None:
    """The DROP COLUMN came after the chunk's description and definition, before its
    SELECT: the dropped column ``r`` of table ``r`` read as the whole row (PostgreSQL takes
    a table's name as its row), and the run stopped with an unexpected ``ArrowInvalid``
    (postgres-full seed 673). The read now locks the table and checks its definition."""
    case.sql(
        "CREATE TABLE r (id int PRIMARY KEY, r float8, d int)", "INSERT INTO r VALUES (1, 0.5, 6)"
    )
    reader = PostgresSnapshotReader(case.config("r"))
    shared = reader.connector.shared_snapshot
    entered: list[int] = []

    @contextlib.contextmanager
    def dropping_first() -> Iterator[Any]:
        entered.append(1)
        if len(entered) == 1:
            case.sql("ALTER TABLE r DROP COLUMN r")
        with shared() as snapshot:
            yield snapshot

    reader.connector.shared_snapshot = dropping_first  # type: ignore[method-assign]
    chunk = reader.read_chunk("public.r", None, 10)
    rows = [row for batch in chunk.snapshot.batches for row in batch.to_pylist()]
    assert chunk.snapshot.description.schema.names == ["id", "d"]
    assert rows == [{"id": 1, "d": 6}]
    assert len(entered) == 2  # read twice
