"""The initial snapshot: all asked tables in one consistent read at a known binlog position.

One connection runs ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` at an exact binlog
position P (``snapshot_position``: MariaDB reads ``binlog_snapshot_file``/
``binlog_snapshot_position`` atomically with the snapshot, with no lock; MySQL reads its
binlog status under a brief global read lock), then reads every table in that transaction:
the snapshot at P holds exactly the transactions whose commit_pos <= P, so streaming the
binlog from P continues it without a gap or an overlap. Values come out exactly as the log
reader decodes them. A server ``flavour`` refuses is refused before any table is read.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from cdc_core.capture.position import Position
from cdc_core.capture.source import TableChunk, TableDescription, TableSnapshot
from cdc_core.config import mask_url
from cdc_core.names import qualify, split_table
from connectors.mariadb.binlog.schema_tracker import choose_key, key_warning
from connectors.mariadb.connector import BATCH_ROWS, MariaDBConnector, quote
from connectors.mariadb.errors import BinlogSetupError, lost_connections
from connectors.mariadb.generated import virtual_refusals
from connectors.mariadb.position import Epoch
from connectors.mariadb.table_kinds import check_capturable
from connectors.mariadb.types import refusal
from connectors.model import POSITION_COLUMN, Partition, TableSchema, carried_columns
from connectors.table_changes import TableChangedError, retry_while_changing

if TYPE_CHECKING:
    from connectors.mariadb.source_config import MariaDBSourceConfig

logger = logging.getLogger(__name__)
# The server's words for a table that changed under a read: ER_TABLE_DEF_CHANGED,
# ER_BAD_FIELD_ERROR, ER_NO_SUCH_TABLE (https://mariadb.com/kb/en/mariadb-error-code-reference/).
_CHANGED_CODES = (1412, 1054, 1146)


@contextlib.contextmanager
def _changes_of(table: str) -> Iterator[None]:
    """The server's errors of a table that changed between its definition and its rows
    (and a definition that lost a column read moments before) as ``TableChangedError``."""
    import pymysql

    try:
        yield
    except KeyError as exc:  # a column of the description is not in the fresh definition
        raise TableChangedError.of(table) from exc
    except pymysql.err.MySQLError as exc:
        if exc.args and exc.args[0] in _CHANGED_CODES:
            raise TableChangedError.of(table) from exc
        raise


def describe_table(
    connector: MariaDBConnector, table: str, keys: Mapping[str, Sequence[str]]
) -> TableDescription:
    """A table's current columns as the lake stores them, and its row key.

    Raises:
        TerminalError: The table does not exist.
        KeyConfigError: The configured key does not fit the table.
    """
    schema = connector.reflect(table)
    columns, refused = carried_columns(schema, refusal)  # refused by name, never dropped
    with connector.connect() as connection, connection.cursor() as cursor:
        virtual = virtual_refusals(cursor, *split_table(table, connector.database()))
    columns = [column for column in columns if column not in {v.name for v in virtual}]
    refused = (*refused, *virtual)
    key, source = choose_key(table, columns, schema.primary_key, keys.get(table))
    if source != "primary key":
        _warn_once(key_warning(table, key, source))
    arrow = connector.arrow_schema(schema, columns)
    arrow = arrow.remove(arrow.get_field_index(POSITION_COLUMN))
    return TableDescription(table, arrow, key, unique=source == "primary key", refused=refused)


@functools.cache
def _warn_once(message: str) -> None:
    """A table is described again on every DDL and refresh: its key warning is said once."""
    logger.warning(message)


class MariaDBSnapshotReader:
    """Reads tables in one consistent snapshot (``cdc_core.capture.source.SnapshotReader``).

    Args:
        config: The source (its tables are the default set; any table can be asked).
        epoch: The epoch of the server read now (shared with the log reader, which sets
            it: ``position.Epoch``), so snapshots order among the log's positions.
    """

    def __init__(self, config: MariaDBSourceConfig, epoch: Epoch | None = None) -> None:
        self.epoch = epoch or Epoch()
        password = config.password.reveal() if config.password is not None else None
        self.connector = MariaDBConnector(config.url, password, config.endpoint)
        self.database = config.endpoint.database or ""
        self.keys = {qualify(t, self.database): tuple(k) for t, k in config.keys.items()}

    def _check_flavour(self) -> None:
        """Refuse a server replcheck is not built for before any table is read.

        Raises:
            UnsupportedServerError: A product or version replcheck is not built for.
        """
        self.connector.flavour()

    @contextlib.contextmanager
    def snapshot(
        self, tables: Sequence[str], keys: Mapping[str, Sequence[tuple[object, ...]]] | None = None
    ) -> Iterator[tuple[Position, Iterator[TableSnapshot]]]:
        """Hold one snapshot and read ``tables`` in it (see ``SnapshotReader``).

        Read each ``TableSnapshot``'s batches before taking the next one: all tables are
        read on the snapshot's one connection.

        Raises:
            BinlogSetupError: The server writes no binlog, so the snapshot has no position.
            UnsupportedServerError: A server replcheck is not built for (``_check_flavour``).
            SnapshotLockError: MySQL's brief global read lock was not granted in time.
            SnapshotPrivilegeError: MySQL: the user may not take the position.
        """
        names = [qualify(table, self.database) for table in tables]
        wanted = {qualify(t, self.database): rows for t, rows in (keys or {}).items()}
        with lost_connections(mask_url(self.connector.url)):
            self._check_flavour()
            check_capturable(self.connector, names)  # refused before any row is read
            descriptions = [describe_table(self.connector, name, self.keys) for name in names]
            connection = self.connector.connect()
            with contextlib.closing(connection):
                yield (
                    self._begin(connection),
                    self._iter_tables(connection, descriptions, wanted),
                )
                connection.commit()

    def _begin(self, connection: Any) -> Position:
        """Open the snapshot on ``connection``; its exact binlog position.

        Raises:
            BinlogSetupError: The server writes no binlog.
        """
        found = self.connector.snapshot_at(connection, for_capture=True)
        if found is None:
            raise BinlogSetupError.binlog_off(self.connector.url)
        position = found.to_position(self.epoch.value)
        if found.gtid_set:
            logger.info("snapshot at %s, GTID set %s", position.text, found.gtid_set)
        return position

    def _iter_tables(
        self,
        connection: Any,
        descriptions: Sequence[TableDescription],
        wanted: Mapping[str, Sequence[tuple[object, ...]]],
    ) -> Iterator[TableSnapshot]:
        for description in descriptions:
            partition = Partition(0)
            if description.table in wanted:
                rows = tuple(tuple(row) for row in wanted[description.table])
                partition = Partition(0, key_columns=description.key, keys=rows)
            batches = self._batches(connection, description, partition)
            with lost_connections(mask_url(self.connector.url)):
                estimated = _estimated_rows(connection, description)
            yield TableSnapshot(description, batches, estimated)

    def _batches(
        self, connection: Any, description: TableDescription, partition: Partition
    ) -> Iterator[Any]:
        import pymysql.cursors

        with lost_connections(mask_url(self.connector.url)):
            # Errors name a row by the key the pipeline locates it by (``zero_dates``).
            reflected = self.connector.reflect(description.table)
            schema = replace(reflected, primary_key=description.key)
            columns = list(description.schema.names)
            with _changes_of(description.table):
                arrow = self.connector.arrow_schema(schema, columns)
                sql, params = self.connector.select_sql(schema, columns, partition)
            cursor = connection.cursor(pymysql.cursors.SSCursor)
            with cursor, _changes_of(schema.table):
                cursor.execute(sql, params)
                while rows := cursor.fetchmany(BATCH_ROWS):
                    batch = self.connector.to_batch(rows, schema, columns, arrow, None)
                    yield batch.drop_columns([POSITION_COLUMN])

    def read_chunk(self, table: str, after: tuple[object, ...] | None, limit: int) -> TableChunk:
        """``read_one_chunk``, again while a concurrent DDL changes the table under it."""
        with lost_connections(mask_url(self.connector.url)):
            return retry_while_changing(lambda: self.read_one_chunk(table, after, limit))

    def read_one_chunk(
        self, table: str, after: tuple[object, ...] | None, limit: int
    ) -> TableChunk:
        """The first ``limit`` rows of ``table`` above key ``after``, in key order, in one
        consistent snapshot at its exact binlog position (``ReadsChunks``).

        Only a primary key orders rows uniquely: a table located by another key (or all
        its columns) is read whole in one chunk.

        Raises:
            BinlogSetupError: The server writes no binlog, so the snapshot has no position.
        """
        name = qualify(table, self.database)
        self._check_flavour()
        check_capturable(self.connector, [name])
        description = describe_table(self.connector, name, self.keys)
        schema = self.connector.reflect(name)
        ordered = bool(description.key) and tuple(schema.primary_key) == description.key
        connection = self.connector.connect()
        with contextlib.closing(connection):
            position = self._begin(connection)
            batch, last = self._chunk(
                connection,
                schema,
                description,
                after if ordered else None,
                limit if ordered else None,
            )
            connection.commit()
        snapshot = TableSnapshot(description, iter([batch]))
        return TableChunk(position, snapshot, last)

    def _chunk(
        self,
        connection: Any,
        schema: TableSchema,
        description: TableDescription,
        after: tuple[object, ...] | None,
        limit: int | None,
    ) -> tuple[Any, tuple[object, ...] | None]:
        """One key range as an Arrow batch, and the key of its last row if more may follow."""
        columns = list(description.schema.names)
        key = list(description.key)
        select = columns + [k for k in key if k not in columns]
        with _changes_of(description.table):
            sql, selected = self.connector.select_sql(schema, select, Partition(0))
            arrow = self.connector.arrow_schema(schema, columns)
        params: list[object] = list(selected)
        quoted = ", ".join(quote(k) for k in key)
        if after is not None:
            sql += f" WHERE ({quoted}) > ({', '.join(['%s'] * len(key))})"
            params = [*params, *after]
        if limit is not None:
            sql += f" ORDER BY {quoted} LIMIT {int(limit)}"
        with connection.cursor() as cursor, _changes_of(description.table):
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        batch = self.connector.to_batch(
            [row[: len(columns)] for row in rows], schema, columns, arrow, None
        )
        batch = batch.drop_columns([POSITION_COLUMN])
        if limit is None or len(rows) < limit:
            return batch, None
        last = rows[-1]
        return batch, tuple(last[select.index(k)] for k in key)


def _estimated_rows(connection: Any, description: TableDescription) -> int | None:
    """The server's statistics of a table's rows (for progress lines; InnoDB's is rough)."""
    schema, name = split_table(description.table, "")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT TABLE_ROWS FROM information_schema.TABLES"
            " WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
            (schema, name),
        )
        found = cursor.fetchone()
    return None if found is None or found[0] is None else int(found[0])
