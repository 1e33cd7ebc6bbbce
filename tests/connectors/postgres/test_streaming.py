"""Transactions larger than ``logical_decoding_work_mem`` (64kB here) are streamed while in
progress, interleaved with others: the core commits them in commit order, drops rolled-back
ones, and undoes aborted subtransactions (savepoints) row by row."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from cdc_core.capture.events import Begin, Commit, PartialRollback, RawChange, Rollback, RowChange
from cdc_core.capture.position import Position
from cdc_core.capture.source import Idle
from connectors.postgres.log_reader import PostgresLogReader
from tests.connectors.postgres.helpers import (
    PgCase,
    Tail,
    check_order,
    committed,
    read_until_end,
)

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

KEYS = {"public.t": ("id",)}
PAD = "repeat('x', 100)"  # 3,000 such rows are ~400kB of changes: streamed at 64kB


def _reader(case: PgCase) -> tuple[PostgresLogReader, Position]:
    case.sql("CREATE TABLE t (id int PRIMARY KEY, pad text)")
    reader = case.reader("t", decoding_work_mem="64kB")
    assert read_until_end(reader, None) == []
    return reader, reader.end_position()


def _insert(first: int, last: int) -> str:
    return f"INSERT INTO t SELECT g, {PAD} FROM generate_series({first}, {last}) AS g"


def _row(key: int, pad: str = "x" * 100) -> tuple[Any, ...]:
    return ("c", "t", (key,), {"id": key, "pad": pad}, None)


def _of(changes: Sequence[RawChange], txid: str) -> list[RawChange]:
    return [change for change in changes if change.txid == txid]


def _index(changes: Sequence[RawChange], kind: type, txid: str) -> int:
    return next(i for i, c in enumerate(changes) if isinstance(c, kind) and c.txid == txid)


def _small_txids(changes: Sequence[RawChange], big: str) -> list[str]:
    return [c.txid for c in changes if isinstance(c, Commit) and c.txid != big]


def test_streamed_transaction_rolled_back_leaves_nothing(case: PgCase, tmp_path: Path) -> None:
    reader, start = _reader(case)
    tail = Tail(reader, start)
    big = case.session()
    big.execute(_insert(1000, 2999))
    tail.catch_up()  # decoded while in progress: streamed
    case.sql("INSERT INTO t VALUES (1, 'small')")
    big.execute(_insert(3000, 3999))
    tail.catch_up()
    big.rollback()
    case.sql("INSERT INTO t VALUES (2, 'small')")
    changes = tail.catch_up()
    tail.close()
    check_order(changes)
    big_txid = next(c.txid for c in changes if isinstance(c, Rollback))
    small1, small2 = _small_txids(changes, big_txid)
    # Streamed: the big transaction's changes came before the small one committed, and
    # every one of its 3,000 inserts was sent before the abort.
    assert _index(changes, Begin, big_txid) < _index(changes, Commit, small1)
    big_changes = _of(changes, big_txid)
    assert isinstance(big_changes[0], Begin) and isinstance(big_changes[-1], Rollback)
    # Streamed in insert order, up to what exceeded the memory limit before the abort.
    streamed = [c.locator for c in big_changes[1:-1] if isinstance(c, RowChange)]
    assert len(streamed) > 2000 and streamed == [(k,) for k in range(1000, 1000 + len(streamed))]
    out = committed(changes, tmp_path, KEYS)
    assert out == [(small1, [_row(1, "small")]), (small2, [_row(2, "small")])]


def test_streamed_transaction_commits_after_interleaved_small_ones(
    case: PgCase, tmp_path: Path
) -> None:
    reader, start = _reader(case)
    big = case.session()
    big.execute(_insert(1000, 2999))
    case.sql("INSERT INTO t VALUES (1, 'small')")
    big.execute("UPDATE t SET pad = 'changed' WHERE id = 1000")
    big.execute(_insert(3000, 3999))
    big.commit()
    case.sql("INSERT INTO t VALUES (2, 'small')")
    changes = read_until_end(reader, start)
    check_order(changes)
    big_txid = next(c.txid for c in changes if isinstance(c, Begin) and c.txid != "x")
    small1, small2 = _small_txids(changes, big_txid)
    assert _index(changes, Begin, big_txid) < _index(changes, Commit, small1)
    out = committed(changes, tmp_path, KEYS)
    rows = [_row(k) for k in range(1000, 3000)]
    update = ("u", "t", (1000,), {"id": 1000, "pad": "changed"}, {"id": 1000, "pad": "x" * 100})
    expected_big = [*rows, update, *[_row(k) for k in range(3000, 4000)]]
    assert out == [
        (small1, [_row(1, "small")]),
        (big_txid, expected_big),
        (small2, [_row(2, "small")]),
    ]


def test_savepoint_rollback_inside_a_streamed_transaction(case: PgCase, tmp_path: Path) -> None:
    reader, start = _reader(case)
    big = case.session()
    big.execute(_insert(1000, 2999))
    big.execute("SAVEPOINT s1")
    big.execute("UPDATE t SET pad = 'undone' WHERE id = 1000")
    big.execute("SAVEPOINT s2")
    big.execute(_insert(5000, 6999))  # streamed before the rollback below is decoded
    big.execute("RELEASE SAVEPOINT s2")
    big.execute("DELETE FROM t WHERE id = 1001")
    big.execute("ROLLBACK TO SAVEPOINT s1")
    big.execute("SAVEPOINT s3")
    big.execute("INSERT INTO t VALUES (7, 'kept')")
    big.execute("ROLLBACK TO SAVEPOINT s3")  # never streamed: the server drops it
    big.execute("INSERT INTO t VALUES (8, 'kept')")
    big.commit()
    changes = read_until_end(reader, start)
    check_order(changes)
    (commit,) = [c for c in changes if isinstance(c, Commit)]
    undone = [c.locator for c in changes if isinstance(c, PartialRollback)]
    # Every streamed change of s1 and s2 (the update of 1000, the inserts of s2 sent before
    # the rollback was decoded; the delete of 1001 came too late to be streamed) is undone
    # once: everything but the inserts before s1 and the insert of 8.
    rows = [c for c in changes if isinstance(c, RowChange)]
    in_savepoints = [c.locator for c in rows if c.locator[0] >= 3000 or c.op != "c"]  # type: ignore[index]
    assert (1000,) in undone and len(undone) > 1000
    assert Counter(undone) == Counter(in_savepoints)
    out = committed(changes, tmp_path, KEYS)
    kept = [*(_row(k) for k in range(1000, 3000)), _row(8, "kept")]
    assert out == [(commit.txid, kept)]


def _feed_part(reader: PostgresLogReader, start: Position, count: int) -> list[RawChange]:
    """The first ``count`` raw changes from ``start``, then the session is closed."""
    end = reader.end_position()
    taken: list[RawChange] = []
    iterator = reader.iter_changes(start)
    for item in iterator:
        if isinstance(item, Idle):
            assert item.position is None or item.position < end, "fewer changes than the cut"
            continue
        taken.append(item)
        if len(taken) == count:
            break
    iterator.close()
    return taken


@pytest.mark.parametrize(
    ("cut", "told"),
    [(1, True), (700, True), (2500, False), (3004, True)],
    ids=["first-change", "in-stream-told", "in-stream-not-told", "after-big-commit"],
)
def test_restart_inside_streamed_transactions(
    case: PgCase, tmp_path: Path, cut: int, told: bool
) -> None:
    """Stop after ``cut`` raw changes, checkpoint the buffer, restore it and resume from its
    restart position: the committed output equals an uninterrupted read."""
    from cdc_core.buffer.transaction_buffer import BufferConfig, TransactionBuffer

    reader, start = _reader(case)
    big = case.session()
    big.execute(_insert(1000, 2999))
    case.sql("INSERT INTO t VALUES (1, 'small')")
    big.execute(_insert(3000, 3999))
    case.sql("INSERT INTO t VALUES (2, 'small')")
    big.commit()
    case.sql("INSERT INTO t VALUES (3, 'small')")
    expected = committed(read_until_end(reader, start), tmp_path / "whole", KEYS)

    config = BufferConfig(1 << 16, tmp_path / "spill")
    buffer = TransactionBuffer(config)
    emitted = [t.txid for change in _feed_part(reader, start, cut) for t in buffer.feed(change)]
    state = buffer.checkpoint_state()
    restored = TransactionBuffer.restore(config, state)
    held = [info.txid for info in restored.open_transactions()]
    resume_at = restored.safe_restart_position() or start
    rest = read_until_end(reader, resume_at, held=held if told else None)
    assert all(change.position > resume_at for change in rest)
    emitted += [t.txid for change in rest for t in restored.feed(change)]
    assert emitted == [txid for txid, _ in expected]
    if told:
        assert [c.txid for c in rest if isinstance(c, Rollback)] == held


def test_relation_first_described_in_a_committed_stream(case: PgCase, tmp_path: Path) -> None:
    """pgoutput does not describe a table again after a stream that described it commits."""
    reader, start = _reader(case)
    tail = Tail(reader, start)
    big = case.session()
    big.execute(_insert(1000, 2999))
    tail.catch_up()
    big.commit()
    case.sql("INSERT INTO t VALUES (1, 'small')", "UPDATE t SET pad = 'y' WHERE id = 1000")
    changes = tail.catch_up()
    tail.close()
    out = committed(changes, tmp_path, KEYS)
    update = ("u", "t", (1000,), {"id": 1000, "pad": "y"}, {"id": 1000, "pad": "x" * 100})
    assert [rows for _, rows in out][1:] == [[_row(1, "small")], [update]]


def test_slot_confirms_only_what_was_acknowledged(case: PgCase) -> None:
    """A stream block of old changes after an acknowledged commit must not make the client
    confirm later commits it was never told are durable (psycopg2's own feedback would)."""
    reader, start = _reader(case)
    s, u = case.session(), case.session()
    s.execute(_insert(1000, 1149))  # ~37kB: streamed only once another change needs room
    case.sql("INSERT INTO t VALUES (1, 'acknowledged')")
    case.sql("INSERT INTO t VALUES (2, 'not acknowledged')")
    u.execute(_insert(5000, 5179))  # pushes the decoder over 64kB: the larger, s, is streamed
    tail = Tail(reader, start)
    changes = tail.catch_up()
    first, second = [c for c in changes if isinstance(c, Commit)]
    streamed = next(c.txid for c in changes if isinstance(c, RowChange) and c.locator == (1000,))
    # s's old changes were streamed after both commits: the last data before a keepalive.
    assert _index(changes, Commit, second.txid) < _index(changes, Begin, streamed)
    reader.acknowledge(first.position)
    time.sleep(2.5)  # status updates and keepalives go back and forth meanwhile
    tail.catch_up()
    confirmed = case.connection.execute(
        "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = 'replcheck'"
    ).fetchone()
    tail.close()
    assert confirmed is not None and confirmed[0] == first.position.text


def test_a_closed_session_has_confirmed_and_released_the_slot(
    case: PgCase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Closing a session mid-stream (the server still sending a streamed transaction) ends
    the stream cleanly: when close returns, the server has applied the last confirmation
    and released the slot, so the next session starts at once."""
    import connectors.postgres.log_reader as log_reader

    reader, start = _reader(case)
    case.sql("INSERT INTO t VALUES (1, 'small')")
    big = case.session()
    big.execute(_insert(1000, 2999))  # streamed while in progress
    iterator = reader.iter_changes(start)
    commit = next(item for item in iterator if isinstance(item, Commit))
    streamed = next(item for item in iterator if not isinstance(item, Idle))
    assert isinstance(streamed, Begin)  # the big transaction's stream has begun
    reader.acknowledge(commit.position)
    iterator.close()
    slot = case.connection.execute(
        "SELECT active_pid, confirmed_flush_lsn::text FROM pg_replication_slots"
        " WHERE slot_name = 'replcheck'"
    ).fetchone()
    assert slot == (None, commit.position.text)
    monkeypatch.setattr(log_reader, "SLOT_RELEASE_S", 0.0)  # no waiting for a release
    big.commit()
    changes = read_until_end(reader, commit.position)
    assert [c.locator for c in changes if isinstance(c, RowChange)][:1] == [(1000,)]
    assert [c.txid for c in changes if isinstance(c, Commit)] == [streamed.txid]
