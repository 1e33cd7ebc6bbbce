"""DuckDB column types (``information_schema.columns.data_type``) to logical types.

Reference: https://duckdb.org/docs/sql/data_types/overview
"""

from __future__ import annotations

import re

from merkle import types as lt
from merkle.options import TimeRounding

# A cast to TIMESTAMP_MS / TIMESTAMP_S (also on insert) rounds epoch microseconds half away
# from zero, so before 1970 an exact half goes to the earlier instant; measured on DuckDB
# 2.0 (tests/merkle/test_rounding_rules.py), not stated in DuckDB's documentation.
TIMESTAMP_ROUNDING = TimeRounding.HALF_AWAY_FROM_1970

_INTEGERS = {
    "TINYINT",
    "SMALLINT",
    "INTEGER",
    "BIGINT",
    "HUGEINT",
    "UTINYINT",
    "USMALLINT",
    "UINTEGER",
    "UBIGINT",
    "UHUGEINT",
}
_SIMPLE: dict[str, lt.LogicalType] = {
    "REAL": lt.FloatType(32),
    "FLOAT": lt.FloatType(32),
    "DOUBLE": lt.FloatType(64),
    "VARCHAR": lt.StringType(),
    "BLOB": lt.BytesType(),
    "BOOLEAN": lt.BooleanType(),
    "DATE": lt.DateType(),
    "TIME": lt.TimeType(6),
    "TIMESTAMP": lt.TimestampType(6),
    "TIMESTAMP_S": lt.TimestampType(0),
    "TIMESTAMP_MS": lt.TimestampType(3),
    "TIMESTAMP WITH TIME ZONE": lt.TimestampTzType(6),
    "JSON": lt.JsonType(),
    "UUID": lt.UuidType(),
}
_DECIMAL = re.compile(r"^DECIMAL\((\d+),\s*(\d+)\)$")


def logical_type(data_type: str) -> lt.LogicalType | None:
    """The logical type of a DuckDB column type, or None when replcheck cannot hash it."""
    name = data_type.strip().upper()
    if name in _INTEGERS:
        return lt.IntegerType()
    if name in _SIMPLE:
        return _SIMPLE[name]
    match = _DECIMAL.match(name)
    if match:
        return lt.DecimalType(int(match.group(1)), int(match.group(2)))
    return None  # INTERVAL, LIST, STRUCT, MAP, ...: reported as a schema difference
