"""The transaction buffer, one behaviour at a time, with exact expected sequences."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from cdc_core.buffer.spill import SpillCorruptError, TransactionSpill
from cdc_core.buffer.transaction_buffer import (
    BufferConfig,
    BufferState,
    LogOrderError,
    TransactionBuffer,
    estimated_bytes,
)
from cdc_core.capture.events import (
    ABSENT,
    UNAVAILABLE,
    Begin,
    Commit,
    CommittedTransaction,
    PartialRollback,
    RawChange,
    Rollback,
    RowChange,
)
from cdc_core.capture.position import Position
from cdc_core.errors import ConfigError

T0 = datetime(2026, 5, 1, 8, 0, tzinfo=UTC)
SECRET = "s3cret-row-value"


class Log:
    """Builds raw changes with increasing positions, as a log reader would."""

    def __init__(self) -> None:
        self.next = 100

    def pos(self) -> Position:
        self.next += 10
        return Position(self.next, f"bin.000001:{self.next}")

    def begin(self, txid: str) -> Begin:
        return Begin(txid, self.pos())

    def ins(self, txid: str, key: int, value: str = "v") -> RowChange:
        return RowChange(txid, self.pos(), "c", "s.t", (key,), {"id": key, "v": value})

    def undo(self, txid: str, key: int) -> PartialRollback:
        return PartialRollback(txid, self.pos(), "s.t", (key,))

    def rollback(self, txid: str) -> Rollback:
        return Rollback(txid, self.pos())

    def commit(self, txid: str) -> Commit:
        return Commit(txid, self.pos(), T0)


def config(tmp_path: Path, budget: int = 1 << 20, **limits: Any) -> BufferConfig:
    return BufferConfig(budget, tmp_path / "spill", **limits)


Summary = tuple[str, list[tuple[int, object, object]]]


def run(buffer: TransactionBuffer, changes: list[RawChange]) -> list[Summary]:
    """Feed everything; each committed transaction as (txid, [(seq, key, value), ...])."""
    return [summary(txn) for change in changes for txn in buffer.feed(change)]


def summary(txn: CommittedTransaction) -> Summary:
    rows = [(c.seq, c.change.locator[0], c.change.after["v"]) for c in txn.changes]  # type: ignore[index]
    assert len(rows) == txn.change_count
    return txn.txid, rows


def segment_files(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "spill").glob("*.seg"))


def interleaved(log: Log) -> list[RawChange]:
    return [
        log.begin("A"),
        log.ins("A", 1, "a1"),
        log.begin("B"),
        log.ins("B", 2, "b1"),
        log.ins("A", 3, "a2"),
        log.begin("C"),
        log.ins("C", 4, "c1"),
        log.commit("B"),
        log.ins("A", 5, "a3"),
        log.rollback("C"),
        log.commit("A"),
    ]


EXPECTED = [("B", [(0, 2, "b1")]), ("A", [(0, 1, "a1"), (1, 3, "a2"), (2, 5, "a3")])]


def test_changes_come_out_at_commit_in_commit_order_without_rolled_back_work(
    tmp_path: Path,
) -> None:
    buffer = TransactionBuffer(config(tmp_path))
    assert run(buffer, interleaved(Log())) == EXPECTED
    assert buffer.open_transactions() == [] and buffer.memory_bytes == 0


@pytest.mark.parametrize("budget", [0, 300, 700])
def test_spilled_transactions_stream_back_the_same(tmp_path: Path, budget: int) -> None:
    buffer = TransactionBuffer(config(tmp_path, budget, segment_max_bytes=200))
    assert run(buffer, interleaved(Log())) == EXPECTED
    assert segment_files(tmp_path) == []  # consumed and rolled-back spills are deleted


def test_unavailable_and_absent_values_survive_a_spill(tmp_path: Path) -> None:
    buffer = TransactionBuffer(config(tmp_path, 0, segment_max_bytes=200))
    log = Log()
    image = {"v": "z", "doc": UNAVAILABLE, "wide": ABSENT}
    changes: list[RawChange] = [log.begin("A"), log.ins("A", 1, "x"), log.ins("A", 2, "y")]
    changes += [RowChange("A", log.pos(), "u", "s.t", (1,), image), log.commit("A")]
    assert [txn for change in changes[:-1] for txn in buffer.feed(change)] == []
    assert segment_files(tmp_path) != []  # a budget of 0 spills every change
    (txn,) = buffer.feed(changes[-1])
    last = list(txn.changes)[-1].change.after
    assert last is not None and last["doc"] is UNAVAILABLE and last["wide"] is ABSENT


def test_the_largest_transaction_is_the_one_that_spills(tmp_path: Path) -> None:
    log = Log()
    one_change = estimated_bytes(log.ins("probe", 1))
    budget = 3 * one_change  # room for the small transaction and a little of the big one
    buffer = TransactionBuffer(config(tmp_path, budget=budget))
    run(buffer, [log.begin("small"), log.ins("small", 1), log.begin("big")])
    run(buffer, [log.ins("big", k) for k in range(2, 8)])
    report = {info.txid: info for info in buffer.open_transactions()}
    assert report["small"].spilled_bytes == 0 and report["small"].memory_bytes > 0
    assert report["big"].spilled_bytes > 0
    assert buffer.memory_bytes <= budget


def test_a_partial_rollback_undoes_the_latest_change_to_that_row(tmp_path: Path) -> None:
    log = Log()
    changes: list[RawChange] = [
        log.begin("A"),
        log.ins("A", 1, "first"),
        log.ins("A", 2, "other"),
        log.ins("A", 1, "second"),
        log.undo("A", 1),
        log.ins("A", 3, "third"),
        log.undo("A", 1),
        log.undo("A", 1),  # nothing left to undo for key 1: a warning, no effect
        log.commit("A"),
    ]
    buffer = TransactionBuffer(config(tmp_path))
    assert run(buffer, changes) == [("A", [(0, 2, "other"), (1, 3, "third")])]


@pytest.mark.parametrize("budget", [0, 400])
def test_a_partial_rollback_reaches_changes_already_spilled(tmp_path: Path, budget: int) -> None:
    log = Log()
    changes: list[RawChange] = [log.begin("A"), *[log.ins("A", k % 3, f"v{k}") for k in range(9)]]
    changes += [log.undo("A", 0), log.undo("A", 0), log.undo("A", 2), log.commit("A")]
    buffer = TransactionBuffer(config(tmp_path, budget, segment_max_bytes=150))
    kept = [(k % 3, f"v{k}") for k in range(9) if k not in (3, 6, 8)]
    assert run(buffer, changes) == [("A", [(i, *row) for i, row in enumerate(kept)])]


def test_a_savepoint_rollback_of_spilled_changes_reads_the_spill_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Soak seed 2004 (postgres-default): undoing 741 spilled rows one search each took
    minutes (quadratic); a run of undos is resolved in one pass over the spill."""
    log = Log()
    changes: list[RawChange] = [log.begin("A"), *[log.ins("A", k, f"v{k}") for k in range(300)]]
    changes += [log.undo("A", k) for k in range(100, 300)]
    changes += [log.ins("A", 1000, "after"), log.undo("A", 1000), log.commit("A")]
    reads = []
    original = TransactionSpill.iter_records

    def counted(spill: TransactionSpill) -> Any:
        reads.append(spill.txid)
        return original(spill)

    monkeypatch.setattr(TransactionSpill, "iter_records", counted)
    buffer = TransactionBuffer(config(tmp_path, 0, segment_max_bytes=4096))

    assert run(buffer, changes) == [("A", [(k, k, f"v{k}") for k in range(100)])]
    assert reads == ["A", "A"]  # one pass per run of undos (200, then 1), not per undo


