"""The source the tester replays from, answering reads as Oracle would: the model's tables
as of an SCN.

- ``ModelSnapshotReader`` is the pipeline's ``SnapshotReader`` and ``ReadsChunks``: whole
  tables (``snapshot``) or key-ordered chunks (``read_chunk``: the first ``limit`` rows
  whose primary key is above ``after``; a table without a key is one chunk), each read at
  the source's current SCN P, which is the read's exact position: it shows exactly the
  transactions with commit SCN <= P (``history.History.at``), with the columns the table
  has then, and every row's ROWID in ``LOCATOR_COLUMN``, as ``OracleSnapshotReader`` reads.
- ``ModelUnavailable`` is the ``fetch_unavailable`` hook: a row's columns as of a commit
  SCN, by ROWID, as ``connectors.oracle.unavailable_columns`` reads them.
- ``SourceClock`` decides what "now" is, since a replay is not live (see the class), and
  ``ClockedReader`` tells it how far the replay reader has read.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from cdc_core.capture.events import RawChange
from cdc_core.capture.position import Position
from cdc_core.capture.source import (
    LOCATOR_COLUMN,
    Idle,
    TableChanged,
    TableChunk,
    TableDescription,
    TableSnapshot,
)
from cdc_core.errors import ContractError
from connectors.oracle.logminer.contents import description_of, schema_from_dictionary
from connectors.oracle.position import position_of
from tests.generative.oracle.history import History
from tests.generative.oracle.model import Snapshot, Values
from tests.generative.oracle.tables import TABLES, TableSpec

LEAP = 0.3  # how often "now" runs ahead of the reader when the source is asked for it


@dataclass(frozen=True)
class Read:
    """A read the source served (for coverage): a chunk or a whole-table snapshot, its table,
    SCN and rows, whether it resumed after a key, and how far its SCN was ahead of what the
    reader had handed out."""

    chunk: bool
    table: str
    scn: int
    rows: int
    resumed: bool
    lead: int


class SourceClock:
    """The source's current SCN ("now") while its recording replays.

    A real source's now is never behind what its log reader has read, and never goes back.
    Here it is:

    - before the reader has handed out anything, the SCN just before the recording's first
      row: the recording has not begun (the initial load sees the tables it starts from);
    - then the SCN of the last item the reader handed out or, for some reads (``LEAP``,
      seeded), any later SCN up to the recording's end: a source whose reader lags, so the
      pipeline must hold what it read until its stream has caught up;
    - never inside a DDL's transaction: Oracle commits before and after a DDL statement
      (SQL Language Reference, "ALTER TABLE"), so once its redo can be mined it has
      committed, and a flashback query never sees the table half-altered.
    """

    def __init__(self, history: History, seed: int) -> None:
        scns = [int(str(record["SCN"])) for record in history.records]
        self.end = scns[-1] if scns else 0
        self._now = scns[0] - 1 if scns else 0
        self.read_upto = self._now  # the last position the reader handed out
        self._ddl = history.ddl_transactions()
        self._rng = random.Random(seed)
        self._started = False

    def read(self, scn: int) -> None:
        """The reader has handed out everything up to ``scn``."""
        self._started = True
        self.read_upto = max(self.read_upto, scn)
        self._now = max(self._now, scn)

    def now(self) -> int:
        """The source's SCN at this read (see the class docstring)."""
        if self._started and self._rng.random() < LEAP:
            self._now = self._rng.randint(self._now, max(self._now, self.end))
        for row, commit in self._ddl:
            if row <= self._now < commit:
                self._now = commit
        return self._now


class ClockedReader:
    """The replay's ``LogReader``, telling the clock the position of each item it yields."""

    def __init__(self, reader: Any, clock: SourceClock) -> None:  # a replay or model reader
        self.reader, self.clock = reader, clock

    def describe(self, table: str) -> TableDescription:
        return self.reader.describe(table)

    def end_position(self) -> Position:
        return self.reader.end_position()

    def iter_changes(self, start: Position | None) -> Iterator[RawChange | TableChanged | Idle]:
        for item in self.reader.iter_changes(start):
            if item.position is not None:
                self.clock.read(item.position.value)
            yield item

    def close(self) -> None:
        self.reader.close()


