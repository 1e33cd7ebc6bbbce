"""MariaDB/MySQL column types (``information_schema.COLUMNS.COLUMN_TYPE``) to logical types.

Reference: https://mariadb.com/kb/en/data-types/ . JSON is an alias of LONGTEXT with a
``json_valid`` CHECK constraint in MariaDB, so the caller passes ``is_json``.
"""

from __future__ import annotations

import re
from typing import Any

from connectors.model import SourceColumn, without_logical_type
from merkle import types as lt
from merkle.options import TimeRounding

MAX_LAKE_DIGITS = 38  # Arrow's decimal128 and Spark's DecimalType

_PATTERN = re.compile(r"^([a-z]+)(?:\((\d+)(?:,(\d+))?\))?(.*)$")
_INTEGERS = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year"}
_STRINGS = {
    "varchar",
    "tinytext",
    "text",
    "mediumtext",
    "longtext",
    "enum",
    "set",
    "inet4",
    "inet6",
}
_BYTES = {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}


def timestamp_rounding(sql_mode: str) -> TimeRounding:
    """How the server reduces fractional seconds for ``sql_mode`` (its global value).

    MariaDB truncates unless ``TIME_ROUND_FRACTIONAL`` is set, then rounds half up
    (https://mariadb.com/kb/en/sql-mode/#time_round_fractional). Both act on the wall
    clock, which is ``truncate`` / ``round`` for every DATETIME and TIMESTAMP; a negative
    TIME goes toward zero instead (measured on MariaDB 10.11), which no rule matches.
    """
    modes = {mode.strip().upper() for mode in sql_mode.split(",")}
    return TimeRounding.ROUND if "TIME_ROUND_FRACTIONAL" in modes else TimeRounding.TRUNCATE


def data_types(cursor: Any, schema: str, table: str) -> dict[str, str]:
    """Per column of ``schema.table``, its ``DATA_TYPE`` (``uuid``: a table map shows it as
    ``BINARY(16)``)."""
    cursor.execute(
        "SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS"
        " WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
        (schema, table),
    )
    return {str(name): str(kind).lower() for name, kind in cursor.fetchall()}


def is_wide_integer(column_type: str) -> bool:
    """BIGINT UNSIGNED and BIT(64) reach 2**64 - 1, beyond Arrow's int64: read as
    DECIMAL(20,0) (https://mariadb.com/kb/en/bit/: BIT(M) holds M bits, M up to 64)."""
    words = column_type.lower().replace("(", " ").replace(")", " ").split()
    if words[:2] == ["bit", "64"]:
        return True
    return bool(words) and words[0] == "bigint" and "unsigned" in words


def refusal(column: SourceColumn) -> str | None:
    """Why a pipeline cannot carry a MariaDB column (``connectors.model.carried_columns``):
    no logical type (spatial types, ``INET4``/``INET6``: the binlog holds their binary
    form and a snapshot their text, which no rule here reconciles yet), or a ``DECIMAL``
    wider than the lake's and Spark's 38 digits (MariaDB allows 65,
    https://mariadb.com/kb/en/decimal/)."""
    ltype = column.ltype
    if isinstance(ltype, lt.DecimalType) and (ltype.precision or 0) > MAX_LAKE_DIGITS:
        return f"more than {MAX_LAKE_DIGITS} digits, which no decimal of the lake holds"
    return without_logical_type(column)


def logical_type(column_type: str, is_json: bool = False) -> lt.LogicalType | None:
    """The logical type of a column, or None when replcheck cannot hash it (spatial)."""
    if is_json:
        return lt.JsonType()
    match = _PATTERN.match(column_type.strip().lower())
    if not match:
        return None
    name, first, second, _rest = match.groups()
    if name in _INTEGERS:
        return lt.IntegerType()
    if name in ("decimal", "numeric", "dec", "fixed"):
        return lt.DecimalType(int(first or 10), int(second or 0))
    if name in ("float", "double", "real"):
        return lt.FloatType(32 if name == "float" else 64)
    if name == "bit":
        return lt.BooleanType() if int(first or 1) == 1 else lt.IntegerType()
    if name in _STRINGS:
        return lt.StringType()
    if name == "char":
        return lt.StringType(padded=True)
    if name in _BYTES:
        return lt.BytesType()
    return _temporal(name, int(first or 0))


def _temporal(name: str, digits: int) -> lt.LogicalType | None:
    if name == "date":
        return lt.DateType()
    if name == "time":
        return lt.TimeType(digits)
    if name == "datetime":
        return lt.TimestampType(digits)
    if name == "timestamp":
        return lt.TimestampTzType(digits)  # stored as UTC, shown in the session's zone
    if name == "uuid":
        return lt.UuidType()
    return None
