"""Hand-written V$LOGMNR_CONTENTS rows through the Oracle connector's row handling and the CDC
core (transaction buffer with spill, full-width rebuild by ROWID), asserting the exact
committed events.

``data/shop_contents.jsonl`` is WRITTEN BY HAND, not captured from a server: rows shaped as
LogMiner documents them (Oracle Database Utilities, "LogMiner"; Database Reference,
V$LOGMNR_CONTENTS) for two tables of a server whose clock is in Europe/Berlin: interleaved
transactions, a rollback to a savepoint (``ROLLBACK = 1`` rows), a full rollback, updates
and deletes without supplemental logging of all columns, an insert whose SQL_REDO spans
three CSF rows, a row moving between partitions (DELETE + INSERT in one redo record), a
non-captured table and a SELECT FOR UPDATE row.
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import pytest

from cdc_core.buffer.transaction_buffer import BufferState, TransactionBuffer
from cdc_core.capture.events import (
    ABSENT,
    Begin,
    Commit,
    PartialRollback,
    RawChange,
    Rollback,
    RowChange,
)
from cdc_core.rebuild.image_store import RowImageStore
from tests.connectors.oracle.harness import DATA, Core, Event, until_idle
from tests.connectors.oracle.replay import ReplayConfig, ReplayLogReader

R1, R2, R3, R4, R5, R6 = (f"AAAR3sAAEAAAACXAA{c}" for c in "ABCDEF")
R7 = "AAAR3sAAEAAAACYAAA"
E1, E2 = "AAASxyAAFAAAAB1AAA", "AAASxzAAGAAAAC2AAA"
T1, T2, T3, T4, T5, T6, T7, T8, T9 = (
    "0A001F00E7030000", "0B000300A1040000", "0C001100B2050000", "0D000800C3060000",
    "0E000200D4070000", "0F001500E5080000", "10000900F6090000", "11000400070A0000",
    "12000600180B0000",
)  # fmt: skip
PLACED = dt.datetime(2026, 5, 1, 9, 59)
NOTE = "n" * 3000 + "O'Brien" + "p" * 6000


def order(key: int, customer: str, amount: str, note: str | None = None) -> dict[str, object]:
    return {"ID": key, "CUSTOMER": customer, "AMOUNT": Decimal(amount), "STATUS": "NEW       ",
            "PLACED": PLACED, "NOTE": note}  # fmt: skip


O1, O2, O3 = order(1, "alice", "120"), order(2, "bob", "15.5", "gift"), order(3, "carol", "7")
O4, O7 = order(4, "dave", "40"), order(7, "trent", "1000", NOTE)
AT = dt.datetime(2026, 5, 1, 8, 0, 40, 250000, tzinfo=dt.UTC)
EV1 = {"ID": 1, "REGION": "EU", "PAYLOAD": b"\x00\xff", "AT": AT}
EV2 = EV1 | {"REGION": "US"}
ORD, EVT = "SHOP.ORDERS", "SHOP.EVENTS"

EXPECTED = [
    Event(T1, 1005, 0, "c", ORD, R1, O1, None),
    Event(T1, 1005, 1, "c", ORD, R2, O2, None),
    Event(T2, 1007, 0, "c", ORD, R3, O3, None),
    Event(T2, 1007, 1, "u", ORD, R3, O3 | {"STATUS": "PAID      "}, O3),
    Event(T3, 1015, 0, "c", ORD, R4, O4, None),
    Event(T6, 1035, 0, "c", ORD, R7, O7, None),
    Event(T5, 1036, 0, "u", ORD, R1, O1 | {"AMOUNT": Decimal("130.5")}, O1),
    Event(T5, 1036, 1, "d", ORD, R2, None, O2),
    Event(T7, 1042, 0, "c", EVT, E1, EV1, None),
    Event(T8, 1053, 0, "u", EVT, E2, EV2, EV1),
    Event(T8, 1053, 1, "u", EVT, E2, EV2 | {"PAYLOAD": b"\xbe\xef"}, EV2),
    Event(T9, 1062, 0, "d", EVT, E2, None, EV2 | {"PAYLOAD": b"\xbe\xef"}),
]


@pytest.fixture
def shop() -> ReplayLogReader:
    return ReplayLogReader(
        ReplayConfig(DATA / "shop_contents.jsonl", DATA / "shop_tables.json", "Europe/Berlin")
    )


def raw_changes(reader: ReplayLogReader) -> list[RawChange]:
    return list(until_idle(reader.iter_changes(None)))


def test_the_recording_gives_the_exact_committed_events(
    shop: ReplayLogReader, tmp_path: Path
) -> None:
    core = Core(tmp_path)
    assert core.run(shop) == EXPECTED


def test_raw_changes_come_in_log_order_with_transaction_control(shop: ReplayLogReader) -> None:
    changes = raw_changes(shop)
    positions = [change.position.value for change in changes]
    assert positions == sorted(positions)
    kinds = [(type(c).__name__, c.txid, c.position.value) for c in changes]
    assert kinds[:7] == [
        ("Begin", T1, 1000), ("RowChange", T1, 1001), ("Begin", T2, 1002),
        ("RowChange", T2, 1003), ("RowChange", T1, 1004), ("Commit", T1, 1005),
        ("RowChange", T2, 1006),
    ]  # fmt: skip
    undo = [c for c in changes if isinstance(c, PartialRollback)]
    assert [(u.txid, u.locator) for u in undo] == [(T3, R5), (T3, R4), (T4, R6)]
    assert [c.txid for c in changes if isinstance(c, Rollback)] == [T4]
    first_commit = next(c for c in changes if isinstance(c, Commit))
    # TIMESTAMP is the server's wall clock (Europe/Berlin, +02:00 in May).
    assert first_commit.commit_ts == dt.datetime(2026, 5, 1, 8, 0, 5, tzinfo=dt.UTC)
    assert sum(isinstance(c, Begin) for c in changes) == 9


def test_updates_without_supplemental_logging_carry_only_what_the_redo_holds(
    shop: ReplayLogReader, tmp_path: Path
) -> None:
    updates = [c for c in raw_changes(shop) if isinstance(c, RowChange) and c.op == "u"]
    status = updates[0]
    assert status.locator == R3
    assert status.after == {"ID": ABSENT, "CUSTOMER": ABSENT, "AMOUNT": ABSENT,
                            "STATUS": "PAID      ", "PLACED": ABSENT, "NOTE": ABSENT}  # fmt: skip
    assert status.before is not None and status.before["STATUS"] == "NEW       "
    rebuilt = [e for e in Core(tmp_path).run(shop) if e.op == "u"]
    assert all(ABSENT not in e.after.values() for e in rebuilt if e.after)


def test_a_csf_continued_insert_is_one_change(shop: ReplayLogReader) -> None:
    (insert,) = [c for c in raw_changes(shop) if isinstance(c, RowChange) and c.locator == R7]
    assert insert.after is not None and insert.after["NOTE"] == NOTE
    assert len(NOTE) > 8000  # longer than two 4000-byte SQL_REDO pieces


def test_a_row_movement_is_one_update_to_the_new_rowid(shop: ReplayLogReader) -> None:
    moves = [c for c in raw_changes(shop) if isinstance(c, RowChange) and c.new_locator]
    assert [(m.op, m.locator, m.new_locator) for m in moves] == [("u", E1, E2)]
    assert moves[0].after == EV2


def cut_points() -> list[int]:
    reader = ReplayLogReader(
        ReplayConfig(DATA / "shop_contents.jsonl", DATA / "shop_tables.json", "Europe/Berlin")
    )
    return list(range(1, len(raw_changes(reader))))


@pytest.mark.parametrize("cut", cut_points())
def test_a_restart_anywhere_gives_the_same_events(
    shop: ReplayLogReader, tmp_path: Path, cut: int
) -> None:
    """Checkpoint after ``cut`` raw changes (often inside open transactions, and between
    changes sharing one SCN), restart from scratch and resume at the safe position."""
    changes = raw_changes(shop)
    first = Core(tmp_path)
    before = first.feed(iter(changes[:cut]))
    state = first.buffer.checkpoint_state().to_bytes()
    restart_at = first.buffer.safe_restart_position()
    first.store.flush()
    first.store.close()

    store = RowImageStore(tmp_path / "images")
    second = Core(tmp_path, store=store)
    second.buffer = TransactionBuffer.restore(second.config, BufferState.from_bytes(state))
    after = second.run(shop, restart_at)
    assert before + after == EXPECTED


def test_a_huge_transaction_spills_and_commits_exactly(tmp_path: Path) -> None:
    recording = tmp_path / "huge.jsonl"
    big, small = "AA00000000000001", "BB00000000000002"
    rows = [_control(10, big, 6), _control(11, small, 6)]
    rows += [_insert(100 + i, big, i) for i in range(3000)]
    rows += [_insert(5000, small, 9999), _control(5001, small, 7), _control(5002, big, 7)]
    recording.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    reader = ReplayLogReader(ReplayConfig(recording, DATA / "shop_tables.json"))

    core = Core(tmp_path, budget=32 << 10)
    events = core.run(reader)
    assert core.max_spilled > 0  # the big transaction went to disk before it committed
    assert [(e.txid, e.seq, e.locator) for e in events] == [(small, 0, "ROW9999")] + [
        (big, i, f"ROW{i}") for i in range(3000)
    ]
    assert events[-1].after == order(2999, "c2999", "2999.99")
    assert {e.commit_scn for e in events} == {5001, 5002}


def _control(scn: int, xid: str, code: int) -> dict[str, object]:
    return {"SCN": scn, "TIMESTAMP": "2026-05-01 12:00:00", "XID": xid, "OPERATION_CODE": code}


def _insert(scn: int, xid: str, key: int) -> dict[str, object]:
    sql = (
        'insert into "SHOP"."ORDERS"("ID","CUSTOMER","AMOUNT","STATUS","PLACED","NOTE") values'
        f" ('{key}','c{key}','{key}.99','NEW       ',"
        "TO_DATE('2026-05-01 09:59:00', 'YYYY-MM-DD HH24:MI:SS'),NULL);"
    )
    return _control(scn, xid, 1) | {
        "SEG_OWNER": "SHOP", "TABLE_NAME": "ORDERS", "ROW_ID": f"ROW{key}", "SQL_REDO": sql,
        "RS_ID": f" 0x000001.{scn:08x}.0010 ", "SSN": 0,
    }  # fmt: skip
