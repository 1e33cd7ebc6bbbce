"""SAP HANA as a snapshot source: catalog reflection and snapshot reads with hdbcli.

The URL is SQLAlchemy's (sqlalchemy-hana): ``hana+hdbcli://user@host:port[/TENANT]
[?currentSchema=SHOP&encrypt=true]``; query parameters go to ``hdbcli.dbapi.connect``
unchanged, a tenant database name becomes ``databaseName`` (default port 30013, else
30015). Each partition reads in its own REPEATABLE READ transaction and reports that
snapshot's commit ID as its position (``connectors.hana.sql``). hdbcli is imported only
when a connection is opened.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from cdc_core.config import mask_url
from cdc_core.drivers import driver_import
from cdc_core.errors import ConfigError, TransientError
from cdc_core.names import parse_table
from connectors.base import Connector, missing_table
from connectors.hana import sql
from connectors.hana.product import HANA
from connectors.hana.types import source_columns
from connectors.model import Capabilities, Partition, Snapshot, TableSchema
from merkle import types as lt

if TYPE_CHECKING:
    import pyarrow as pa

BATCH_ROWS = 20_000
URL_EXAMPLE = "hana+hdbcli://user@host:30015/?currentSchema=SHOP"
AUTHENTICATION_FAILED = 10  # hdbcli errorcode: "authentication failed"
SYSTEM_DB_PORT, TENANT_PORT = 30015, 30013  # sqlalchemy-hana's defaults


class HanaConnector(Connector):
    """SAP HANA databases, read with hdbcli in one snapshot per partition."""

    name = HANA.name
    schemes = HANA.schemes
    # replcheck reads no HANA log; a snapshot still knows its commit ID (read_partition).
    capabilities = Capabilities()
    repair = HANA.repair

    def connect_args(self) -> dict[str, Any]:
        """Keyword arguments of ``hdbcli.dbapi.connect`` for this URL (password included)."""
        url = self.endpoint
        if not url.host:
            raise ConfigError(f"a HANA URL looks like {URL_EXAMPLE}, not {mask_url(self.url)}")
        args: dict[str, Any] = {
            "address": url.host,
            "port": url.port or (TENANT_PORT if url.database else SYSTEM_DB_PORT),
            "user": url.username or "",
            "password": self.password or url.password or "",
        }
        if url.database:
            args["databaseName"] = url.database
        args.update({key: str(value) for key, value in url.query.items()})
        return args

    def default_schema(self) -> str:
        """The schema an unqualified table name is in: the URL's ``currentSchema``, else the
        user's own schema, which HANA names after the user (SAP HANA SQL Reference, "SET
        SCHEMA"). Known without a connection, so table names resolve before one is open."""
        args = self.connect_args()
        if "currentSchema" in args:
            return str(args["currentSchema"])
        return sql.split_table(str(args["user"]), "")[1]

    @property
    def where(self) -> str:
        """The server, for messages: host and port, never the password."""
        args = self.connect_args()
        return f"HANA {args['address']}:{args['port']}"

    def connect(self) -> Any:
        """An open hdbcli connection (autocommit on, hdbcli's default); the caller closes it.

        Raises:
            TransientError: The server cannot be reached or refuses the login.
            TerminalError: hdbcli is not installed (names the extra to install).
        """
        with driver_import("the HANA connector"):
            from hdbcli import dbapi
        try:
            return dbapi.connect(**self.connect_args())
        except dbapi.Error as exc:
            problem = exc.errortext
            if exc.errorcode == AUTHENTICATION_FAILED:
                problem = "authentication failed (check user and password)"
            raise TransientError(f"cannot connect to {self.where}: {problem}") from exc

    def driver_error(self) -> type[Exception]:
        """hdbcli's root error class (a statement the server refused raises it)."""
        with driver_import("the HANA connector"):
            from hdbcli import dbapi
        error: type[Exception] = dbapi.Error
        return error

    @staticmethod
    def _split(cursor: Any, table: str) -> tuple[str, str]:
        if parse_table(table).schema is not None:
            return sql.split_table(table, "")
        cursor.execute(sql.CURRENT_SCHEMA)
        (current,) = cursor.fetchone()
        return sql.split_table(table, str(current))

    def reflect(self, table: str) -> TableSchema:
        with (
            contextlib.closing(self.connect()) as connection,
            contextlib.closing(connection.cursor()) as cursor,
        ):
            schema, name = self._split(cursor, table)
            cursor.execute(sql.COLUMNS, (schema, name))
            rows = cursor.fetchall()
            cursor.execute(sql.PRIMARY_KEY, (schema, name))
            key = tuple(str(row[0]) for row in cursor.fetchall())
        if not rows:
            raise missing_table(table, f"{self.where}, schema {schema}")
        return TableSchema(table, source_columns(rows), key)

    def key_range(self, table: str, column: str) -> tuple[int, int] | None:
        with (
            contextlib.closing(self.connect()) as connection,
            contextlib.closing(connection.cursor()) as cursor,
        ):
            schema, name = self._split(cursor, table)
            cursor.execute(sql.key_range(schema, name, column))
            low, high = cursor.fetchone()
        return None if low is None else (int(low), int(high))

    def read_partition(
        self,
        table: TableSchema,
        columns: Sequence[str],
        partition: Partition,
        snapshot: Snapshot | None = None,
    ) -> Iterator[pa.RecordBatch]:
        schema = self.arrow_schema(table, columns)
        converters = converters_of(table, columns)
        with (
            contextlib.closing(self.connect()) as connection,
            contextlib.closing(connection.cursor()) as cursor,
        ):
            located = self._split(cursor, table.table)  # still in autocommit: no snapshot yet
            query, params = sql.partition_select(*located, columns, partition)
            connection.setautocommit(False)
            try:
                position = _begin_snapshot(cursor)
                cursor.execute(query, params)
                yield from iter_batches(cursor, converters, schema, position)
            finally:
                connection.rollback()  # read only: nothing to keep


