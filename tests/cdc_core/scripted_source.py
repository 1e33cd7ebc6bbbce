"""A hand-written log for pipeline tests: transactions, DDL and table descriptions that
change; ``ChunkedSource`` also reads key-ordered chunks for the table refresh."""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime

import pyarrow as pa

from cdc_core.capture.events import Begin, Commit, RawChange, RowChange
from cdc_core.capture.position import Position
from cdc_core.capture.source import (
    DdlAction,
    Idle,
    TableChanged,
    TableChunk,
    TableDescription,
    TableSnapshot,
)
from cdc_core.errors import TerminalError


class ScriptedSource:
    """A log built step by step: ``commit`` appends a transaction; ``alter`` changes a
    table's columns from the next transaction on (``describe`` answers the current ones)."""

    def __init__(
        self, descriptions: Mapping[str, TableDescription], *, snapshot_now: bool = False
    ) -> None:
        self.snapshot_now = snapshot_now  # False: snapshots are of the empty log's start
        self.descriptions = dict(descriptions)
        self.log: list[RawChange | TableChanged] = []
        self.counter = 0

    def _next(self) -> Position:
        self.counter += 10
        return Position.of(self.counter)

    def commit(self, changes: Sequence[tuple[str, str, dict[str, object] | None]]) -> Position:
        """Append one transaction of (op, table, image) changes; returns its commit_pos."""
        txid = f"t{len(self.log)}"
        self.log.append(Begin(txid, self._next()))
        for op, table, image in changes:
            key = self.descriptions[table].key
            locator = tuple(image[c] for c in key) if image and key else (self.counter,)
            after = None if op in ("d", "t") else image
            before = image if op == "d" else None
            self.log.append(RowChange(txid, self._next(), op, table, locator, after, before))  # type: ignore[arg-type]
        position = self._next()
        self.log.append(Commit(txid, position, datetime(2026, 1, 1, tzinfo=UTC)))
        return position

    def commit_changes(
        self,
        changes: Sequence[
            tuple[str, str, Hashable, dict[str, object] | None, dict[str, object] | None]
        ],
    ) -> Position:
        """Append one transaction of (op, table, locator, after, before) changes, as a log
        that names each row's locator itself (key moves, physical row ids)."""
        txid = f"t{len(self.log)}"
        self.log.append(Begin(txid, self._next()))
        for op, table, locator, after, before in changes:
            change = RowChange(txid, self._next(), op, table, locator, after, before)  # type: ignore[arg-type]
            self.log.append(change)
        position = self._next()
        self.log.append(Commit(txid, position, datetime(2026, 1, 1, tzinfo=UTC)))
        return position

    def ddl(self, table: str, action: DdlAction = "refresh") -> Position:
        """Append a DDL statement the connector classified as ``action``."""
        position = self._next()
        self.log.append(TableChanged(position, table, action, f"ALTER TABLE {table} ..."))
        return position

    def alter(self, table: str, schema: pa.Schema) -> None:
        """Change a table's columns (as a DDL statement would)."""
        self.descriptions[table] = TableDescription(table, schema, self.descriptions[table].key)

    def describe(self, table: str) -> TableDescription:
        if table not in self.descriptions:
            raise TerminalError(f"table {table!r} not found in the scripted source")
        return self.descriptions[table]

    def end_position(self) -> Position:
        return Position.of(self.counter)

    def iter_changes(self, start: Position | None) -> Iterator[RawChange | TableChanged | Idle]:
        for change in self.log:
            if start is None or change.position >= start:
                yield change
        while True:
            yield Idle(self.end_position())

    @contextmanager
    def snapshot(
        self, tables: Sequence[str], keys: object = None
    ) -> Iterator[tuple[Position, Iterator[TableSnapshot]]]:
        """The tables' state after every transaction committed so far, at the log's end (or
        empty at position 0, before the log, unless ``snapshot_now``)."""
        if not self.snapshot_now:
            yield Position.of(0), (TableSnapshot(self.descriptions[t], iter([])) for t in tables)
            return
        position = self.end_position()
        yield position, (self._table_snapshot(table) for table in tables)

    def _table_snapshot(self, table: str) -> TableSnapshot:
        description = self.descriptions[table]
        names = description.schema.names
        full = [{name: row.get(name) for name in names} for row in self.rows(table)]
        return TableSnapshot(
            description, iter(pa.Table.from_pylist(full, description.schema).to_batches())
        )

    def rows(self, table: str) -> list[dict[str, object]]:
        """The table's committed rows at the log's end."""
        rows: dict[Hashable, dict[str, object]] = {}
        open_changes: dict[str, list[RowChange]] = {}
        for change in self.log:
            if isinstance(change, RowChange) and change.table == table:
                open_changes.setdefault(change.txid, []).append(change)
            elif isinstance(change, Commit):
                for row_change in open_changes.pop(change.txid, []):
                    _apply(rows, row_change)
        return list(rows.values())

    def close(self) -> None:
        pass


def _apply(rows: dict[Hashable, dict[str, object]], change: RowChange) -> None:
    if change.op == "t":
        rows.clear()
    elif change.op == "d":
        rows.pop(change.locator, None)
    else:
        assert change.after is not None
        rows[change.locator] = dict(change.after)


class ChunkedSource(ScriptedSource):
    """A scripted source whose snapshots are of the log's end, read in key-ordered chunks
    (``cdc_core.capture.source.ReadsChunks``) as well."""

    def __init__(self, descriptions: Mapping[str, TableDescription]) -> None:
        super().__init__(descriptions, snapshot_now=True)

    def read_chunk(self, table: str, after: tuple[object, ...] | None, limit: int) -> TableChunk:
        description = self.descriptions[table]
        key = description.key
        rows = sorted(self.rows(table), key=lambda row: tuple(row[c] for c in key))
        rows = [row for row in rows if after is None or tuple(row[c] for c in key) > after][:limit]
        last = tuple(rows[-1][c] for c in key) if len(rows) >= limit else None
        full = [{name: row.get(name) for name in description.schema.names} for row in rows]
        batches = pa.Table.from_pylist(full, description.schema).to_batches()
        return TableChunk(self.end_position(), TableSnapshot(description, iter(batches)), last)
