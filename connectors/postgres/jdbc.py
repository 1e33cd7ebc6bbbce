"""PostgreSQL read over JDBC (``connectors.jdbc``): every partition in the one exported
snapshot, whose LSN every row carries.

Spark's PostgreSQL dialect turns autocommit off when a fetch size is set, so pgjdbc opens a
transaction before the session statement runs; ``SET TRANSACTION ISOLATION LEVEL
REPEATABLE READ; SET TRANSACTION SNAPSHOT '<name>'`` then makes it read in the shared
snapshot (https://www.postgresql.org/docs/current/sql-set-transaction.html), as the Python
reader's sessions do. Values travel as the Python reader selects them
(``connectors.postgres.types.select_expression``): dates as day counts, times and
timestamps as exact microsecond counts; an unconstrained or very wide numeric as the
decimal the Python reader makes of it, checked value by value as it checks them; the
text-carried types (intervals, network, range and geometric types) as their text, in the
Python reader's session settings. Arrays and timetz are left to the Python reader.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from connectors.jdbc import PARTITION_KEY, JdbcDriver, JdbcRead, Transport
from connectors.model import POSITION_COLUMN, Snapshot, SourceColumn, TableSchema
from connectors.postgres.types import (
    MAX_ARROW_PRECISION,
    arrow_type,
    quote,
    select_expression,
)
from connectors.urls import DatabaseUrl
from merkle import types as lt


class PostgresSource(Protocol):
    """What a JDBC read takes from the PostgreSQL connector (``connector.py`` imports this
    module, so the connector is described here by what it offers, not imported)."""

    password: str | None

    @property
    def endpoint(self) -> DatabaseUrl: ...

    def qualified(self, table: str) -> str: ...


DRIVER = JdbcDriver("org.postgresql.Driver", "postgresql.jar")
_TRANSPORTS: tuple[tuple[type | tuple[type, ...], Transport], ...] = (
    (lt.DateType, Transport.EPOCH_DAYS),
    ((lt.TimeType, lt.TimestampType, lt.TimestampTzType), Transport.EPOCH_MICROS),
    (
        (
            lt.IntegerType,
            lt.DecimalType,
            lt.FloatType,
            lt.StringType,
            lt.BytesType,
            lt.BooleanType,
            lt.JsonType,
            lt.UuidType,
        ),
        Transport.AS_IS,
    ),
)


def column_transport(column: SourceColumn) -> tuple[str, Transport] | None:
    """The SELECT expression of one column and how its values travel (None: none exact)."""
    ltype = column.ltype
    if ltype is None:
        return None
    if column.native_type == "money":
        return select_expression(column), Transport.AS_IS  # numeric(19,2)
    if isinstance(ltype, lt.DecimalType) and not _plain_numeric(column.native_type, ltype):
        return _checked_numeric(column), Transport.AS_IS
    for kinds, transport in _TRANSPORTS:
        if type(ltype) in (kinds if isinstance(kinds, tuple) else (kinds,)):
            return select_expression(column), transport
    return None


def _plain_numeric(native: str, ltype: lt.DecimalType) -> bool:
    """``numeric(p,s)`` with ``0 <= s <= p <= 38``, which JDBC reads as exactly that decimal
    (not unconstrained, negative-scale or scale-above-precision numerics)."""
    precision = ltype.precision or 0
    plain = native == f"numeric({precision},{ltype.scale})" or native == f"numeric({precision})"
    return plain and precision <= MAX_ARROW_PRECISION


def _checked_numeric(column: SourceColumn) -> str:
    """An unconstrained or wide numeric as the decimal the Python reader reads it as
    (``arrow_type``), and an error naming the column for a value that does not fit, as the
    Python reader raises one: casting it would round it. The error is a failed cast of a
    message (SQL has no raise), made to depend on the row so the planner cannot fold it."""
    target = arrow_type(column)
    precision, scale = target.precision, target.scale
    ref = quote(column.name)
    fits = f"abs({ref}) < 1e{precision - scale} AND {ref} = round({ref}, {scale})"
    message = (
        f"replcheck: a value of column {column.name} does not fit decimal({precision},{scale});"
        " declare the column numeric(p,s) with p <= 38, or leave it out of the comparison"
    ).replace("'", "''")
    refuse = f"CAST(CASE WHEN {ref} IS NOT NULL THEN '{message}' END AS numeric)"
    return (
        f"CASE WHEN {ref} IS NULL OR ({fits}) THEN {ref}::numeric({precision},{scale})"
        f" ELSE {refuse} END"
    )


def session_setup(snapshot: Snapshot | None) -> str:
    """The statement opening each partition's transaction (in ``snapshot`` when given)."""
    setup = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"
    if snapshot is not None and snapshot.token is not None:
        token = snapshot.token.replace("'", "''")
        setup += f"; SET TRANSACTION SNAPSHOT '{token}'"
    # The text of a tstzrange names the session's zone and an interval's follows
    # IntervalStyle, set as in the Python reader's sessions (``types.SESSION_OPTIONS``;
    # pgjdbc itself fixes DateStyle ISO and extra_float_digits 3).
    return f"{setup}; SET TIME ZONE 'UTC'; SET IntervalStyle = 'iso_8601'"


def jdbc_read(
    connector: PostgresSource,
    table: TableSchema,
    columns: Sequence[str],
    partition_column: str | None,
    snapshot: Snapshot | None,
) -> JdbcRead | None:
    """The JDBC read of ``columns`` (None: a column has no exact transport)."""
    selects, transports = [], {}
    for name in columns:
        found = column_transport(table.column(name))
        if found is None:
            return None
        selects.append(f"{found[0]} AS {quote(name)}")
        transports[name] = found[1]
    position = snapshot.position if snapshot is not None else None
    selects.append(f"CAST({'NULL' if position is None else position} AS bigint)")
    selects[-1] += f" AS {quote(POSITION_COLUMN)}"
    if partition_column is not None:
        selects.append(f"{quote(partition_column)} AS {quote(PARTITION_KEY)}")
    url = connector.endpoint
    properties = {
        "driver": DRIVER.class_name,
        "user": url.username or "",
        "password": connector.password or url.password or "",
        "fetchsize": "10000",  # also what makes Spark open a transaction (see above)
        "sessionInitStatement": session_setup(snapshot),
    }
    address = f"jdbc:postgresql://{url.host or '127.0.0.1'}:{url.port or 5432}/{url.database}"
    return JdbcRead(
        DRIVER,
        address,
        properties,
        f"SELECT {', '.join(selects)} FROM {connector.qualified(table.table)}",
        transports,
        quote,
    )
