"""A deterministic, generated transaction log: the synthetic source's "database".

Given a seed, ``Workload`` simulates a database with interleaved transactions -- inserts,
updates and deletes on locked rows, partial rollbacks (undo of the latest change to a row,
as Oracle logs them), rollbacks and commits -- and produces the raw log a connector would
read. It also knows what a correct pipeline must write: each committed transaction's
effective changes with full images (``expected``), and the tables' state at any commit.

With ``minimal`` the log carries what a minimal row image carries: updates hold the key and
the changed columns, deletes only the key (the rest ``ABSENT``), so the core must rebuild.
Re-generating with the same parameters yields the same log, byte for byte: that is what
lets the pipeline re-read it from any position after a crash.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from cdc_core.capture.events import (
    ABSENT,
    Begin,
    Commit,
    Op,
    PartialRollback,
    RawChange,
    Rollback,
    RowChange,
)
from cdc_core.capture.position import Position
from cdc_core.errors import ConfigError

COLUMNS = ("id", "v", "s", "note")
KEY = ("id",)
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
Row = dict[str, object]


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    """The parameters of a generated log.

    Args:
        seed: Everything random derives from it.
        transactions: How many transactions the log holds (committed or rolled back).
        tables: How many tables (``synthetic.t0``, ``synthetic.t1``, ...).
        initial_rows: Rows per table before the log starts (the initial snapshot).
        max_changes: Upper bound of changes per ordinary transaction.
        concurrency: How many transactions may be open at once (interleaving).
        rollback_rate: Share of transactions that roll back.
        partial_rollback_rate: Chance that a change is followed by its undo.
        big_every: Every so many transactions, one has ``big_changes`` changes (0: never).
        big_changes: Size of the big transactions.
        minimal: Log minimal row images (updates: key + changed columns; deletes: key).
    """

    seed: int = 1
    transactions: int = 200
    tables: int = 2
    initial_rows: int = 50
    max_changes: int = 6
    concurrency: int = 4
    rollback_rate: float = 0.1
    partial_rollback_rate: float = 0.1
    big_every: int = 0
    big_changes: int = 1000
    minimal: bool = True

    def __post_init__(self) -> None:
        if self.transactions < 0 or self.tables < 1 or self.concurrency < 1:
            raise ConfigError("synthetic workload: transactions >= 0, tables and concurrency >= 1")
        if self.max_changes < 1 or self.initial_rows < 0:
            raise ConfigError("synthetic workload: max_changes >= 1, initial_rows >= 0")

    @property
    def table_names(self) -> list[str]:
        """The tables' names."""
        return [f"synthetic.t{index}" for index in range(self.tables)]


@dataclass(frozen=True, slots=True)
class ExpectedEvent:
    """A change the lake must hold exactly once."""

    table: str
    op: str
    commit_pos: int
    seq: int
    row: Row  # after-image, or the before-image of a delete


@dataclass(slots=True)
class _Txn:
    txid: str
    remaining: int
    rollback: bool
    view: dict[tuple[str, int], Row | None] = field(default_factory=dict)  # own changes
    locks: set[tuple[str, int]] = field(default_factory=set)
    done: list[tuple[str, int, Op, Row | None, Row | None]] = field(default_factory=list)


def initial_row(table_index: int, key: int) -> Row:
    """A row of the initial snapshot."""
    return {"id": key, "v": key * 10 + table_index, "s": f"init-{key}", "note": None}


class Workload:
    """Generates the log of ``spec`` and what a pipeline must make of it."""

    FIRST_POSITION = 100  # the initial snapshot's position; the log starts after it

    def __init__(self, spec: WorkloadSpec) -> None:
        self.spec = spec

    def snapshot_position(self) -> Position:
        """Where the initial snapshot is: before every transaction of the log."""
        return _position(self.FIRST_POSITION)

    def initial_rows(self, table: str) -> list[Row]:
        """The table's rows at the snapshot position."""
        index = self.spec.table_names.index(table)
        return [initial_row(index, key) for key in range(self.spec.initial_rows)]

    def iter_log(self) -> Iterator[tuple[RawChange, list[ExpectedEvent]]]:
        """Every raw change in log order, each with the events it commits (at commits)."""
        return _Simulation(self).run()

    def end_position(self) -> Position:
        """The position of the log's last change (the snapshot's when it is empty)."""
        last = self.snapshot_position()
        for change, _ in self.iter_log():
            last = change.position
        return last

    def expected(self) -> list[ExpectedEvent]:
        """Every committed change, in commit order, with full images."""
        return [event for _, events in self.iter_log() for event in events]