def test_a_commit_without_changes_is_emitted_empty(tmp_path: Path) -> None:
    log = Log()
    buffer = TransactionBuffer(config(tmp_path))
    assert run(buffer, [log.begin("A"), log.commit("A"), log.commit("Z")]) == [
        ("A", []),
        ("Z", []),
    ]


def test_changes_without_a_begin_open_the_transaction(tmp_path: Path) -> None:
    log = Log()
    buffer = TransactionBuffer(config(tmp_path))
    first = log.ins("A", 1)
    buffer.feed(first)
    assert buffer.open_transactions()[0].begin_pos == first.position
    assert run(buffer, [log.commit("A")]) == [("A", [(0, 1, "v")])]


def test_positions_must_not_go_backwards(tmp_path: Path) -> None:
    buffer = TransactionBuffer(config(tmp_path))
    buffer.feed(Begin("A", Position.of(10)))
    buffer.feed(Begin("B", Position.of(10)))  # equal positions are fine
    with pytest.raises(LogOrderError, match="log order"):
        buffer.feed(Begin("C", Position.of(9)))
    with pytest.raises(LogOrderError, match="begins twice"):
        buffer.feed(Begin("A", Position.of(11)))


def test_the_report_names_the_oldest_transaction_with_age_and_size(tmp_path: Path) -> None:
    now = [T0]
    log = Log()
    buffer = TransactionBuffer(config(tmp_path, budget=0), clock=lambda: now[0])
    assert buffer.oldest_open_transaction() is None
    run(buffer, [log.begin("old"), log.ins("old", 1), log.ins("old", 2)])
    now[0] = T0 + timedelta(minutes=5)
    run(buffer, [log.begin("new"), log.ins("new", 3)])
    now[0] = T0 + timedelta(minutes=7)
    oldest = buffer.oldest_open_transaction()
    assert oldest is not None
    assert (oldest.txid, oldest.age, oldest.change_count) == ("old", timedelta(minutes=7), 2)
    assert oldest.memory_bytes == 0 and oldest.spilled_bytes > 0
    assert [info.txid for info in buffer.open_transactions()] == ["old", "new"]


