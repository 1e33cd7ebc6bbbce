"""Oracle snapshots for the CDC pipeline: every table read AS OF one SCN.

The snapshot's position P is the SCN the flashback queries read at: ``AS OF SCN P`` shows
exactly the transactions whose commit SCN is <= P (Oracle Database Development Guide,
"Using Oracle Flashback Query"), which is DESIGN.md's contract for a snapshot at P. The
reads themselves are ``OracleConnector.read_partition`` (the validator's Oracle source
reads the same way), so the undo retention must cover the whole read (ORA-01555 otherwise).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from cdc_core.errors import TerminalError
from cdc_core.position import Position
from cdc_core.source import LOCATOR_COLUMN, TableDescription, TableSnapshot
from connectors.base import POSITION_COLUMN, Partition, Snapshot, TableSchema
from connectors.oracle.position import scn_position
from merkle import types as lt

if TYPE_CHECKING:
    import pyarrow as pa

    from connectors.oracle.connector import OracleConnector


def readable_columns(schema: TableSchema) -> list[str]:
    """The columns a flashback read returns: those with a logical type, intervals excepted
    (``OracleConnector.arrow_schema`` cannot read them yet)."""
    return [
        column.name
        for column in schema.columns
        if column.ltype is not None and not isinstance(column.ltype, lt.IntervalType)
    ]


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
            yield scn_position(taken.position), self._tables(tables, keys or {}, taken)

    def _tables(
        self,
        tables: Sequence[str],
        keys: Mapping[str, Sequence[tuple[object, ...]]],
        taken: Snapshot,
    ) -> Iterator[TableSnapshot]:
        for table in tables:
            schema = self.connector.reflect(table)
            columns = readable_columns(schema)
            partition = _partition(schema, keys.get(table))
            arrow = self.connector.arrow_schema(schema, columns)
            description = TableDescription(
                table, arrow.remove(arrow.get_field_index(POSITION_COLUMN)), schema.primary_key
            )
            # LogMiner locates rows by ROWID: the snapshot carries it for the row image store.
            located = [*columns, LOCATOR_COLUMN]
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


def _without_position(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        yield batch.drop_columns([POSITION_COLUMN])
