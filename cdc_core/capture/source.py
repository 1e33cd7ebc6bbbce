"""What the pipeline reads: the narrow contracts a connector's log and snapshot readers meet.

A connector (``connectors/<product>/log_reader.py``) turns its product's log into raw
changes (``cdc_core.capture.events``) in log order; ``cdc_core`` alone buffers, rebuilds and sinks
them (STYLE.md, "One pipeline"). The pipeline never asks which product it reads.

- ``LogReader.iter_changes(start)`` yields raw changes from ``start`` on, and ``Idle``
  markers when it has caught up with the log, so a caller can stop, flush and checkpoint
  without the reader blocking forever.
- ``LogReader.end_position()`` is the log's end now: every transaction committed so far
  has ``commit_pos <= end_position()`` (``--until-caught-up`` stops there).
- ``SnapshotReader.snapshot(tables)`` reads tables in one consistent snapshot at a position,
  for the initial load (``r`` events) and re-syncs.
- ``LogReader.describe(table)`` gives the columns the lake stores for a table, and those it
  cannot carry exactly (``RefusedColumn``), which refuse the table by name unless ignored.
- ``TableChanged`` is yielded, in log order, for DDL on a captured table: the connector
  classifies the statement (README, "Schema changes"), the pipeline acts on it.
- ``ReadsChunks.read_chunk`` reads one key range of a table in its own consistent snapshot
  at an exact log position: the pipeline's table refresh (DBLog) is made of such chunks.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

from cdc_core.capture.events import RawChange
from cdc_core.capture.position import Position
from cdc_core.errors import ContractError, TerminalError
from cdc_core.names import META_COLUMNS

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True, slots=True)
class Idle:
    """The reader has caught up with the log: nothing new to yield right now.

    Args:
        position: How far the reader has read (``None`` when it cannot tell): every
            transaction with ``commit_pos <= position`` has been yielded, whole. A reader
            must yield ``Idle`` at least every few seconds while the log is quiet.
    """

    position: Position | None = None


DdlAction = Literal["schema", "refresh", "stop"]
DDL_ACTIONS: tuple[DdlAction, ...] = ("schema", "refresh", "stop")


@dataclass(frozen=True, slots=True)
class TableChanged:
    """DDL on a captured table, at its place in the log (outside any transaction's changes).

    The connector classifies the statement; the pipeline acts on ``action``:

    - ``schema``: value-preserving (a nullable column added without a default, a rename of
      an index, a widened type): the lake's schema follows at the next change, rows stay.
    - ``refresh``: stored values may have changed without row events (a default written to
      existing rows, a converting type change, a charset conversion, a table created or
      renamed into the captured set, anything unknown): the table is re-read from the
      source in chunks at exact positions and written to the lake and the row image store.
    - ``stop``: the pipeline cannot follow it; it stops with ``reason`` (which names the
      fix).

    Args:
        position: Where the statement is in the log: changes at or after it see its effect.
        table: The captured table (``schema.table``, as ``RowChange.table`` names it).
        action: What the pipeline must do.
        statement: The DDL's text (for messages; DDL carries no row values).
        reason: Why the connector chose ``action``, for the log and for errors.
    """

    position: Position
    table: str
    action: DdlAction
    statement: str
    reason: str = ""

    def __post_init__(self) -> None:
        if self.action not in DDL_ACTIONS:
            raise ContractError(f"unknown DDL action {self.action!r} (known: {DDL_ACTIONS})")


@dataclass(frozen=True, slots=True)
class RefusedColumn:
    """A column of a source table the pipeline cannot carry exactly, and why.

    Never left out in silence: ``cdc_core.ddl.descriptions`` refuses its table by name unless
    the pipeline's ``ignore_columns`` lists the column (``RefusedColumnsError``).

    Args:
        name: The column.
        native_type: Its type as the source spells it (``inet6``, ``int4range``).
        reason: Why it cannot be carried, read after "column NAME (TYPE):" in the message
            ("no logical type in replcheck, ...").
    """

    name: str
    native_type: str
    reason: str


class RefusedColumnsError(TerminalError):
    """Columns of a captured table that the pipeline cannot carry exactly and does not
    ignore: refused by name, with the way out, before anything of the table is written."""

    @classmethod
    def of(cls, table: str, columns: Sequence[RefusedColumn]) -> RefusedColumnsError:
        """The error naming ``columns`` of ``table``."""
        by_reason: dict[str, list[str]] = {}
        for column in columns:
            by_reason.setdefault(column.reason, []).append(f"{column.name} ({column.native_type})")
        described = "; ".join(
            f"column{'s' if len(named) > 1 else ''} {', '.join(named)}: {reason}"
            for reason, named in by_reason.items()
        )
        names = ", ".join(column.name for column in columns)
        them = "it" if len(columns) == 1 else "them"
        return cls(
            f"table {table}: {described}. The pipeline stops rather than leave {them} out in"
            f" silence: list {them} in the pipeline's ignore_columns: {{{table}: [{names}]}}"
            f" to replicate the table without {them} (and in its comparisons'"
            " columns.exclude)",
            {"table": table, "columns": names},
        )


@dataclass(frozen=True, slots=True)
class TableDescription:
    """A source table as the lake stores it.

    Args:
        table: ``schema.table``, as the connector names it in ``RowChange.table``.
        schema: The Arrow schema of its columns, in source order (no bookkeeping columns).
        key: The columns that identify a row (the mirror's MERGE key); empty for a table
            located only by a physical row id, which then has no mirror.
        unique: The source keeps ``key`` unique (a primary key or unique index); False for
            a configured key or all the columns of a table without one, where two rows may
            share a key, which the lake cannot hold apart (``cdc_core.rebuild.full_width``
            ``EqualKeysError``).
        refused: The source's columns the pipeline cannot carry exactly (not in
            ``schema``): the table is refused by name unless ``ignore_columns`` lists them.
    """

    table: str
    schema: pa.Schema
    key: tuple[str, ...]
    unique: bool = True
    refused: tuple[RefusedColumn, ...] = ()

    def __post_init__(self) -> None:
        names = set(self.schema.names)
        both = [column.name for column in self.refused if column.name in names]
        if both:
            raise ContractError(f"columns {both} of table {self.table} are carried and refused")
        missing = [column for column in self.key if column not in names]
        if missing:
            raise ContractError(f"key columns {missing} are not columns of table {self.table}")
        folded: dict[str, list[str]] = {}
        for column in self.schema.names:
            folded.setdefault(column.lower(), []).append(column)
        # Delta column names are case-insensitive (deltalake refuses "Amount" next to "amount").
        clashes = [names for names in folded.values() if len(names) > 1]
        if clashes:
            raise ContractError(
                f"table {self.table} has columns {clashes} that differ only in case, which a"
                " Delta table cannot hold; rename one of each at the source or leave the table"
                " out of the pipeline",
                {"table": self.table},
            )
        taken = [column for column in self.schema.names if column in META_COLUMNS]
        if taken:
            raise ContractError(
                f"table {self.table} has columns {taken} named like the lake's bookkeeping"
                f" columns {list(META_COLUMNS)}; rename them at the source or leave the table"
                " out of the pipeline",
                {"table": self.table},
            )


class LogReader(Protocol):
    """A source database's transaction log, read as raw changes in log order."""

    def describe(self, table: str) -> TableDescription:
        """The table's current columns and key.

        Raises:
            TerminalError: The table does not exist (the message names it).
        """
        ...

    def end_position(self) -> Position:
        """The log's current end: every transaction committed so far has commit_pos <= it."""
        ...

    def iter_changes(self, start: Position | None) -> Iterator[RawChange | TableChanged | Idle]:
        """Raw changes of the captured tables from ``start`` on, in log order.

        ``start`` is a position the reader handed out earlier (a change's ``position``, a
        ``Commit``'s commit_pos) or a snapshot's position; ``None`` starts at the log's
        current end. Changes at ``start`` itself may be yielded again: the buffer skips what
        it already holds. From a snapshot's position, a product whose log interleaves
        transactions also yields the earlier changes of transactions still open there (they
        commit after it). Never ends on its own; yields ``Idle`` while the log is quiet.

        Raises:
            TerminalError: The log at ``start`` is gone (purged); the message names the
                position and the fix (re-snapshot).
        """
        ...

    def close(self) -> None:
        """Release connections; ``iter_changes`` iterators become unusable."""
        ...


@runtime_checkable
class AcknowledgesPositions(Protocol):
    """Optional for a ``LogReader`` whose source keeps its log until the reader says it may
    go (a PostgreSQL replication slot): the pipeline calls ``acknowledge`` after each
    checkpoint with the position the lake holds durably."""

    def acknowledge(self, position: Position) -> None:
        """Everything committed at or before ``position`` is durable downstream."""
        ...


@runtime_checkable
class ResumesTransactions(Protocol):
    """Optional for a ``LogReader`` whose source sends a transaction still open at a restart
    whole again (PostgreSQL): before ``iter_changes``, the pipeline names the transactions
    its restored buffer holds, so the reader can drop them from the buffer first."""

    def resume_transactions(self, txids: Iterable[str]) -> None:
        """The transactions the caller's buffer holds open."""
        ...


LOCATOR_COLUMN = "_locator"
"""In a snapshot of a table without key columns, the column holding each row's locator."""


@dataclass(frozen=True, slots=True)
class TableSnapshot:
    """One table read in a consistent snapshot: its description and row batches.

    The batches hold the description's columns. When the log locates rows by a physical row
    id (an Oracle ROWID), the batches also carry it in ``LOCATOR_COLUMN``; otherwise a row's
    locator is the tuple of its key columns.
    """

    description: TableDescription
    batches: Iterator[pa.RecordBatch]
    estimated_rows: int | None = None  # the source's statistics, for progress (None: unknown)


class KeyShapeError(ContractError):
    """Keys asked of a snapshot do not fit the table's key as the source has it now (a DDL
    changed the key after the keys were taken, e.g. a column of a table without a key
    dropped, which the pipeline's stream has not reached yet)."""


class SnapshotReader(Protocol):
    """Reads tables in one consistent snapshot and knows its log position."""

    def snapshot(
        self, tables: Sequence[str], keys: Mapping[str, Sequence[tuple[object, ...]]] | None = None
    ) -> AbstractContextManager[tuple[Position, Iterator[TableSnapshot]]]:
        """Hold a snapshot at one position and read ``tables`` in it.

        Args:
            tables: The tables to read, each whole unless ``keys`` lists rows for it.
            keys: Per table, the key values of the only rows to read (re-sync).

        Raises:
            KeyShapeError: Keys of ``keys`` do not fit the table's key at the source now.

        Yields:
            The snapshot's position P (it contains exactly the transactions with
            ``commit_pos <= P``) and the tables' rows, one ``TableSnapshot`` per table in
            the order asked.
        """
        ...


@dataclass(frozen=True, slots=True)
class TableChunk:
    """One key range of a table, read in its own consistent snapshot.

    Args:
        position: The snapshot's exact log position P: it holds exactly the transactions
            with ``commit_pos <= P`` (so the chunk is its own low and high watermark).
        snapshot: The rows of the range, in key order (``TableSnapshot`` batches).
        last_key: The key of the last row read: the next chunk starts after it. ``None``
            when the range reached the end of the table.
    """

    position: Position
    snapshot: TableSnapshot
    last_key: tuple[object, ...] | None


@runtime_checkable
class ReadsChunks(Protocol):
    """Optional for a ``SnapshotReader`` that can read a table in key-ordered chunks, each in
    a short snapshot of its own (the table refresh; a reader without it refreshes a table in
    one snapshot)."""

    def read_chunk(self, table: str, after: tuple[object, ...] | None, limit: int) -> TableChunk:
        """The first ``limit`` rows of ``table`` whose key is above ``after`` (``None``: from
        the start), in the source's key order, in one snapshot at an exact position."""
        ...


@runtime_checkable
class CapturesTables(Protocol):
    """Optional for a ``LogReader`` whose set of captured tables can grow while it runs (a
    table created at the source, or added to a running pipeline)."""

    def capture(self, tables: Sequence[str]) -> None:
        """Also read changes of ``tables`` from now on (thread-safe)."""
        ...


@runtime_checkable
class OmitsDdl(Protocol):
    """Optional for a ``LogReader`` whose log does not show DDL (PostgreSQL's logical
    decoding describes a table's new columns only with its next change, and never a default
    written into existing rows): while the log is quiet, and before a run that stops by
    itself ends, the pipeline compares each table's shape with the one it last saw and
    refreshes a table whose shape changed, and loads a captured table created meanwhile."""

    def table_shape(self, table: str) -> str:
        """The table's definition as text (columns, their types and defaults): equal texts
        mean no DDL changed the table in between."""
        ...

    def source_tables(self) -> list[str]:
        """Every table the source has now (``schema.table``): a table created without rows
        shows nowhere in such a log, so the pipeline looks for new captured ones."""
        ...
