"""The tester's source answers as Oracle would: a read at SCN P shows exactly the
transactions committed at or before P, in key order, resuming after a key; its clock is
never behind the reader, never goes back, and never stops inside a DDL's transaction."""

from __future__ import annotations

import dataclasses
from decimal import Decimal

from cdc_core.capture.position import Position
from cdc_core.capture.source import LOCATOR_COLUMN
from tests.generative.oracle.history import History, render
from tests.generative.oracle.model import interpret
from tests.generative.oracle.source import ModelSnapshotReader, ModelUnavailable, SourceClock
from tests.generative.oracle.tables import ACCOUNTS, EVENTS, TABLES
from tests.generative.oracle.workload import Ddl, Features, Op, Txn, Workload

FEATURES = dataclasses.replace(Features(), interleave=False)
PICKS = tuple(range(3, 15))


class FixedClock(SourceClock):
    """A clock set by the test."""

    def __init__(self, history: History, scn: int) -> None:
        super().__init__(history, 0)
        self.scn = scn

    def now(self) -> int:
        return self.scn


def _inserts(count: int, table: int = ACCOUNTS) -> Txn:
    return Txn(tuple(Op("insert", table, (*PICKS[:-1], 7 * i)) for i in range(count)))


def _history(*items: Txn | Ddl) -> History:
    return render(interpret(Workload(items), FEATURES), FEATURES)


def _keys(history: History, scn: int, after: tuple[object, ...] | None, limit: int) -> list:
    chunk = ModelSnapshotReader(history, FixedClock(history, scn)).read_chunk(
        TABLES[ACCOUNTS].name, after, limit
    )
    assert chunk.position == Position(scn, str(scn))
    rows = [row for batch in chunk.snapshot.batches for row in batch.to_pylist()]
    return [[row["ID"] for row in rows], chunk.last_key]


def test_a_chunk_at_p_holds_exactly_the_transactions_committed_up_to_p() -> None:
    history = _history(_inserts(2), _inserts(1))
    first, second = history.positions
    assert first is not None and second is not None
    ids = sorted(int(str(row["ID"])) for row in history.script.final.rows[ACCOUNTS].values())
    assert _keys(history, first - 1, None, 10) == [[], None]
    assert len(_keys(history, first, None, 10)[0]) == 2
    assert len(_keys(history, second - 1, None, 10)[0]) == 2
    assert _keys(history, second, None, 10) == [ids, None]


def test_chunks_come_in_key_order_and_resume_after_the_last_key() -> None:
    history = _history(_inserts(5))
    (end,) = history.positions
    assert end is not None
    ids = sorted(int(str(row["ID"])) for row in history.script.final.rows[ACCOUNTS].values())
    assert _keys(history, end, None, 2) == [ids[:2], (ids[1],)]
    assert _keys(history, end, (ids[1],), 2) == [ids[2:4], (ids[3],)]
    assert _keys(history, end, (ids[3],), 2) == [ids[4:], None]


def test_a_chunk_shows_a_default_a_ddl_gave_existing_rows_and_their_rowids() -> None:
    history = _history(_inserts(1), Ddl("add_default", ACCOUNTS, 7))
    end = history.positions[-1]
    assert end is not None
    reader = ModelSnapshotReader(history, FixedClock(history, end))
    chunk = reader.read_chunk(TABLES[ACCOUNTS].name, None, 10)
    ((rowid, _),) = history.script.final.rows[ACCOUNTS].items()
    (row,) = next(chunk.snapshot.batches).to_pylist()
    assert (row["X1"], row[LOCATOR_COLUMN]) == (7, rowid)
    assert "X1" in chunk.snapshot.description.schema.names


def test_a_table_without_a_key_is_one_chunk() -> None:
    history = _history(_inserts(3, EVENTS))
    (end,) = history.positions
    assert end is not None
    reader = ModelSnapshotReader(history, FixedClock(history, end))
    chunk = reader.read_chunk(TABLES[EVENTS].name, None, 1)
    assert chunk.last_key is None
    assert sum(batch.num_rows for batch in chunk.snapshot.batches) == 3


def test_unavailable_values_are_read_as_of_the_commit() -> None:
    set_memo = (0, *(3,) * 6, *(5,) * 5)  # an update of every column of the first row
    history = _history(_inserts(1), Txn((Op("update", ACCOUNTS, set_memo),)))
    first, second = history.positions
    assert first is not None and second is not None
    ((rowid, row),) = history.script.final.rows[ACCOUNTS].items()
    hook = ModelUnavailable(history)
    table = TABLES[ACCOUNTS].name
    before = hook(table, rowid, Position(first, ""), ["MEMO", "BALANCE"])
    after = hook(table, rowid, Position(second, ""), ["MEMO", "BALANCE"])
    assert after == {"MEMO": row["MEMO"], "BALANCE": row["BALANCE"]}
    assert before is not None and before != after
    assert isinstance(after["BALANCE"], Decimal)
    assert hook(table, "AAAS00AAFAAA9999999", Position(second, ""), ["MEMO"]) is None


def test_the_clock_follows_the_reader_and_never_stops_inside_a_ddl() -> None:
    history = _history(_inserts(1), Ddl("add_default", ACCOUNTS, 7), _inserts(1))
    clock = SourceClock(history, seed=5)
    first_scn = int(str(history.records[0]["SCN"]))
    assert clock.now() == first_scn - 1  # the recording has not begun
    (ddl_row, ddl_commit), nows = history.ddl_transactions()[0], []
    for record in history.records:
        clock.read(int(str(record["SCN"])))
        nows.append(clock.now())
        assert clock.read_upto <= nows[-1] <= clock.end
        assert not ddl_row <= nows[-1] < ddl_commit
    assert nows == sorted(nows)
