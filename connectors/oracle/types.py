"""Oracle data dictionary types (ALL_TAB_COLUMNS) to logical types.

Reference: Oracle Database SQL Language Reference, "Data Types". Oracle stores '' as NULL,
so comparisons with Oracle on one side usually want ``empty_string_is_null: true``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from merkle import types as lt
from merkle.types import MAX_FRACTION_DIGITS

_FRACTION = re.compile(r"^TIMESTAMP\((\d)\)")
MAX_INT64_DIGITS = 18


@dataclass(frozen=True, slots=True)
class OracleColumn:
    """One ALL_TAB_COLUMNS row, as much of it as the mapping needs."""

    name: str
    data_type: str
    precision: int | None = None
    scale: int | None = None

    @property
    def native_type(self) -> str:
        """The declared type as Oracle would print it."""
        if self.data_type == "NUMBER" and self.precision is not None:
            return f"NUMBER({self.precision},{self.scale or 0})"
        return self.data_type


def logical_type(column: OracleColumn) -> lt.LogicalType | None:
    """The logical type of an Oracle column, or None when replcheck cannot hash it."""
    name = column.data_type.upper()
    if name == "NUMBER":
        return _number(column.precision, column.scale)
    if name in ("FLOAT",):
        return lt.DecimalType()  # a NUMBER with binary precision: still exact decimal
    simple = {
        "BINARY_FLOAT": lt.FloatType(32),
        "BINARY_DOUBLE": lt.FloatType(64),
        "VARCHAR2": lt.StringType(),
        "NVARCHAR2": lt.StringType(),
        "CLOB": lt.StringType(),
        "NCLOB": lt.StringType(),
        "LONG": lt.StringType(),
        "CHAR": lt.StringType(padded=True),
        "NCHAR": lt.StringType(padded=True),
        "RAW": lt.BytesType(),
        "BLOB": lt.BytesType(),
        "DATE": lt.TimestampType(0),  # an Oracle DATE carries a time of day, to the second
        "JSON": lt.JsonType(),
    }
    if name in simple:
        return simple[name]
    return _temporal(name)


def _number(precision: int | None, scale: int | None) -> lt.LogicalType:
    if precision is None:
        return lt.DecimalType()  # NUMBER without precision: any decimal
    if not scale and precision <= MAX_INT64_DIGITS:
        return lt.IntegerType()
    return lt.DecimalType(precision, max(scale or 0, 0))


def _temporal(name: str) -> lt.LogicalType | None:
    match = _FRACTION.match(name)
    # Oracle keeps up to 9 fractional digits; the contract compares at most microseconds.
    digits = min(int(match.group(1)) if match else 6, MAX_FRACTION_DIGITS)
    if name.startswith("TIMESTAMP") and name.endswith("TIME ZONE"):
        return lt.TimestampTzType(digits)  # WITH TIME ZONE and WITH LOCAL TIME ZONE
    if name.startswith("TIMESTAMP"):
        return lt.TimestampType(digits)
    if name.startswith("INTERVAL"):
        return lt.IntervalType()
    return None  # LONG RAW, XMLTYPE, SDO_GEOMETRY, ROWID, object types