class ModelSnapshotReader:
    """Snapshots and chunks of the model's tables at the clock's SCN (module docstring)."""

    def __init__(self, history: History, clock: SourceClock) -> None:
        self.history, self.clock = history, clock
        self.reads: list[Read] = []

    @contextlib.contextmanager
    def snapshot(
        self, tables: Sequence[str], keys: Mapping[str, Sequence[tuple[object, ...]]] | None = None
    ) -> Iterator[tuple[Position, Iterator[TableSnapshot]]]:
        """``tables`` (only the rows of ``keys``, where given) as of now."""
        scn = self.clock.now()
        state = self.history.at(scn)
        wanted = keys or {}
        snapshots = [self._snapshot(state, table, scn, wanted.get(table)) for table in tables]
        yield position_of(scn), iter(snapshots)

    def read_chunk(self, table: str, after: tuple[object, ...] | None, limit: int) -> TableChunk:
        """The first ``limit`` rows of ``table`` whose key is above ``after``, in key order,
        as of now; a table without a key whole."""
        index, spec = _table(table)
        if not spec.key and after is not None:
            raise ContractError(f"table {table} has no key to read after; it is one chunk")
        scn = self.clock.now()
        state = self.history.at(scn)
        rows = sorted(state.rows[index].items(), key=lambda item: _key(spec.key, item[1]))
        if spec.key:
            rows = [row for row in rows if after is None or _key(spec.key, row[1]) > after]
            rows = rows[:limit]
        last = _key(spec.key, rows[-1][1]) if spec.key and len(rows) >= limit else None
        self._served(True, table, scn, len(rows), after is not None)
        return TableChunk(position_of(scn), _table_snapshot(state, index, rows), last)

    def _snapshot(
        self, state: Snapshot, table: str, scn: int, keys: Sequence[tuple[object, ...]] | None
    ) -> TableSnapshot:
        index, spec = _table(table)
        rows = sorted(state.rows[index].items())
        if keys is not None:
            rows = [row for row in rows if _key(spec.key, row[1]) in set(keys)]
        self._served(False, table, scn, len(rows), False)
        return _table_snapshot(state, index, rows)

    def _served(self, chunk: bool, table: str, scn: int, rows: int, resumed: bool) -> None:
        self.reads.append(Read(chunk, table, scn, rows, resumed, scn - self.clock.read_upto))


class ModelUnavailable:
    """The ``fetch_unavailable`` hook: columns of the row at a ROWID right after the commit
    at ``position``, from the model (``None`` if no row is there then)."""

    def __init__(self, history: History) -> None:
        self.history = history
        self.calls = 0

    def __call__(
        self, table: str, locator: Hashable, position: Position, columns: Sequence[str]
    ) -> Mapping[str, object] | None:
        self.calls += 1
        index, _ = _table(table)
        row = self.history.at(position.value).rows[index].get(str(locator))
        if row is None:
            return None
        return {column: row[column] for column in columns if column in row}


def _table(name: str) -> tuple[int, TableSpec]:
    for index, spec in enumerate(TABLES):
        if spec.name == name:
            return index, spec
    raise ContractError(f"table {name} is not one of the tester's tables")


def _key(key: tuple[str, ...], values: Values) -> tuple[object, ...]:
    return tuple(values[column] for column in key)


def description(state: Snapshot, index: int) -> TableDescription:
    """The table as the lake stores it, with the columns it has in ``state``."""
    spec = TABLES[index]
    records = [tuple(column.record()) for column in state.columns[index]]
    return description_of(schema_from_dictionary(spec.name, records, spec.key))  # type: ignore[arg-type]


def _table_snapshot(state: Snapshot, index: int, rows: list[tuple[str, Values]]) -> TableSnapshot:
    described = description(state, index)
    schema = described.schema.append(pa.field(LOCATOR_COLUMN, pa.string()))
    records = [values | {LOCATOR_COLUMN: rowid} for rowid, values in rows]
    batch = pa.RecordBatch.from_pylist(records, schema=schema)
    return TableSnapshot(described, iter([batch]))
