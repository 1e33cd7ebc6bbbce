"""MariaDB read over JDBC (``connectors.jdbc``): one consistent snapshot per partition, its
binlog position in every row.

Each Spark task's session first runs ``SESSION_SETUP`` (isolation, UTC, ``START
TRANSACTION WITH CONSISTENT SNAPSHOT``; https://mariadb.com/kb/en/start-transaction/), so
its one SELECT reads inside that snapshot, and the SELECT reads ``Binlog_snapshot_file`` /
``Binlog_snapshot_position`` from ``information_schema.SESSION_STATUS`` as the position,
exactly as ``SHOW STATUS`` gives it to the Python reader. MySQL keeps these elsewhere or
not at all, so only MariaDB servers are read this way. Values travel as the Python reader
reads them (``connector.select_expression``), times as exact microsecond counts. The
driver never reads a date (Connector/J's ``zeroDateTimeBehavior`` plays no part): the
SELECT sends NULL for a zero date and a marker for one the Python reader refuses, so Spark
refuses it with the same message (``connectors.jdbc.Refusal``, ``zero_dates``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from connectors.jdbc import (
    PARTITION_KEY,
    REFUSED_MARKERS,
    JdbcDriver,
    JdbcRead,
    Refusal,
    Transport,
)
from connectors.mariadb.tls import TLS_PARAMETERS
from connectors.mariadb.types import is_wide_integer
from connectors.mariadb.zero_dates import (
    DATED_TYPES,
    REFUSABLE_TYPES,
    UnrepresentableDateError,
    refused_sql,
    zero_sql,
)
from connectors.model import POSITION_COLUMN, SourceColumn, TableSchema
from connectors.urls import DatabaseUrl
from merkle import types as lt


class MariaDBSource(Protocol):
    """What a JDBC read takes from the MariaDB connector (``connector.py`` imports this
    module, so the connector is described here by what it offers, not imported)."""

    password: str | None

    @property
    def endpoint(self) -> DatabaseUrl: ...

    def is_mariadb(self) -> bool: ...

    def quote(self, name: str) -> str: ...

    def qualified(self, table: str) -> str: ...


DRIVER = JdbcDriver("org.mariadb.jdbc.Driver", "mariadb-java-client.jar")
SESSION_SETUP = (
    "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ; SET time_zone = '+00:00';"
    " START TRANSACTION WITH CONSISTENT SNAPSHOT"
)
# The snapshot's binlog position as ``connectors.mariadb.position.to_position`` computes it
# (file number << 32 | offset); NULL when the binlog is off.
POSITION_SQL = (
    "(SELECT CAST(SUBSTRING_INDEX(f.VARIABLE_VALUE, '.', -1) AS UNSIGNED) << 32"
    " | CAST(p.VARIABLE_VALUE AS UNSIGNED)"
    " FROM information_schema.SESSION_STATUS f, information_schema.SESSION_STATUS p"
    " WHERE f.VARIABLE_NAME = 'BINLOG_SNAPSHOT_FILE' AND f.VARIABLE_VALUE <> ''"
    " AND p.VARIABLE_NAME = 'BINLOG_SNAPSHOT_POSITION')"
)
_MICROS: dict[type, str] = {
    lt.TimeType: "CAST(TIME_TO_SEC({}) * 1000000 AS SIGNED)",
    lt.TimestampType: "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', {})",
    lt.TimestampTzType: "CAST(UNIX_TIMESTAMP({}) * 1000000 AS SIGNED)",
}


def column_transport(column: SourceColumn, quote: str) -> tuple[str, Transport] | None:
    """The SELECT expression of one column and how its values travel (None: none exact)."""
    ltype = column.ltype
    native = column.native_type.lower()
    if ltype is None:
        return None
    if isinstance(ltype, lt.IntegerType):
        if is_wide_integer(native):
            return f"CAST({quote} AS DECIMAL(20,0))", Transport.AS_IS
        cast = "UNSIGNED" if native.startswith("bit") else "SIGNED"  # YEAR, TINYINT(1): numbers
        return f"CAST({quote} AS {cast})", Transport.AS_IS
    if isinstance(ltype, lt.BooleanType):
        return f"CAST({quote} AS UNSIGNED)", Transport.NONZERO
    if isinstance(ltype, lt.DecimalType):
        return (quote, Transport.AS_IS) if (ltype.precision or 0) <= 38 else None
    if isinstance(ltype, lt.FloatType):
        return f"CAST({quote} AS DOUBLE)", Transport.AS_IS  # FLOAT's text has 6 digits
    if isinstance(ltype, lt.StringType | lt.JsonType | lt.UuidType):
        return f"CAST({quote} AS CHAR CHARACTER SET utf8mb4)", Transport.AS_IS
    if isinstance(ltype, lt.BytesType):
        return quote, Transport.AS_IS
    if isinstance(ltype, lt.DateType):
        return _dated(quote, f"DATEDIFF({quote}, '1970-01-01')", Transport.EPOCH_DAYS, ltype)
    micros = _MICROS.get(type(ltype))
    if micros is None:
        return None
    return _dated(quote, micros.format(quote), Transport.EPOCH_MICROS, ltype)


def _dated(
    quote: str, value: str, transport: Transport, ltype: lt.LogicalType
) -> tuple[str, Transport]:
    """A date's or time's count: NULL for a zero date, ``REFUSED_MARKERS`` for a DATE or
    DATETIME that is not a calendar date (``zero_dates``)."""
    if not isinstance(ltype, DATED_TYPES):
        return value, transport
    refused = ""
    if isinstance(ltype, REFUSABLE_TYPES):
        refused = f" WHEN {refused_sql(quote)} THEN {REFUSED_MARKERS[transport]}"
    return f"CASE WHEN {zero_sql(quote)} THEN NULL{refused} ELSE {value} END", transport


def _refusal(
    table: TableSchema, column: str, columns: Sequence[str], transport: Transport
) -> Refusal:
    """How Spark refuses what the Python reader refuses, naming the row's primary key."""
    key = tuple(name for name in table.primary_key if name in columns)
    before, after = UnrepresentableDateError.around_key(table.table, column)
    return Refusal(REFUSED_MARKERS[transport], key, before, after)