def _begin_snapshot(cursor: Any) -> int:
    """Open the partition's snapshot; its commit ID is the partition's position."""
    cursor.execute(sql.BEGIN_SNAPSHOT)
    cursor.execute(sql.SNAPSHOT_POSITION)  # the transaction's first read fixes its snapshot
    return int(cursor.fetchone()[0])


def iter_batches(
    cursor: Any, converters: Sequence[Callable[[Any], Any]], schema: pa.Schema, position: int
) -> Iterator[pa.RecordBatch]:
    """The rows of ``cursor``'s query as batches of ``schema``, each row at ``position``."""
    while rows := cursor.fetchmany(BATCH_ROWS):
        yield _batch(rows, converters, schema, position)


def converters_of(table: TableSchema, columns: Sequence[str]) -> list[Callable[[Any], Any]]:
    """How each of ``columns`` of ``table`` becomes the value its Arrow type takes."""
    return [value_converter(table.column(column).ltype) for column in columns]


def _batch(
    rows: Sequence[Sequence[Any]],
    converters: Sequence[Callable[[Any], Any]],
    schema: pa.Schema,
    position: int,
) -> pa.RecordBatch:
    import pyarrow as pa

    arrays = [
        pa.array([None if r[i] is None else convert(r[i]) for r in rows], schema.field(i).type)
        for i, convert in enumerate(converters)
    ]
    arrays.append(pa.array([position] * len(rows), pa.int64()))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def value_converter(ltype: lt.LogicalType | None) -> Callable[[Any], Any]:
    """How one hdbcli value becomes the Python value its Arrow type takes."""
    if isinstance(ltype, lt.IntegerType):
        return int  # BIGINT may arrive as a Decimal
    if isinstance(ltype, lt.TimeType):
        return _time_micros
    if isinstance(ltype, lt.StringType | lt.BytesType):
        return _read_lob
    if isinstance(ltype, lt.DecimalType):
        return lambda value: value if isinstance(value, decimal.Decimal) else decimal.Decimal(value)
    return lambda value: value


def _time_micros(value: dt.time | dt.timedelta) -> int:
    """Microseconds since midnight, as times travel to Arrow and Spark."""
    if isinstance(value, dt.timedelta):
        return value // dt.timedelta(microseconds=1)
    seconds = value.hour * 3600 + value.minute * 60 + value.second
    return seconds * 1_000_000 + value.microsecond


def _read_lob(value: Any) -> Any:
    """A LOB's whole content (CLOB, NCLOB, BLOB arrive as hdbcli LOB objects)."""
    if hasattr(value, "read"):
        value = value.read()
    return bytes(value) if isinstance(value, memoryview | bytearray) else value
