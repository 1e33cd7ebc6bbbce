"""PostgreSQL as a snapshot source: reflection, key ranges, and partition reads in Arrow, all
partitions in one exported snapshot, at an exact LSN when asked (``exported_snapshot.py``).

SQL goes through psycopg 3; only the shared snapshot needs psycopg2, whose logical
replication connection psycopg 3 lacks. Sessions run in UTC so nothing the server formats
depends on its own time zone.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from cdc_core import names
from cdc_core.drivers import driver_import
from cdc_core.errors import ConfigError, TerminalError, TransientError
from connectors.base import Connector, missing_table
from connectors.model import (
    Capabilities,
    Partition,
    Snapshot,
    SourceColumn,
    TableSchema,
    key_parameter,
)
from connectors.postgres.exported_snapshot import exported_snapshot, plain_snapshot, use_snapshot
from connectors.postgres.position import describe_position
from connectors.postgres.product import POSTGRES
from connectors.postgres.types import (
    SESSION_OPTIONS,
    TIMESTAMP_ROUNDING,
    arrow_type,
    logical_type,
    quote,
    read_intervals_as_text,
    select_expression,
    to_arrow,
)
from connectors.postgres.url_parameters import LOG_PARAMETERS, is_log_parameter
from connectors.postgres.wal_end import committed_end
from connectors.registry import CAPTURE_PARAMETER
from connectors.urls import DatabaseUrl, parse_url

if TYPE_CHECKING:
    import psycopg
    import pyarrow as pa

    from connectors.jdbc import JdbcRead
    from connectors.postgres.pushdown import PostgresDigestSession
    from connectors.pushdown import DigestDialect

log = logging.getLogger(__name__)

BATCH_ROWS = 20_000  # rows per fetch and per Arrow batch: bounds a reader's memory

# Columns in order, with the declared type and, for domains, the base type that decides the
# logical type; for arrays also their element's type (a domain's base, the column's typmod)
# and whether it is an enum (https://www.postgresql.org/docs/current/catalog-pg-type.html).
_COLUMNS_SQL = """
SELECT a.attname,
       format_type(a.atttypid, a.atttypmod),
       format_type(b.oid, CASE WHEN t.typtype = 'd' THEN t.typtypmod ELSE a.atttypmod END),
       b.typtype = 'e',
       NOT a.attnotnull,
       c.oid,
       format_type(eb.oid, CASE WHEN e.typtype = 'd' THEN e.typtypmod ELSE a.atttypmod END),
       eb.typtype = 'e'
  FROM pg_attribute a
  JOIN pg_class c ON c.oid = a.attrelid
  JOIN pg_namespace n ON n.oid = c.relnamespace
  JOIN pg_type t ON t.oid = a.atttypid
  JOIN pg_type b ON b.oid = coalesce(nullif(t.typbasetype, 0), t.oid)
  LEFT JOIN pg_type e ON e.oid = b.typelem AND b.typcategory = 'A'
  LEFT JOIN pg_type eb ON eb.oid = coalesce(nullif(e.typbasetype, 0), e.oid)
 WHERE n.nspname = %s AND c.relname = %s AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
   AND a.attnum > 0 AND NOT a.attisdropped
 ORDER BY a.attnum
"""
_PRIMARY_KEY_SQL = """
SELECT a.attname
  FROM pg_index i
 CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)
  JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
 WHERE i.indrelid = %s AND i.indisprimary
 ORDER BY k.ord