def jdbc_read(
    connector: MariaDBSource,
    table: TableSchema,
    columns: Sequence[str],
    partition_column: str | None,
) -> JdbcRead | None:
    """The JDBC read of ``columns`` (None: a column has no exact transport, the server is
    MySQL, or the URL sets TLS)."""
    quote = connector.quote
    selects, transports, refusals = [], {}, {}
    for name in columns:
        found = column_transport(table.column(name), quote(name))
        if found is None:
            return None
        selects.append(f"{found[0]} AS {quote(name)}")
        transports[name] = found[1]
        if isinstance(table.column(name).ltype, REFUSABLE_TYPES):
            refusals[name] = _refusal(table, name, columns, found[1])
    selects.append(f"{POSITION_SQL} AS {quote(POSITION_COLUMN)}")
    if partition_column is not None:
        selects.append(f"{quote(partition_column)} AS {quote(PARTITION_KEY)}")
    url = connector.endpoint
    if any(name in url.query for name in TLS_PARAMETERS):
        return None  # Connector/J's own TLS settings are not mapped: the Python read
    if not connector.is_mariadb():
        return None
    properties = {
        "driver": DRIVER.class_name,
        "user": url.username or "",
        "password": connector.password or url.password or "",
        "fetchsize": "10000",  # stream the rows (Connector/J reads them all otherwise)
        "sessionInitStatement": SESSION_SETUP,
    }
    address = f"jdbc:mysql://{url.host or '127.0.0.1'}:{url.port or 3306}/{url.database or ''}"
    return JdbcRead(
        DRIVER,
        f"{address}?allowMultiQueries=true",
        properties,
        f"SELECT {', '.join(selects)} FROM {connector.qualified(table.table)}",
        transports,
        quote,
        refusals,
    )