class _Simulation:
    """One pass over the generated log (the mutable state of the generator)."""

    def __init__(self, workload: Workload) -> None:
        self.spec = workload.spec
        self.rng = random.Random(self.spec.seed)
        self.committed: dict[tuple[str, int], Row] = {
            (table, row["id"]): row  # type: ignore[misc]
            for table in self.spec.table_names
            for row in workload.initial_rows(table)
        }
        self.locked: set[tuple[str, int]] = set()
        self.counter = workload.FIRST_POSITION
        self.next_key = self.spec.initial_rows

    def run(self) -> Iterator[tuple[RawChange, list[ExpectedEvent]]]:
        open_txns: list[_Txn] = []
        started = 0
        while started < self.spec.transactions or open_txns:
            can_start = started < self.spec.transactions and len(open_txns) < self.spec.concurrency
            if can_start and (not open_txns or self.rng.random() < 0.4):
                txn = self._start(started)
                started += 1
                open_txns.append(txn)
                yield Begin(txn.txid, self._next()), []
                continue
            txn = self.rng.choice(open_txns)
            if txn.remaining > 0:
                yield from self._step(txn)
            else:
                open_txns.remove(txn)
                yield self._finish(txn)

    def _start(self, number: int) -> _Txn:
        big = self.spec.big_every and number % self.spec.big_every == self.spec.big_every - 1
        size = self.spec.big_changes if big else self.rng.randint(1, self.spec.max_changes)
        rollback = self.rng.random() < self.spec.rollback_rate
        return _Txn(f"tx{number}", size, rollback)

    def _next(self) -> Position:
        self.counter += 1
        return _position(self.counter)

    def _step(self, txn: _Txn) -> Iterator[tuple[RawChange, list[ExpectedEvent]]]:
        txn.remaining -= 1
        change = self._change(txn)
        if change is None:
            return
        yield change, []
        if self.rng.random() < self.spec.partial_rollback_rate:
            yield self._undo(txn, change), []

    def _visible(self, txn: _Txn, slot: tuple[str, int]) -> Row | None:
        return txn.view[slot] if slot in txn.view else self.committed.get(slot)

    def _change(self, txn: _Txn) -> RowChange | None:
        table = self.rng.choice(self.spec.table_names)
        if self.rng.random() < 0.4:
            key = self.next_key
            self.next_key += 1
            return self._apply(txn, (table, key), "c", None)
        slot = self._pick_row(txn, table)
        if slot is None:
            return None
        before = self._visible(txn, slot)
        assert before is not None
        return self._apply(txn, slot, "d" if self.rng.random() < 0.25 else "u", before)

    def _pick_row(self, txn: _Txn, table: str) -> tuple[str, int] | None:
        """An existing row this transaction may change: its own, or an unlocked one."""
        for _ in range(8):
            slot = (table, self.rng.randrange(max(self.next_key, 1)))
            free = slot in txn.locks or slot not in self.locked
            if free and self._visible(txn, slot) is not None:
                return slot
        return None

    def _apply(self, txn: _Txn, slot: tuple[str, int], op: Op, before: Row | None) -> RowChange:
        table, key = slot
        after = None if op == "d" else self._new_row(key, before)
        self.locked.add(slot)
        txn.locks.add(slot)
        txn.view[slot] = after
        txn.done.append((table, key, op, before, after))
        return RowChange(
            txn.txid,
            self._next(),
            op,
            table,
            (key,),
            *self._logged(op, before, after),
        )

    def _new_row(self, key: int, before: Row | None) -> Row:
        row = dict(before) if before else {"id": key, "v": 0, "s": "", "note": None}
        row["v"] = self.rng.randint(-(10**12), 10**12)
        if before is None or self.rng.random() < 0.5:
            row["s"] = "".join(self.rng.choices("abcxyzäé€ 'ñ", k=self.rng.randint(0, 12)))
        if self.rng.random() < 0.2:
            row["note"] = None if self.rng.random() < 0.5 else f"note {self.rng.random():.6f}"
        return row

    def _logged(
        self, op: str, before: Row | None, after: Row | None
    ) -> tuple[Row | None, Row | None]:
        """(after, before) as the log carries them."""
        if not self.spec.minimal or op == "c":
            return after, before
        if op == "d":
            assert before is not None
            return None, {c: (before[c] if c in KEY else ABSENT) for c in COLUMNS}
        assert before is not None and after is not None
        changed = {c: (after[c] if c in KEY or after[c] != before[c] else ABSENT) for c in COLUMNS}
        return changed, None

    def _undo(self, txn: _Txn, change: RowChange) -> PartialRollback:
        table, key, _, before, _ = txn.done.pop()
        txn.view[(table, key)] = before
        if before is None and (table, key) not in self.committed:
            txn.view.pop((table, key))
        return PartialRollback(txn.txid, self._next(), change.table, change.locator)

    def _finish(self, txn: _Txn) -> tuple[RawChange, list[ExpectedEvent]]:
        position = self._next()
        self.locked.difference_update(txn.locks)
        if txn.rollback:
            return Rollback(txn.txid, position), []
        for slot, row in txn.view.items():
            if row is None:
                self.committed.pop(slot, None)
            else:
                self.committed[slot] = row
        events = [
            ExpectedEvent(table, op, position.value, seq, (before if op == "d" else after) or {})
            for seq, (table, _, op, before, after) in enumerate(txn.done)
        ]
        commit_ts = EPOCH + timedelta(milliseconds=position.value)
        return Commit(txn.txid, position, commit_ts), events


def _position(counter: int) -> Position:
    return Position(counter, f"syn:{counter}")
