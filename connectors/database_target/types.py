"""The column types a database target's tables are created with: one map from the
source column's logical type (``merkle.types``, as the validator hashes it) to an
SQLAlchemy type, with the variants each target product needs.

The map keeps every value exactly and lets the validator compare source and target with
no rule: integers as BIGINT (MariaDB's BIGINT UNSIGNED as NUMERIC(20)), decimals with their
precision and scale, times and timestamps with microseconds, instants as TIMESTAMPTZ
(MariaDB has no zoned type: DATETIME(6) holding UTC, the session being in UTC), JSON as
JSON (on MySQL itself LONGTEXT checked by ``json_valid``, as MariaDB's JSON is: MySQL's
JSON type rewrites a document, its keys reordered, duplicate keys dropped and numbers beyond
a double rounded), UUIDs as UUID (CHAR(36) on MariaDB). Key columns of a text or binary type get a
bounded length on MariaDB, which cannot index an unbounded one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cdc_core.capture.source import RefusedColumn, RefusedColumnsError
from cdc_core.errors import ConfigError
from connectors.model import SourceColumn
from merkle import types as lt

if TYPE_CHECKING:
    import sqlalchemy as sa
    from sqlalchemy.types import TypeEngine

KEY_LENGTH = 255  # characters (or bytes) of a text or binary key column on MariaDB
MYSQL = ("mysql", "mariadb")
# The targets whose SQL (DDL, multi-row INSERT/COPY, DELETE ... IN, the progress table in
# the batch's transaction) is tested on real servers; others are refused up front.
TARGET_DIALECTS = (*MYSQL, "postgresql")


def check_target_dialect(dialect: str, target: str) -> None:
    """Refuse a target database this sink is not tested on, before anything is written.

    Raises:
        ConfigError: Names the target and the products a pipeline can write to.
    """
    if dialect not in TARGET_DIALECTS:
        raise ConfigError(
            f"target {target} is a {dialect} database, which a pipeline cannot write to:"
            " use a MariaDB/MySQL or PostgreSQL target, or a lake (target: {lake: DIR})",
            {"target": target},
        )


def column_type(column: SourceColumn, table: str, dialect: str, key: bool) -> TypeEngine[Any]:
    """The target type of ``column`` of source table ``table`` on a ``dialect`` target.

    Raises:
        RefusedColumnsError: The column has no logical type, or the target cannot hold it
            (names the table, the column, its type and the way out).
    """
    ltype = column.ltype
    found = None if ltype is None else _mapped(ltype, column.native_type, dialect, key)
    if found is None:
        raise RefusedColumnsError.of(table, [unheld(column, dialect)])
    return found


def holds_column(column: SourceColumn, dialect: str, key: bool) -> bool:
    """Whether a ``dialect`` target has a type that holds ``column``'s values exactly."""
    ltype = column.ltype
    return ltype is not None and _mapped(ltype, column.native_type, dialect, key) is not None


def unheld(column: SourceColumn, dialect: str) -> RefusedColumn:
    """``column`` refused by a ``dialect`` target that has no exact type for it."""
    return RefusedColumn(
        column.name,
        column.native_type,
        f"no type in a {dialect} target that holds its values exactly",
    )


def target_table(
    name: str,
    schema: str | None,
    key: Sequence[str],
    types: Mapping[str, TypeEngine[Any]],
    json_texts: Sequence[str] = (),
) -> sa.Table:
    """The target table of columns ``types`` (in order) keyed by ``key``; ``json_texts``:
    JSON columns held as text on MySQL, each checked by ``json_valid`` as MariaDB checks
    its JSON (``_mapped``)."""
    import sqlalchemy as sa
    from sqlalchemy.dialects import mysql

    columns = [
        sa.Column(
            column, kind, primary_key=column in key, nullable=column not in key, autoincrement=False
        )
        for column, kind in types.items()
    ]
    quote = mysql.dialect().identifier_preparer.quote_identifier  # always quoted
    checks = [sa.CheckConstraint(f"json_valid({quote(column)})") for column in json_texts]
    return sa.Table(name, sa.MetaData(), *columns, *checks, schema=schema)


def json_texts(columns: Sequence[SourceColumn], dialect: str) -> list[str]:
    """The columns of a ``dialect`` target held as JSON text (MySQL itself: ``_mapped``)."""
    on_mysql = dialect == "mysql"
    return [c.name for c in columns if on_mysql and isinstance(c.ltype, lt.JsonType)]


def _mapped(ltype: lt.LogicalType, native: str, dialect: str, key: bool) -> Any:
    import sqlalchemy as sa
    from sqlalchemy.dialects import mysql, postgresql

    on_mysql = dialect in MYSQL
    if isinstance(ltype, lt.IntegerType):
        unsigned_big = "bigint" in native.lower() and "unsigned" in native.lower()
        return sa.Numeric(20, 0) if unsigned_big else sa.BigInteger()
    if isinstance(ltype, lt.DecimalType):
        if ltype.precision is None:
            return mysql.DECIMAL(65, 30) if on_mysql else sa.Numeric()
        return sa.Numeric(ltype.precision, ltype.scale or 0)
    if isinstance(ltype, lt.FloatType):
        return sa.REAL() if ltype.bits == 32 else sa.Double()
    if isinstance(ltype, lt.StringType):
        if on_mysql:
            return sa.String(KEY_LENGTH) if key else mysql.LONGTEXT()
        return sa.Text()
    if isinstance(ltype, lt.BytesType):
        if on_mysql:
            return sa.VARBINARY(KEY_LENGTH) if key else mysql.LONGBLOB()
        return postgresql.BYTEA()
    simple: dict[type, Any] = {
        lt.BooleanType: sa.Boolean(),
        lt.DateType: sa.Date(),
        lt.JsonType: mysql.LONGTEXT() if dialect == "mysql" else sa.JSON(),
    }
    if type(ltype) in simple:
        return simple[type(ltype)]
    return _temporal(ltype, on_mysql)


def _temporal(ltype: lt.LogicalType, on_mysql: bool) -> Any:
    import sqlalchemy as sa
    from sqlalchemy.dialects import mysql, postgresql

    if isinstance(ltype, lt.TimeType):
        return mysql.TIME(fsp=6) if on_mysql else postgresql.TIME(precision=6)
    if isinstance(ltype, lt.TimestampType):
        return mysql.DATETIME(fsp=6) if on_mysql else postgresql.TIMESTAMP(precision=6)
    if isinstance(ltype, lt.TimestampTzType):
        if on_mysql:
            return mysql.DATETIME(fsp=6)
        return postgresql.TIMESTAMP(timezone=True, precision=6)
    if isinstance(ltype, lt.UuidType):
        return sa.CHAR(36) if on_mysql else sa.Uuid(as_uuid=False)
    if isinstance(ltype, lt.IntervalType) and not on_mysql:
        return postgresql.INTERVAL()
    return None  # time with zone, arrays, intervals on MariaDB: no exact target type here