def test_limits_warn_once_with_the_txid_and_never_a_row_value(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    now = [T0]
    log = Log()
    limited = config(tmp_path, max_transaction_changes=2, max_transaction_age=timedelta(hours=1))
    buffer = TransactionBuffer(limited, clock=lambda: now[0])
    caplog.set_level(logging.DEBUG, logger="cdc_core")
    run(buffer, [log.begin("tx-big"), *[log.ins("tx-big", k, SECRET) for k in range(5)]])
    run(buffer, [log.begin("tx-old"), log.ins("tx-old", 9, SECRET)])
    now[0] = T0 + timedelta(hours=2)
    run(buffer, [log.ins("tx-old", 10, SECRET), log.ins("tx-big", 11, SECRET)])
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 3
    assert "tx-big" in warnings[0] and "more than 2 changes" in warnings[0]
    assert "tx-big" in warnings[1] and "open for 2:00:00" in warnings[1]
    assert "tx-old" in warnings[2] and "open for 2:00:00" in warnings[2]
    assert all(SECRET not in r.getMessage() for r in caplog.records)
    assert [len(rows) for _, rows in run(buffer, [log.commit("tx-big")])] == [6]


def checkpoint(buffer: TransactionBuffer) -> BufferState:
    state = BufferState.from_bytes(buffer.checkpoint_state().to_bytes())
    buffer.release_checkpoint(state)
    return state


def test_restart_from_a_checkpoint_gives_the_output_of_a_run_without_crash(
    tmp_path: Path,
) -> None:
    changes = interleaved(Log())
    for cut in range(len(changes) + 1):
        cfg = config(tmp_path / str(cut), budget=300)
        before = TransactionBuffer(cfg)
        emitted = run(before, changes[:cut])
        state = checkpoint(before)
        del before  # the crash
        after = TransactionBuffer.restore(cfg, state)
        restart = after.safe_restart_position()
        start = (
            0
            if restart is None
            else next(i for i, c in enumerate(changes) if c.position >= restart)
        )
        assert emitted + run(after, changes[start:]) == EXPECTED, f"crash after {cut}"


def test_a_restart_from_far_back_ignores_what_the_checkpoint_holds(tmp_path: Path) -> None:
    changes = interleaved(Log())
    before = TransactionBuffer(config(tmp_path))
    emitted = run(before, changes[:6])
    state = checkpoint(before)
    after = TransactionBuffer.restore(config(tmp_path), state)
    assert emitted + run(after, changes) == EXPECTED


def test_changes_sharing_a_position_are_replayed_by_count(tmp_path: Path) -> None:
    at = Position(50, "scn 50")
    changes: list[RawChange] = [
        Begin("A", at),
        *[RowChange("A", at, "c", "s.t", (k,), {"id": k, "v": "v"}) for k in range(3)],
        Commit("A", Position.of(60), T0),
    ]
    before = TransactionBuffer(config(tmp_path))
    run(before, changes[:3])
    state = checkpoint(before)
    assert (state.high_water, state.high_water_count) == (at, 3)
    after = TransactionBuffer.restore(config(tmp_path), state)
    assert run(after, changes) == [("A", [(0, 0, "v"), (1, 1, "v"), (2, 2, "v")])]


def test_segments_a_checkpoint_needs_outlive_their_transaction(tmp_path: Path) -> None:
    log = Log()
    cfg = config(tmp_path, budget=0)
    buffer = TransactionBuffer(cfg)
    run(buffer, [log.begin("A"), log.ins("A", 1)])
    state = checkpoint(buffer)
    needed = segment_files(tmp_path)
    assert run(buffer, [log.commit("A")]) == [("A", [(0, 1, "v")])]
    assert segment_files(tmp_path) == needed  # the last durable checkpoint refers to them
    later = checkpoint(buffer)
    assert later.transactions == () and segment_files(tmp_path) == []
    assert state.transactions[0].segments[0].name == needed[0].name


def test_restore_deletes_segments_written_after_the_checkpoint(tmp_path: Path) -> None:
    log = Log()
    cfg = config(tmp_path, budget=0)
    buffer = TransactionBuffer(cfg)
    run(buffer, [log.begin("A"), log.ins("A", 1)])
    state = checkpoint(buffer)
    run(buffer, [log.ins("A", 2), log.begin("B"), log.ins("B", 3)])
    assert len(segment_files(tmp_path)) == 3
    TransactionBuffer.restore(cfg, state)
    assert [p.name for p in segment_files(tmp_path)] == [state.transactions[0].segments[0].name]


def test_a_corrupt_segment_at_commit_raises_before_any_change(tmp_path: Path) -> None:
    log = Log()
    buffer = TransactionBuffer(config(tmp_path, budget=0, segment_max_bytes=150))
    run(buffer, [log.begin("A"), *[log.ins("A", k) for k in range(6)]])
    (txn,) = buffer.feed(log.commit("A"))
    victim = segment_files(tmp_path)[-1]
    data = bytearray(victim.read_bytes())
    data[-30] ^= 0xFF
    victim.write_bytes(bytes(data))
    seen: list[object] = []
    with pytest.raises(SpillCorruptError, match="transaction A") as caught:
        seen.extend(txn.changes)
    assert seen == []
    assert caught.value.context["txid"] == "A" and str(victim) in str(caught.value)


def test_restore_reports_a_missing_segment(tmp_path: Path) -> None:
    log = Log()
    buffer = TransactionBuffer(config(tmp_path, budget=0))
    run(buffer, [log.begin("A"), log.ins("A", 1)])
    state = checkpoint(buffer)
    segment_files(tmp_path)[0].unlink()
    with pytest.raises(SpillCorruptError, match="cannot stat"):
        TransactionBuffer.restore(config(tmp_path), state)


def test_a_damaged_checkpoint_is_refused(tmp_path: Path) -> None:
    data = bytearray(TransactionBuffer(config(tmp_path)).checkpoint_state().to_bytes())
    data[-1] ^= 1
    with pytest.raises(SpillCorruptError, match="checkpoint is corrupt"):
        BufferState.from_bytes(bytes(data))


@pytest.mark.parametrize(
    "bad",
    [
        {"memory_budget_bytes": -1},
        {"max_transaction_age": timedelta(0)},
        {"max_transaction_changes": 0},
        {"segment_max_bytes": 0},
    ],
)
def test_bad_config_is_refused(tmp_path: Path, bad: dict[str, object]) -> None:
    values: dict[str, object] = {"memory_budget_bytes": 1, "spill_dir": tmp_path} | bad
    with pytest.raises(ConfigError):
        BufferConfig(**values)  # type: ignore[arg-type]
