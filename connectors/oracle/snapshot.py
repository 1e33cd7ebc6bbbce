"""Oracle snapshots for the CDC pipeline: every table read AS OF one SCN.

The snapshot's position P is the SCN the flashback queries read at: ``AS OF SCN P`` shows
exactly the transactions whose commit SCN is <= P (Oracle Database Development Guide,
"Using Oracle Flashback Query"), which is DESIGN.md's contract for a snapshot at P. The
reads themselves are ``OracleConnector.read_partition`` (the validator's Oracle source
reads the same way), so the undo retention must cover the whole read (ORA-01555 otherwise).

``read_chunk`` (``cdc_core.capture.source.ReadsChunks``, the pipeline's table refresh) reads one
key range in a flashback query of its own, at an SCN taken the same way, which is the
chunk's exact position: the first ``limit`` rows above the last key, in primary key order
(``sql.chunk_select``). A table without a primary key is located by ROWID, which is no
stable order to resume from (ROW MOVEMENT, SHRINK SPACE and partition maintenance move rows
to new ROWIDs, so a row could be read twice or never), so it is one chunk: the whole table
at one SCN, streamed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from cdc_core.capture.position import Position
from cdc_core.capture.source import LOCATOR_COLUMN, TableChunk, TableDescription, TableSnapshot
from cdc_core.errors import ContractError, TerminalError
from connectors.model import POSITION_COLUMN, Partition, Snapshot, TableSchema
from connectors.oracle import sql
from connectors.oracle.logminer.contents import description_of
from connectors.oracle.position import position_of

if TYPE_CHECKING:
    import pyarrow as pa

    from connectors.oracle.connector import OracleConnector


class OracleSnapshotReader:
    """A ``SnapshotReader`` over an ``OracleConnector``: one SCN, flashback reads."""

    def __init__(self, connector: OracleConnector) -> None:
        self.connector = connector

    @contextlib.contextmanager
    def snapshot(
        self, tables: Sequence[str], keys: Mapping[str, Sequence[tuple[object, ...]]] | None = None
    ) -> Iterator[tuple[Position, Iterator[TableSnapshot]]]:
        """Take the current SCN and read ``tables`` (or only ``keys`` of them) as of it."""
        with self.connector.shared_snapshot() as taken:
            if taken is None or taken.position is None:
                raise TerminalError("Oracle returned no SCN for the snapshot")
            yield position_of(taken.position), self._tables(tables, keys or {}, taken)

    def read_chunk(self, table: str, after: tuple[object, ...] | None, limit: int) -> TableChunk:
        """The first ``limit`` rows of ``table`` whose primary key is above ``after``, in key
        order, AS OF one SCN (the chunk's position); a table without a primary key whole."""
        schema = self.connector.reflect(table)
        if not schema.primary_key and after is not None:
            raise ContractError(f"table {table} has no key to read after; it is one chunk")
        description, located = self._described(schema)
        taken = self._scn()
        position = position_of(_position(taken))
        if not schema.primary_key:
            rows = self.connector.read_partition(schema, located, Partition(0), taken)
            return TableChunk(position, TableSnapshot(description, _without_position(rows)), None)
        owner, name = sql.split_table(table, self.connector.owner())
        columns = sql.typed(schema, located)
        query, binds = sql.chunk_select(owner, name, columns, schema.primary_key, after, limit)
        read = self.connector.read_query(
            schema, located, query, binds, taken, session=sql.BINARY_ORDER
        )
        batches = list(_without_position(read))
        last = _last_key(batches, schema.primary_key) if _rows(batches) >= limit else None
        return TableChunk(position, TableSnapshot(description, iter(batches)), last)

    def _scn(self) -> Snapshot:
        with self.connector.shared_snapshot() as taken:
            if taken is None or taken.position is None:
                raise TerminalError("Oracle returned no SCN for the snapshot")
            return taken

    def _described(self, schema: TableSchema) -> tuple[TableDescription, list[str]]:
        """The table's description (the log reader's: the columns it refuses are read by
        neither) and the columns read: LogMiner locates rows by ROWID, so every read also
        carries it for the row image store."""
        description = description_of(schema)
        return description, [*description.schema.names, LOCATOR_COLUMN]

    def _tables(
        self,
        tables: Sequence[str],
        keys: Mapping[str, Sequence[tuple[object, ...]]],
        taken: Snapshot,
    ) -> Iterator[TableSnapshot]:
        for table in tables:
            schema = self.connector.reflect(table)
            description, located = self._described(schema)
            partition = _partition(schema, keys.get(table))
            batches = self.connector.read_partition(schema, located, partition, taken)
            yield TableSnapshot(description, _without_position(batches))


def _partition(schema: TableSchema, keys: Sequence[tuple[object, ...]] | None) -> Partition:
    if keys is None:
        return Partition(0)
    if not schema.primary_key:
        raise TerminalError(
            f"table {schema.table} has no primary key, so rows cannot be re-read by key;"
            " re-snapshot the whole table",
            {"table": schema.table},
        )
    return Partition(-1, key_columns=schema.primary_key, keys=tuple(keys))


def _position(taken: Snapshot) -> int:
    assert taken.position is not None  # _scn refuses a snapshot without one
    return taken.position


def _rows(batches: list[pa.RecordBatch]) -> int:
    return sum(batch.num_rows for batch in batches)


def _last_key(batches: list[pa.RecordBatch], key: Sequence[str]) -> tuple[object, ...]:
    """The key of the last row read, as Python values a bind takes back."""
    last = next(batch for batch in reversed(batches) if batch.num_rows)
    return tuple(last.column(column)[last.num_rows - 1].as_py() for column in key)


def _without_position(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        yield batch.drop_columns([POSITION_COLUMN])
