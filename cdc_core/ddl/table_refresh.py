"""Table refresh: re-read a table from the source while the pipeline keeps streaming.

DDL can change stored rows without writing row events (a default filled into existing
rows, a converting type change, a charset conversion), and a table added to a running
pipeline has rows the log never showed. A refresh makes the lake's changelog and mirror,
and the row image store, equal the source again without stopping the pipeline or locking
the source (DESIGN.md, "DDL that changes stored rows"; DBLog, Debezium's incremental
snapshots):

- The table is read in key-ordered chunks (``ReadsChunks.read_chunk``), each in its own
  short consistent snapshot at an exact log position P. DBLog brackets a plain SELECT with
  a low and a high watermark written into the log because it cannot know the SELECT's
  position; our snapshots know theirs, so each chunk is its own low and high watermark.
- A chunk is held until the stream has passed P (every transaction with ``commit_pos <= P``
  has been emitted), then written as ``r`` events at ``_commit_pos = P`` with ``_seq`` from
  ``REFRESH_SEQ_BASE`` (after any transaction's own events at P, which the snapshot holds),
  and put in the row image store. Later transactions apply on top, as for any row.
- When the last chunk is written, rows of the store that neither a chunk nor the log
  touched since the refresh began are gone at the source: they get ``d`` events.
- A refresh of a table the lake does not hold yet (``loading``) may meet a change of a row
  no chunk has read yet, whose image the rebuild needs: the change is dropped, since the
  row's chunk, read later, holds its effect.

The lake's state of the table is exact before the refresh began and from its last chunk
on, not in between: the pipeline records that window (``cdc_core.lake.layout.RefreshMarks``) and
the table's high-water mark stays below the refresh's start until it is done, so a
validation never compares a half-refreshed table.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

from cdc_core.capture.position import Position
from cdc_core.capture.source import (
    LOCATOR_COLUMN,
    KeyShapeError,
    ReadsChunks,
    SnapshotReader,
    TableChunk,
    TableSnapshot,
)
from cdc_core.errors import ContractError
from cdc_core.lake.target import REFRESH_SEQ_BASE
from cdc_core.state.value_codec import from_tagged, to_tagged

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["REFRESH_SEQ_BASE", "RefreshRow", "RefreshState", "advanced", "iter_rows"]
CHUNK_ROWS = 10_000


@dataclass(frozen=True, slots=True)
class RefreshState:
    """One table's refresh, as the checkpoint keeps it.

    Args:
        table: The table being refreshed.
        since: Where the lake's state of the table stopped being exact (the DDL's position;
            for a table the lake did not hold, where the refresh began).
        loading: The lake held nothing of the table when the refresh began.
        after: The key of the last row written; the next chunk starts after it.
        rows: Rows written so far.
        reason: What started it (for the log).
        scanned: Every key range has been written; only ``pending`` keys remain.
        pending: Keys a dropped change may have moved a row to (a loading refresh drops a
            change of a row not read yet; its new key may lie in a range already read):
            read once more, by key, after the last range.
        keyed: Only ``pending`` keys are read (a re-sync's: ``cdc_core.resync.requests``);
            the rest of the table is exact. A key the source no longer has is buried.
    """

    table: str
    since: Position
    loading: bool
    after: tuple[object, ...] | None = None
    rows: int = 0
    reason: str = ""
    scanned: bool = False
    pending: tuple[tuple[object, ...], ...] = ()
    keyed: bool = False

    def __post_init__(self) -> None:
        if self.rows < 0:
            raise ContractError(f"a refresh's row count must be >= 0, not {self.rows}")

    def __setstate__(self, state: tuple[object, ...]) -> None:
        """Unpickled from a version-1 checkpoint: fields added since take their defaults."""
        defaults = {field.name: field.default for field in fields(self)}
        given = dict(zip(defaults, state, strict=False))
        for name, value in {**defaults, **given}.items():
            object.__setattr__(self, name, value)

    def to_dict(self) -> dict[str, Any]:
        """The refresh as a checkpoint holds it (key values in the tagged form)."""
        return {
            "table": self.table,
            "since": self.since.to_dict(),
            "loading": self.loading,
            "after": to_tagged(self.after),
            "rows": self.rows,
            "reason": self.reason,
            "scanned": self.scanned,
            "pending": to_tagged(self.pending),
            "keyed": self.keyed,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RefreshState:
        """The inverse of ``to_dict``."""
        after, pending = from_tagged(data["after"]), from_tagged(data["pending"])
        if not (after is None or isinstance(after, tuple)) or not isinstance(pending, tuple):
            raise ContractError(f"refresh of {data['table']}: keys must be tuples")
        return cls(
            data["table"],
            Position.from_dict(data["since"]),
            bool(data["loading"]),
            after,
            data["rows"],
            data["reason"],
            bool(data["scanned"]),
            pending,
            bool(data.get("keyed", False)),  # absent in checkpoints before re-sync requests
        )


@dataclass(frozen=True, slots=True)
class RefreshRow:
    """A row of a chunk: its locator in the log's terms and its values."""

    locator: Hashable
    row: dict[str, object]


def read_chunk(
    snapshots: SnapshotReader, state: RefreshState, limit: int = CHUNK_ROWS
) -> TableChunk:
    """The next chunk of a refresh: key-ordered where the reader can, else the whole table;
    once every range is written, the pending keys."""
    if state.scanned:
        try:
            return _whole_table(snapshots.snapshot([state.table], {state.table: state.pending}))
        except KeyShapeError:
            # The source's key has another shape than the keys' (a DDL the stream has not
            # reached: mariadb-full seed 8106 dropped a column of a table without a key). The
            # whole table at one position holds their rows; that DDL starts the refresh again.
            return _whole_table(snapshots.snapshot([state.table]))
    if isinstance(snapshots, ReadsChunks):
        return snapshots.read_chunk(state.table, state.after, limit)
    return _whole_table(snapshots.snapshot([state.table]))


def _whole_table(
    held: AbstractContextManager[tuple[Position, Iterator[TableSnapshot]]],
) -> TableChunk:
    with held as (position, tables):
        snapshot = next(tables)
        batches = list(snapshot.batches)  # read inside the snapshot
    return TableChunk(position, TableSnapshot(snapshot.description, iter(batches)), None)


def iter_rows(chunk: TableChunk) -> Iterator[RefreshRow]:
    """The chunk's rows with their locators (a physical row id where the log uses one)."""
    key = chunk.snapshot.description.key
    for batch in chunk.snapshot.batches:
        yield from _rows_of(batch, key)


def _rows_of(batch: pa.RecordBatch, key: tuple[str, ...]) -> Iterator[RefreshRow]:
    for row in batch.to_pylist():
        if LOCATOR_COLUMN in row:
            yield RefreshRow(row.pop(LOCATOR_COLUMN), row)
        else:
            yield RefreshRow(tuple(row[column] for column in key), row)


def advanced(state: RefreshState, chunk: TableChunk, rows: int) -> RefreshState:
    """The state after writing ``chunk`` (``rows`` rows)."""
    return replace(state, after=chunk.last_key, rows=state.rows + rows)


STALE_WINDOWS_KEPT = 20  # per table: older windows are before anything a validation reads


class TableRefresher:
    """The refreshes a pipeline runs, one table at a time, and the chunk it holds.

    Args:
        states: Refreshes under way (from the checkpoint), in the order they run.
        stale: Per table, the windows of positions earlier refreshes left inexact.
    """

    def __init__(
        self, states: tuple[RefreshState, ...], stale: dict[str, tuple[tuple[int, int], ...]]
    ) -> None:
        self._states = list(states)
        self.stale = dict(stale)
        self.held: TableChunk | None = None
        # Keys ``remember`` took since the states last held them, and per table the keys
        # known (the state's tuple they were counted from, and a set of it and the new ones):
        # a key shift under refresh remembers every row, which must not cost a scan a key.
        self._later: dict[str, list[tuple[object, ...]]] = {}
        self._known: dict[str, tuple[tuple[object, ...], set[tuple[object, ...]]]] = {}
        self.asked: tuple[tuple[object, ...], ...] = ()  # the keys the held chunk read
        # Per keyed refresh, every key it reads: a row moving away from one is followed.
        self._keyed: dict[str, set[tuple[object, ...]]] = {
            s.table: set(s.pending) for s in states if s.keyed
        }

    @property
    def states(self) -> list[RefreshState]:
        """The refreshes under way, in the order they run, holding every key remembered."""
        for index, state in enumerate(self._states):
            later = self._later.pop(state.table, None)
            if later:
                pending = (*state.pending, *later)
                self._states[index] = replace(state, pending=pending)
                self._known[state.table] = (pending, self._known[state.table][1])
        self._later.clear()
        return self._states

    @property
    def active(self) -> bool:
        """A refresh is under way."""
        return bool(self.states)

    def rewriting(self) -> dict[str, Position]:
        """Per table whose every row a refresh rewrites (not a keyed one), since when."""
        return {state.table: state.since for state in self.states if not state.keyed}

    def loading(self) -> set[str]:
        """Tables whose lake started empty: a change of a row not read yet is dropped."""
        return {state.table for state in self.states if state.loading}

    def state_of(self, table: str) -> RefreshState | None:
        """The refresh of ``table`` under way, if any (asked per change: its ``pending`` may
        lack the keys remembered since ``states`` was last read)."""
        if not self._states:  # the common case: asked per change
            return None
        return next((state for state in self._states if state.table == table), None)

    def start(self, state: RefreshState) -> None:
        """Begin a refresh (again from the first row, if one was under way)."""
        current = next((s for s in self.states if s.table == state.table), None)
        if current is not None:
            state = replace(state, since=min(current.since, state.since))
            state = replace(state, loading=state.loading or current.loading)
            self.states.remove(current)
        if self.held is not None and self.held.snapshot.description.table == state.table:
            self.held = None  # read before this DDL: its rows may be stale already
        self._keyed.pop(state.table, None)
        self.states.append(state)

    def start_keys(self, state: RefreshState) -> None:
        """Read ``state.pending`` keys again (a keyed refresh). A refresh of the table under
        way reads them too, after its ranges; a keyed one is exact from the earlier since."""
        current = self.state_of(state.table)
        if current is None:
            self._keyed[state.table] = set(state.pending)
            self.states.append(state)
            return
        if current.keyed:
            index = self.states.index(current)
            self._states[index] = replace(current, since=min(current.since, state.since))
            self._keyed[state.table].update(state.pending)
        for key in state.pending:
            self.remember(state.table, key)

    def fetch(self, snapshots: SnapshotReader, limit: int = CHUNK_ROWS) -> None:
        """Read the next chunk of the first refresh, unless one is held."""
        if self.held is None and self.states:
            state = self.states[0]
            self.asked = state.pending if state.scanned else ()
            self.held = read_chunk(snapshots, state, limit)

    def due(self, upto: int) -> TableChunk | None:
        """The held chunk, once the stream has emitted everything committed up to its
        position (``upto``: every transaction with ``commit_pos <= upto`` is emitted)."""
        chunk = self.held
        if chunk is None or chunk.position.value > upto:
            return None
        self.held = None
        return chunk

    def written(self, chunk: TableChunk, rows: int) -> tuple[RefreshState, bool]:
        """Record a written chunk; returns the refresh's new state and whether it is done
        (after the last range, or after the pending keys read once the ranges were)."""
        state = self.states[0]
        if state.scanned:
            # Keys remembered after the chunk was read are read in one more chunk.
            asked = set(self.asked)
            left = tuple(key for key in state.pending if key not in asked)
            self.states[0] = replace(state, rows=state.rows + rows, pending=left)
            self._known.pop(state.table, None)
            return self.states[0], not left
        state = self.states[0] = advanced(state, chunk, rows)
        if chunk.last_key is not None:
            return state, False
        if state.pending:
            self.states[0] = replace(state, scanned=True)
            return self.states[0], False
        return state, True

    def moved(self, table: str, old: tuple[object, ...], new: tuple[object, ...]) -> None:
        """A row of ``table`` moved from key ``old`` to ``new``: a refresh under way reads
        ``new`` once more at its end (a keyed one only if it reads ``old``)."""
        keys = self._keyed.get(table)
        if keys is not None and old not in keys:
            return
        if keys is not None:
            keys.add(new)
        self.remember(table, new)

    def remember(self, table: str, key: tuple[object, ...]) -> None:
        """A change of a row not read yet was dropped; the row may now be at ``key``."""
        state = self.state_of(table)
        if state is None:
            return
        known = self._known.get(table)
        if known is None or known[0] is not state.pending:
            known = self._known[table] = (state.pending, set(state.pending))
        if key not in known[1]:
            known[1].add(key)
            self._later.setdefault(table, []).append(key)

    def finish(self, state: RefreshState, end: Position) -> None:
        """The refresh is done: the table is exact again from ``end`` on."""
        self.states.remove(state)
        self._keyed.pop(state.table, None)
        start = 0 if state.loading else state.since.value
        windows = (*self.stale.get(state.table, ()), (start, end.value))
        self.stale[state.table] = windows[-STALE_WINDOWS_KEPT:]

    def refreshing(self) -> dict[str, int]:
        """Per table under refresh, where its state stopped being exact."""
        return {s.table: 0 if s.loading else s.since.value for s in self.states}
