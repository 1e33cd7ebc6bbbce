"""The pipeline's snapshots of a PostgreSQL source (``cdc_core.capture.source.SnapshotReader``), and
the description of a captured table (its stored columns and the key that locates its rows).

The snapshot and the stream meet at one LSN. When the pipeline's slot does not exist yet,
it is created here with an exported snapshot (``CREATE_REPLICATION_SLOT ... (SNAPSHOT
'export')``): the snapshot holds exactly the transactions whose commit_pos <= the slot's
``consistent_point`` P, and the slot streams exactly those after P (``snapshot.py`` says
why). When the slot exists (a table added to a running pipeline, a re-sync), a temporary
slot exports the snapshot at its own P; the pipeline's slot must not have confirmed the
log past P, or the changes in between would be lost (``SlotAheadError``).

Rows are read by ``PostgresConnector.read_partition`` in the exported snapshot, so values
are exactly those of the validator's Postgres source; the log reader decodes the stream
into the same values (``wal_values.py``).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cdc_core.capture.position import Position
from cdc_core.capture.source import TableChunk, TableDescription, TableSnapshot
from cdc_core.errors import TerminalError, TransientError
from connectors.model import (
    POSITION_COLUMN,
    Partition,
    Refusal,
    Snapshot,
    SourceColumn,
    TableSchema,
    carried_columns,
)
from connectors.postgres.connector import (
    PostgresConnector,
    partition_query,
    qualified_name,
    quote,
    split_table,
)
from connectors.postgres.errors import SlotAheadError, SlotMissingError, lost_connections
from connectors.postgres.exported_snapshot import exported_snapshot
from connectors.postgres.generated import generated_columns, generated_refusal
from connectors.postgres.position import position_of
from connectors.postgres.replication import (
    PostgresSourceConfig,
    announce_slot,
    check_slot,
    check_wal_level,
    connector_of,
    ensure_publication,
    open_stream_connection,
    slot_state,
)
from connectors.postgres.rewrites import ensure_rewrite_triggers
from connectors.postgres.types import GEOMETRIC, MONEY_DIGITS
from connectors.table_changes import TableChangedError, retry_while_changing
from merkle import types as lt

if TYPE_CHECKING:
    import pyarrow as pa

logger = logging.getLogger(__name__)

# The replica identity of a table and the columns of its replica identity index.
_IDENTITY_SQL = """
SELECT c.relreplident,
       (SELECT array_agg(a.attname::text ORDER BY k.ord)
          FROM pg_index i
         CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
          JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
         WHERE i.indrelid = c.oid AND i.indisreplident),
       (SELECT array_agg((SELECT string_agg(a.attname::text, ',' ORDER BY a.attname)
                            FROM pg_attribute a
                           WHERE a.attrelid = c.oid AND a.attnum = ANY (k.conkey)))
          FROM pg_constraint k
         WHERE k.conrelid = c.oid AND k.contype IN ('p', 'u') AND k.condeferrable)
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = %s AND c.relname = %s
"""


# Values a row locator cannot hold: it is a tuple of scalars (``cdc_core.rebuild.image_store``), and
# the mirror is merged on equal key values.
_NOT_LOCATING = (lt.ArrayType, lt.TimeTzType)


@contextlib.contextmanager
def _changes_of(table: str) -> Iterator[None]:
    """A table that lost a column between its description and its rows (a column of the
    description not in the fresh definition, or "column ... does not exist" from the
    server) as ``TableChangedError``: the read starts again."""
    import psycopg

    try:
        yield
    except (KeyError, psycopg.errors.UndefinedColumn) as exc:
        raise TableChangedError.of(table) from exc


def choose_key(
    table: TableSchema, identity: str, index: Sequence[str], configured: Sequence[str] | None
) -> tuple[str, ...]:
    """The columns that locate a row, as the stream can always give them.

    REPLICA IDENTITY USING INDEX logs the index's columns in deletes, so they are the key;
    otherwise the primary key (DEFAULT logs it; FULL logs the whole row); a table without
    either is located by the configured key, else by all its stored columns except arrays
    and ``time_tz`` columns, which cannot locate a row.

    Raises:
        TerminalError: The key names an array or ``time_tz`` column, or a column the table
            does not store.
    """
    key = _key_of(table, identity, index, configured)
    _check_locating(table, key)
    return key


def _key_of(
    table: TableSchema, identity: str, index: Sequence[str], configured: Sequence[str] | None
) -> tuple[str, ...]:
    if identity == "i" and index:
        return tuple(index)
    if table.primary_key:
        return tuple(table.primary_key)
    stored = [column.name for column in table.columns if column.ltype is not None]
    if configured:
        missing = [column for column in configured if column not in stored]
        if missing:
            raise TerminalError(
                f"the key {list(configured)} configured for table {table.table} names columns"
                f" {missing} it does not store; fix the configured key",
                {"table": table.table},
            )
        return tuple(configured)
    logger.warning(
        "table %s has no primary key, replica identity index or configured key; rows are"
        " located by all their columns but arrays, time_tz and geometric columns (configure a"
        " key)",
        table.table,
    )
    return tuple(c.name for c in table.columns if c.name in stored and _locates(c))


def _locates(column: SourceColumn) -> bool:
    ltype = column.ltype
    geometric = column.native_type.split("[")[0] in GEOMETRIC
    return ltype is not None and not isinstance(ltype, _NOT_LOCATING) and not geometric


def _check_locating(table: TableSchema, key: tuple[str, ...]) -> None:
    wrong = [name for name in key if not _locates(table.column(name))]
    if wrong or not key:
        problem = f"its key columns {wrong} are" if wrong else "none of its columns is"
        raise TerminalError(
            f"table {table.table}: {problem} scalar values that can locate its rows in the"
            " lake (arrays, time with time zone, geometric and unstored types cannot); give it"
            " a unique"
            " index of other columns as replica identity (ALTER TABLE ... REPLICA IDENTITY"
            " USING INDEX ...), or, without a primary key, configure its key",
            {"table": table.table},
        )


def _refuse_deferrable(table: str, key: Sequence[str], deferrable: Sequence[str] | None) -> None:
    """A deferrable unique key is checked at the end of a statement or transaction, so the
    log can show two rows on one key in between (a key swap); logical decoding locates rows
    by key only and cannot tell them apart, so such a table would replicate wrongly
    (https://www.postgresql.org/docs/current/sql-createtable.html, "DEFERRABLE")."""
    if ",".join(sorted(key)) in (deferrable or ()):
        raise TerminalError(
            f"table {table}: its key {list(key)} is a DEFERRABLE constraint, so a transaction"
            " can move rows through duplicate keys that the log cannot tell apart; make the"
            " constraint NOT DEFERRABLE (ALTER TABLE ... ALTER CONSTRAINT ... NOT DEFERRABLE)"
            " or exclude the table",
            {"table": table},
        )


def _money_digits(connection: Any, schema: TableSchema) -> int:
    """The fractional digits lc_monetary gives ``money`` (2 unless a table has a money
    column: asked only then)."""
    if not any(column.native_type == "money" for column in schema.columns):
        return MONEY_DIGITS
    row = connection.execute("SELECT scale('1'::money::numeric)").fetchone()
    return int(row[0])


def _money_refusal(refusal: Refusal, digits: int) -> Refusal:
    """``refusal``, and ``money`` columns when lc_monetary gives money other than
    ``MONEY_DIGITS`` fractional digits (their cents would be read as another amount)."""

    def refused(column: SourceColumn) -> str | None:
        if column.native_type == "money" and digits != MONEY_DIGITS:
            return (
                f"lc_monetary gives money {digits} fractional digits, replcheck carries it with"
                f" {MONEY_DIGITS} (set lc_monetary to a locale with {MONEY_DIGITS}, or store"
                " the amounts as numeric)"
            )
        return refusal(column)

    return refused


def describe_table(
    connector: PostgresConnector, table: str, keys: Mapping[str, Sequence[str]]
) -> TableDescription:
    """A table's stored columns (those with a logical type) as Arrow fields, its key, and
    the columns it refuses (user-defined ranges, composites, text search types, ...).

    Raises:
        TerminalError: The table does not exist, or its configured key does not fit.
    """
    schema = connector.reflect(table)
    with connector.connect() as connection:
        row = connection.execute(_IDENTITY_SQL, split_table(table)).fetchone()
        generated = generated_columns(connection, connector.qualified(table))
        money_digits = _money_digits(connection, schema)
    identity, index = (row[0], row[1] or []) if row else ("d", [])
    key = choose_key(schema, identity, index, keys.get(table))
    _refuse_deferrable(table, key, row[2] if row else None)
    refusal = _money_refusal(generated_refusal(generated), money_digits)
    columns, refused = carried_columns(schema, refusal)  # refused by name, never dropped
    arrow = connector.arrow_schema(schema, columns)
    unique = key in (tuple(schema.primary_key), tuple(index) if identity == "i" else ())
    arrow = arrow.remove(arrow.get_field_index(POSITION_COLUMN))
    return TableDescription(table, arrow, key, unique=bool(key) and unique, refused=refused)


class PostgresSnapshotReader:
    """Reads tables in one exported snapshot that meets the pipeline's slot.

    Args:
        config: The source.
    """

    def __init__(self, config: PostgresSourceConfig) -> None:
        self.config = config
        self.connector = connector_of(config)
        self.keys = config.qualified_keys()

    @contextlib.contextmanager
    def snapshot(
        self, tables: Sequence[str], keys: Mapping[str, Sequence[tuple[object, ...]]] | None = None
    ) -> Iterator[tuple[Position, Iterator[TableSnapshot]]]:
        """Hold one exported snapshot and read ``tables`` in it (see ``SnapshotReader``).

        Raises:
            SlotAheadError: The existing slot confirmed the log past the snapshot.
            SlotMissingError: The slot does not exist and may not be created.
        """
        names = [qualified_name(table) for table in tables]
        wanted = {qualified_name(t): rows for t, rows in (keys or {}).items()}
        with lost_connections(self.connector.where):
            descriptions = [describe_table(self.connector, name, self.keys) for name in names]
            with self._exported() as snapshot:
                assert snapshot.position is not None and snapshot.position_text is not None
                position = Position(snapshot.position, snapshot.position_text)
                yield position, self._iter_tables(descriptions, wanted, snapshot)

    @contextlib.contextmanager
    def _exported(self) -> Iterator[Snapshot]:
        where, slot = self.connector.where, self.config.slot
        with self.connector.connect() as connection:
            check_wal_level(connection, where)
            ensure_publication(connection, self.config, where)
            # Before the slot: every DDL after the snapshot's position then leaves its message.
            ensure_rewrite_triggers(connection, where, self.config.record_rewrites)
            state = slot_state(connection, slot)
        if state is None:
            if not self.config.create_slot:
                raise SlotMissingError.named(where, slot)
            with self._new_slot() as snapshot:
                yield snapshot
            return
        confirmed = check_slot(state, slot, where)
        with exported_snapshot(self.connector.conninfo(), where) as snapshot:
            assert snapshot.position is not None
            if confirmed > snapshot.position:
                text = str(snapshot.position_text)
                raise SlotAheadError.of(where, slot, text, state["confirmed"])
            yield snapshot

    @contextlib.contextmanager
    def _new_slot(self) -> Iterator[Snapshot]:
        """Create the pipeline's slot, exporting the snapshot at its consistent point."""
        import psycopg2

        connection = open_stream_connection(self.config, self.connector)
        with contextlib.closing(connection):
            cursor = connection.cursor()
            try:
                cursor.execute(
                    f"CREATE_REPLICATION_SLOT {self.config.slot} LOGICAL pgoutput"
                    " (SNAPSHOT 'export')"
                )
            except psycopg2.OperationalError as exc:
                raise TransientError(f"cannot create slot {self.config.slot}: {exc}") from exc
            _, consistent_point, name, _ = cursor.fetchone()
            position = position_of(consistent_point)
            announce_slot(self.config.slot, self.connector.where, position.text)
            yield Snapshot(position.value, position.text, name)

    def _iter_tables(
        self,
        descriptions: Sequence[TableDescription],
        wanted: Mapping[str, Sequence[tuple[object, ...]]],
        snapshot: Snapshot,
    ) -> Iterator[TableSnapshot]:
        for description in descriptions:
            partition = Partition(0)
            if description.table in wanted:
                rows = tuple(tuple(row) for row in wanted[description.table])
                partition = Partition(0, key_columns=description.key, keys=rows)
            batches = self._batches(description, partition, snapshot)
            with lost_connections(self.connector.where):
                estimated = self._estimated_rows(description.table)
            yield TableSnapshot(description, batches, estimated)

    def _estimated_rows(self, table: str) -> int | None:
        """The planner's statistics of a table's rows, for progress (None: never analysed)."""
        with self.connector.connect() as connection:
            found = connection.execute(
                "SELECT reltuples::bigint FROM pg_class WHERE oid = to_regclass(%s)",
                (self.connector.qualified(table),),
            ).fetchone()
        return None if found is None or found[0] < 0 else int(found[0])

    def _batches(
        self, description: TableDescription, partition: Partition, snapshot: Snapshot
    ) -> Iterator[pa.RecordBatch]:
        with lost_connections(self.connector.where):
            schema = self.connector.reflect(description.table)
            columns = list(description.schema.names)
            for batch in self.connector.read_partition(schema, columns, partition, snapshot):
                yield batch.drop_columns([POSITION_COLUMN])

    def read_chunk(self, table: str, after: tuple[object, ...] | None, limit: int) -> TableChunk:
        """``read_one_chunk``, again while a concurrent DDL changes the table under it
        (postgres-full seed 621: a column dropped between its description and its rows)."""
        with lost_connections(self.connector.where):
            return retry_while_changing(lambda: self.read_one_chunk(table, after, limit))

    def read_one_chunk(
        self, table: str, after: tuple[object, ...] | None, limit: int
    ) -> TableChunk:
        """The first ``limit`` rows of ``table`` above key ``after``, in key order, in one
        exported snapshot at its exact LSN (``ReadsChunks``; a temporary slot's consistent
        point, like every shared snapshot here). A table located by all its columns (no key
        that orders rows uniquely) is read whole in one chunk.
        """
        name = qualified_name(table)
        with _changes_of(name):
            description = describe_table(self.connector, name, self.keys)
            schema = self.connector.reflect(name)
            # Key order where the key is the source's or the user's; a table located by
            # its columns is read whole, so equal rows never straddle two chunks.
            ordered = description.unique or name in self.keys
            with self.connector.shared_snapshot() as snapshot:
                assert snapshot is not None and snapshot.position is not None
                position = Position(snapshot.position, str(snapshot.position_text))
                with self.connector.read_transaction(snapshot) as connection:
                    self._check_unchanged(connection, name, schema)
                    limited = limit if ordered else None
                    rows = self._chunk(connection, schema, description, after, limited)
        batch, last = rows
        return TableChunk(position, TableSnapshot(description, iter([batch])), last)

    def _check_unchanged(self, connection: Any, table: str, schema: TableSchema) -> None:
        """Lock the table against DDL for the read (ACCESS SHARE, as the SELECT would),
        then check its definition is still the one read before: a column dropped since
        may not even fail the SELECT (a column named like its table reads as the whole
        row: postgres-full seed 673).

        Raises:
            TableChangedError: The definition changed (the chunk is read again).
        """
        connection.execute(f"SELECT 1 FROM {self.connector.qualified(table)} LIMIT 0")
        if self.connector.reflect(table).columns != schema.columns:
            raise TableChangedError.of(table)

    def _chunk(
        self,
        connection: Any,
        schema: TableSchema,
        description: TableDescription,
        after: tuple[object, ...] | None,
        limit: int | None,
    ) -> tuple[pa.RecordBatch, tuple[object, ...] | None]:
        """One key range as a batch, and the key of its last row if more may follow."""
        import pyarrow as pa

        columns = list(description.schema.names)
        key = list(description.key)
        sql, params = partition_query(schema, columns, Partition(0))
        keys = ", ".join(quote(k) for k in key)
        bound: list[object] = list(params)
        if after is not None and limit is not None:
            sql += f" WHERE ({keys}) > ({', '.join(['%s'] * len(key))})"
            bound += list(after)
        if limit is not None:
            sql += f" ORDER BY {keys} LIMIT {int(limit)}"
        batches = list(self.connector.read_query(connection, schema, columns, sql, bound))
        arrow = self.connector.arrow_schema(schema, columns)
        data = pa.Table.from_batches(batches, arrow) if batches else arrow.empty_table()
        data = data.drop_columns([POSITION_COLUMN])
        rows = data.num_rows
        if limit is None or rows < limit:
            return _one_batch(data), None
        last = data.slice(rows - 1).select(key).to_pylist()[0]
        return _one_batch(data), tuple(last[k] for k in key)


def _one_batch(data: pa.Table) -> pa.RecordBatch:
    import pyarrow as pa

    batches = data.combine_chunks().to_batches()
    return batches[0] if batches else pa.RecordBatch.from_pylist([], schema=data.schema)