"""


def split_table(table: str) -> tuple[str, str]:
    """Canonical ``schema.table`` (``cdc_core.names``) -> (schema, table); a bare name is in
    ``public``."""
    return names.split_table(table, "public")


def qualified_name(table: str) -> str:
    """The canonical ``schema.table`` of a canonical name; a bare name is in ``public``."""
    return names.qualify(table, "public")


class PostgresConnector(Connector):
    """PostgreSQL databases, addressed as ``postgresql+psycopg://user@host:port/database``.

    The password is the constructor's ``password`` (else the URL's); it is never logged.
    """

    name = POSTGRES.name
    schemes = POSTGRES.served_by_connector
    capabilities = Capabilities(timestamp_rounding=TIMESTAMP_ROUNDING)
    repair = POSTGRES.repair

    @property
    def where(self) -> str:
        """The database, for messages: host, port and name, never the password."""
        url = self.endpoint
        return f"Postgres {url.host or 'localhost'}:{url.port or 5432}/{url.database}"

    @staticmethod
    def parse_endpoint(url: str) -> DatabaseUrl:
        """``url``'s parts; a bad URL's error says how a Postgres URL looks."""
        try:
            return parse_url(url)
        except ConfigError as exc:
            raise ConfigError(
                f"not a Postgres URL (postgresql://user@host:port/db): {exc}"
            ) from exc

    def conninfo(self) -> str:
        with driver_import("the Postgres connector"):
            import psycopg
            from psycopg.conninfo import make_conninfo

        url = self.endpoint
        password = self.password if self.password is not None else url.password
        extra = {
            k: str(v)
            for k, v in url.query.items()
            if not is_log_parameter(k) and k != CAPTURE_PARAMETER
        }
        options = " ".join(filter(None, [extra.pop("options", ""), SESSION_OPTIONS]))
        params = {
            "host": url.host,
            "port": url.port,
            "user": url.username,
            "password": password,
            "dbname": url.database,
            "application_name": "replcheck",
            "options": options,
            **extra,
        }
        try:
            return make_conninfo("", **{k: v for k, v in params.items() if v is not None})
        except psycopg.ProgrammingError as exc:  # libpq does not know a parameter
            raise ConfigError(
                f"a URL parameter of {self.where} is unknown: {exc}; PostgreSQL URLs take"
                f" libpq's parameters and the pipeline's {list(LOG_PARAMETERS)}",
                {"source": self.where},
            ) from exc

    def connect(self, autocommit: bool = True) -> psycopg.Connection[Any]:
        with driver_import("the Postgres connector"):
            import psycopg
        try:
            connection = psycopg.connect(self.conninfo(), autocommit=autocommit)
        except psycopg.OperationalError as exc:
            where = self.where
            raise TransientError(f"cannot connect to {where}: {exc}", {"source": where}) from exc
        read_intervals_as_text(connection)
        return connection

    def log_position(self) -> int | None:
        """Where every commit made so far ends, flushed (``wal_end``): a replica that has
        applied it holds every change a reader of the source sees now."""
        with contextlib.closing(self.connect()) as connection:
            return committed_end(connection)

    def describe_position(self, value: int) -> str:
        """An LSN as PostgreSQL prints it (``position.describe_position``)."""
        return describe_position(value)

    def table_names(self) -> list[str]:
        """Every table outside the system schemas, as ``schema.table``, in order."""
        query = (
            "SELECT schemaname, tablename FROM pg_tables WHERE schemaname NOT IN"
            " ('pg_catalog', 'information_schema') ORDER BY 1, 2"
        )
        with contextlib.closing(self.connect()) as connection:
            return [names.format_table(*row) for row in connection.execute(query).fetchall()]

    def reflect(self, table: str) -> TableSchema:
        schema, name = split_table(table)
        with self.connect() as connection:
            rows = connection.execute(_COLUMNS_SQL, (schema, name)).fetchall()
            if not rows:
                raise missing_table(table, self.where)
            key = connection.execute(_PRIMARY_KEY_SQL, (rows[0][5],)).fetchall()
        columns = tuple(
            SourceColumn(column, native, logical_type(base, is_enum, _element(*array)), nullable)
            for column, native, base, is_enum, nullable, _, *array in rows
        )
        return TableSchema(table, columns, tuple(k for (k,) in key))

    def key_range(self, table: str, column: str) -> tuple[int, int] | None:
        import psycopg

        sql = f"SELECT min({quote(column)}), max({quote(column)}) FROM {_qualified(table)}"
        with self.connect() as connection:
            try:
                low, high = connection.execute(sql).fetchone() or (None, None)
            except psycopg.errors.UndefinedTable as exc:
                raise missing_table(table, self.where) from exc
        return None if low is None or high is None else (int(low), int(high))

    def arrow_type(self, table: TableSchema, name: str) -> pa.DataType:
        return arrow_type(table.column(name))

    def read_partition(
        self,
        table: TableSchema,
        columns: Sequence[str],
        partition: Partition,
        snapshot: Snapshot | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """Rows of one partition, in ``snapshot`` (position: its LSN) when given, else in a
        REPEATABLE READ transaction of its own (position NULL: see ``snapshot.py``)."""
        position = snapshot.position if snapshot is not None else None
        at = snapshot.position_text if snapshot is not None else None
        log.debug("reading %s partition %s at LSN %s", table.table, partition.index, at)
        with self.read_transaction(snapshot) as connection:
            yield from self.read_in(connection, table, columns, partition, position)

    def read_in(
        self,
        connection: psycopg.Connection[Any],
        table: TableSchema,
        columns: Sequence[str],
        partition: Partition,
        position: int | None,
    ) -> Iterator[pa.RecordBatch]:
        """Rows of one partition read on ``connection``, in whatever transaction it has."""
        sql, params = partition_query(table, columns, partition)
        yield from self.read_query(connection, table, columns, sql, params, position)

    def read_query(
        self,
        connection: psycopg.Connection[Any],
        table: TableSchema,
        columns: Sequence[str],
        sql: str,
        params: Sequence[object],
        position: int | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """The rows of ``sql`` (selecting ``columns`` of ``table`` as ``partition_query``
        writes them) as Arrow batches typed like every read of the table."""
        import psycopg

        source_columns = [table.column(c) for c in columns]
        schema = self.arrow_schema(table, columns)
        with connection.cursor("replcheck") as cur:
            try:
                cur.execute(sql, params)
                while rows := cur.fetchmany(BATCH_ROWS):
                    yield _to_batch(table.table, source_columns, rows, schema, position)
            except (psycopg.DataError, psycopg.NotSupportedError) as exc:
                raise TerminalError(
                    f"cannot read {table.table} from {self.where}: {exc.diag.message_primary};"
                    " infinite dates and timestamps have no Arrow value: leave the column out",
                    {"source": self.where, "table": table.table},
                ) from exc

    @staticmethod
    def qualified(table: str) -> str:
        """The quoted ``schema.table`` of a table (``public`` by default)."""
        return _qualified(table)

    def jdbc_read(
        self,
        table: TableSchema,
        columns: Sequence[str],
        partition_column: str | None = None,
        snapshot: Snapshot | None = None,
    ) -> JdbcRead | None:
        from connectors.postgres.jdbc import jdbc_read

        return jdbc_read(self, table, columns, partition_column, snapshot)

    def digest_dialect(self) -> DigestDialect | None:
        """PostgreSQL 14 or later in a UTF8 database (see ``connectors.postgres.pushdown``)."""
        from connectors.postgres.pushdown import PostgresDigestDialect

        with self.connect() as connection:
            row = connection.execute(
                "SELECT current_setting('server_version_num')::int,"
                " current_setting('server_encoding')"
            ).fetchone()
        if row is None or row[0] < 140000 or row[1] != "UTF8":
            return None
        return PostgresDigestDialect(_qualified)

    def digest_session(
        self, table: TableSchema, snapshot: Snapshot | None
    ) -> AbstractContextManager[PostgresDigestSession]:
        from connectors.postgres.pushdown import digest_session

        return digest_session(self, table, snapshot)

    @contextlib.contextmanager
    def read_transaction(self, snapshot: Snapshot | None) -> Iterator[psycopg.Connection[Any]]:
        """A read-only REPEATABLE READ transaction, in ``snapshot`` when given."""
        from psycopg import IsolationLevel

        with self.connect(autocommit=False) as connection:
            connection.isolation_level = IsolationLevel.REPEATABLE_READ
            connection.read_only = True
            if snapshot is not None and snapshot.token is not None:
                use_snapshot(connection, snapshot, self.where)
            yield connection
            connection.rollback()  # nothing to commit: the transaction only read

    @contextlib.contextmanager
    def shared_snapshot(self, at_log_position: bool = True) -> Iterator[Snapshot | None]:
        """One exported snapshot, held until the block ends: a temporary logical slot's at
        its exact LSN when ``at_log_position``, else a REPEATABLE READ transaction's
        (position None; no slot, ``wal_level`` or REPLICATION needed): see
        ``exported_snapshot.py``."""
        if at_log_position:
            with exported_snapshot(self.conninfo(), self.where) as snapshot:
                yield snapshot
            return
        with self.read_transaction(None) as connection, plain_snapshot(connection) as snapshot:
            yield snapshot


def _element(name: str | None, is_enum: bool | None) -> tuple[str, bool] | None:
    """An array column's element type and whether it is an enum (None: not an array)."""
    return None if name is None else (name, bool(is_enum))


