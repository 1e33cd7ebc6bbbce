"""Random logs through the buffer, with spills, checkpoints and crashes, against a model.

A scenario is a random interleaving of transactions (changes, partial rollbacks, commits,
rollbacks, some left open), a random memory budget and segment size (tiny ones force
spills of nearly every change), and random checkpoints and crashes. After a crash the
buffer is restored from the last durable checkpoint and the log is re-read from
``safe_restart_position()`` (or from the very start); a sink that, like the lake, ignores
commit positions it has already written receives the output. It must equal a list-based
reference model: every committed change exactly once, in order, nothing rolled back.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdc_core.buffer.transaction_buffer import BufferConfig, BufferState, TransactionBuffer
from cdc_core.capture.events import (
    ABSENT,
    Begin,
    Commit,
    CommittedTransaction,
    PartialRollback,
    RawChange,
    Rollback,
    RowChange,
)
from cdc_core.capture.position import Position

TS = datetime(2026, 5, 1, tzinfo=UTC)
VALUES = [None, ABSENT, Decimal("-1.50"), b"\x00\x01", "é", TS, 2**70]
Output = tuple[str, int, tuple[tuple[int, str, int, int], ...]]


@dataclass(frozen=True)
class Scenario:
    log: tuple[RawChange, ...]
    budget: int
    segment_max_bytes: int
    plan: dict[int, str]  # before feeding log[i]: checkpoint / lost-checkpoint / crash / ...


@st.composite
def scenarios(draw: st.DrawFn) -> Scenario:
    queues = [draw(transaction_steps(f"tx{i}")) for i in range(draw(st.integers(1, 6)))]
    log: list[RawChange] = []
    value, serial = 1, 0
    while any(queues):
        queue = draw(st.sampled_from([q for q in queues if q]))
        kind, txid, key = queue.pop(0)
        value += 1 if kind == "commit" else draw(st.integers(0, 1))  # ties, except commits
        serial += 1
        log.append(raw_change(kind, txid, key, Position(value, f"p{value}"), serial))
    kinds = ["checkpoint", "lost-checkpoint", "crash", "crash-and-reread-all"]
    plan = draw(st.dictionaries(st.integers(0, len(log)), st.sampled_from(kinds), max_size=4))
    budget = draw(st.sampled_from([0, 1, 250, 800, 3000, 1 << 30]))
    segment_max_bytes = draw(st.sampled_from([1, 120, 500, 1 << 20]))
    return Scenario(tuple(log), budget, segment_max_bytes, plan)


@st.composite
def transaction_steps(draw: st.DrawFn, txid: str) -> list[tuple[str, str, int]]:
    body = draw(
        st.lists(
            st.tuples(st.sampled_from(["c", "u", "d", "undo"]), st.just(txid), st.integers(0, 3)),
            max_size=10,
        )
    )
    end = draw(st.sampled_from(["commit", "commit", "rollback", "open"]))
    tail = [] if end == "open" else [(end, txid, 0)]
    return [("begin", txid, 0), *body, *tail]


def raw_change(kind: str, txid: str, key: int, pos: Position, serial: int) -> RawChange:
    if kind == "begin":
        return Begin(txid, pos)
    if kind == "commit":
        return Commit(txid, pos, TS)
    if kind == "rollback":
        return Rollback(txid, pos)
    table = f"s.t{key % 2}"
    if kind == "undo":
        return PartialRollback(txid, pos, table, (key,))
    image = {"id": key, "n": serial, "v": VALUES[serial % len(VALUES)]}
    if kind == "d":
        return RowChange(txid, pos, "d", table, (key,), None, image)
    return RowChange(txid, pos, "c" if kind == "c" else "u", table, (key,), image)


def reference(log: tuple[RawChange, ...]) -> tuple[list[Output], list[tuple[str, int]]]:
    """The obvious in-memory model: what the buffer must emit, and what it must hold open."""
    open_txns: dict[str, list[RowChange]] = {}
    out: list[Output] = []
    for change in log:
        if isinstance(change, Begin):
            open_txns[change.txid] = []
        elif isinstance(change, RowChange):
            open_txns[change.txid].append(change)
        elif isinstance(change, PartialRollback):
            done = open_txns[change.txid]
            same = [
                i
                for i, c in enumerate(done)
                if (c.table, c.locator) == (change.table, change.locator)
            ]
            if same:
                del done[same[-1]]
        elif isinstance(change, Rollback):
            del open_txns[change.txid]
        elif isinstance(change, Commit):
            rows = open_txns.pop(change.txid)
            out.append(
                (
                    change.txid,
                    change.position.value,
                    tuple(key_of(i, c) for i, c in enumerate(rows)),
                )
            )
    return out, [(txid, len(rows)) for txid, rows in open_txns.items()]


def key_of(seq: int, change: RowChange) -> tuple[int, str, int, int]:
    image = change.after if change.after is not None else change.before
    assert image is not None
    return seq, change.op, image["id"], image["n"]  # type: ignore[return-value]


class Sink:
    """Like the lake: a transaction whose commit position was already written is skipped."""

    def __init__(self) -> None:
        self.written: list[Output] = []
        self.by_commit: dict[int, Output] = {}

    def write(self, txn: CommittedTransaction) -> None:
        rows = tuple(key_of(c.seq, c.change) for c in txn.changes)
        assert len(rows) == txn.change_count
        output = (txn.txid, txn.commit_pos.value, rows)
        if txn.commit_pos.value in self.by_commit:
            assert self.by_commit[txn.commit_pos.value] == output, "a replay differs"
            return
        self.by_commit[txn.commit_pos.value] = output
        self.written.append(output)


def run_with_crashes(
    scenario: Scenario, spill_dir: Path
) -> tuple[list[Output], list[tuple[str, int]]]:
    """Feed the scenario's log; returns what the sink received and what is still open."""
    config = BufferConfig(scenario.budget, spill_dir, segment_max_bytes=scenario.segment_max_bytes)
    durable = BufferState(None, 0, ())
    buffer = TransactionBuffer(config)
    sink, plan, index = Sink(), dict(scenario.plan), 0
    while index <= len(scenario.log):
        action = plan.pop(index, None)
        if action == "checkpoint":
            state = buffer.checkpoint_state()
            durable = BufferState.from_bytes(state.to_bytes())
            buffer.release_checkpoint(state)
        elif action == "lost-checkpoint":
            buffer.checkpoint_state()  # the process dies before the state is written
        elif action is not None:
            buffer = TransactionBuffer.restore(config, durable)
            index = restart_index(scenario.log, buffer, from_start=action.endswith("all"))
            continue
        if index == len(scenario.log):
            break
        for txn in buffer.feed(scenario.log[index]):
            sink.write(txn)
        assert buffer.memory_bytes <= scenario.budget
        index += 1
    check_spill_dir(buffer, spill_dir)
    still_open = [(info.txid, info.change_count) for info in buffer.open_transactions()]
    return sink.written, still_open


def restart_index(log: tuple[RawChange, ...], buffer: TransactionBuffer, from_start: bool) -> int:
    restart = buffer.safe_restart_position()
    if restart is None or from_start:
        return 0
    return next(i for i, change in enumerate(log) if change.position >= restart)


def check_spill_dir(buffer: TransactionBuffer, spill_dir: Path) -> None:
    """After a final durable checkpoint, the spill directory holds exactly what it needs."""
    state = buffer.checkpoint_state()
    buffer.release_checkpoint(state)
    needed = {ref.name for txn in state.transactions for ref in txn.segments}
    assert {path.name for path in spill_dir.iterdir()} == needed


@settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(scenarios())
def test_output_equals_the_reference_model_despite_spills_and_crashes(scenario: Scenario) -> None:
    with tempfile.TemporaryDirectory() as directory:
        assert run_with_crashes(scenario, Path(directory) / "spill") == reference(scenario.log)