def _qualified(table: str) -> str:
    schema, name = split_table(table)
    return f"{quote(schema)}.{quote(name)}"


# Key columns compared as another type: json has no `=` (its text is the value as stored);
# money has no `=` with the numeric the lake's exact decimal binds as.
_LOCATED_AS = {"json": "text", "money": "numeric"}


def partition_query(
    table: TableSchema, columns: Sequence[str], partition: Partition
) -> tuple[str, list[int]]:
    """``SELECT`` of ``columns`` (as the readers convert them) of one partition."""
    select = ", ".join(select_expression(table.column(c)) for c in columns)
    sql = f"SELECT {select} FROM {_qualified(table.table)}"

    def located(column: str) -> str:
        cast = _LOCATED_AS.get(table.column(column).native_type)
        return f"{quote(column)}::{cast}" if cast else quote(column)

    where, params = partition.predicate(
        located, "%s", lambda column, value: key_parameter(table.column(column).ltype, value)
    )
    return sql + where, params


def _to_batch(
    table: str,
    columns: Sequence[SourceColumn],
    rows: Sequence[tuple[Any, ...]],
    schema: pa.Schema,
    position: int | None,
) -> pa.RecordBatch:
    import pyarrow as pa

    by_column = list(zip(*rows, strict=True))
    arrays = [to_arrow(column, by_column[i], table) for i, column in enumerate(columns)]
    arrays.append(pa.array([position] * len(rows), pa.int64()))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
