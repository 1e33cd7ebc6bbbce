"""SAP HANA column types (``SYS.TABLE_COLUMNS``) to logical types.

Reference: SAP HANA SQL Reference Guide, "Data Types". HANA has no time zone type (a
TIMESTAMP is a wall clock; applications usually store UTC), no JSON or UUID type, and its
TIMESTAMP keeps 7 fractional digits (100 ns), of which the contract compares 6.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from connectors.model import SourceColumn
from merkle import types as lt

REAL_MAX_BITS = 24  # FLOAT(n) is a 32-bit REAL for n <= 24, else a DOUBLE (SQL Reference)

_SIMPLE: dict[str, lt.LogicalType] = {
    "TINYINT": lt.IntegerType(),  # unsigned, 0..255
    "SMALLINT": lt.IntegerType(),
    "INTEGER": lt.IntegerType(),
    "BIGINT": lt.IntegerType(),
    "SMALLDECIMAL": lt.DecimalType(),  # floating-point decimal, 16 digits
    "REAL": lt.FloatType(32),
    "DOUBLE": lt.FloatType(64),
    "VARCHAR": lt.StringType(),
    "NVARCHAR": lt.StringType(),
    "ALPHANUM": lt.StringType(),
    "SHORTTEXT": lt.StringType(),
    "CLOB": lt.StringType(),
    "NCLOB": lt.StringType(),
    "TEXT": lt.StringType(),
    "CHAR": lt.StringType(padded=True),
    "NCHAR": lt.StringType(padded=True),
    "VARBINARY": lt.BytesType(),
    "BINARY": lt.BytesType(),
    "BLOB": lt.BytesType(),
    "BOOLEAN": lt.BooleanType(),
    "DATE": lt.DateType(),
    "TIME": lt.TimeType(0),  # HANA's TIME keeps whole seconds
    "SECONDDATE": lt.TimestampType(0),
    "TIMESTAMP": lt.TimestampType(6),
}


_SIZED = ("VARCHAR", "NVARCHAR", "ALPHANUM", "CHAR", "NCHAR", "VARBINARY", "BINARY")
"""The types declared with a length (SAP HANA SQL Reference, "Data Types")."""


@dataclass(frozen=True, slots=True)
class HanaColumn:
    """One ``SYS.TABLE_COLUMNS`` row, as much of it as the mapping needs.

    Attributes:
        name: ``COLUMN_NAME``.
        data_type: ``DATA_TYPE_NAME`` (``DECIMAL``, ``NVARCHAR``, ``ST_GEOMETRY`` ...).
        length: ``LENGTH``: a decimal's precision, a FLOAT's bits, a string's length.
        scale: ``SCALE``: a decimal's scale; NULL for a floating-point DECIMAL.
    """

    name: str
    data_type: str
    length: int | None = None
    scale: int | None = None

    @property
    def native_type(self) -> str:
        """The declared type as HANA would print it."""
        if self.data_type == "DECIMAL" and self.scale is not None:
            return f"DECIMAL({self.length},{self.scale})"
        return self.data_type

    @property
    def declaration(self) -> str:
        """The type as a column definition spells it, length included, so that a copy of
        the column (trigger capture's logging table) holds every value the column can."""
        name = self.data_type.upper()
        if name == "SHORTTEXT":  # a full-text column type: its values are NVARCHAR
            name = "NVARCHAR"
        if name in _SIZED and self.length is not None:
            return f"{name}({self.length})"
        if name == "FLOAT" and self.length is not None:
            return f"FLOAT({self.length})"
        if name == "TEXT":  # the column store's full-text NCLOB
            return "NCLOB"
        return self.native_type


def logical_type(column: HanaColumn) -> lt.LogicalType | None:
    """The logical type of a HANA column, or None when replcheck cannot hash it."""
    name = column.data_type.upper()
    if name == "DECIMAL":
        if column.scale is None or column.length is None:
            return lt.DecimalType()  # DECIMAL without precision: floating-point decimal
        return lt.DecimalType(column.length, column.scale)
    if name == "FLOAT":
        bits = column.length or 53
        return lt.FloatType(32 if bits <= REAL_MAX_BITS else 64)
    return _SIMPLE.get(name)  # None: ST_GEOMETRY, ST_POINT, ARRAY, REAL_VECTOR


def source_columns(rows: Sequence[tuple[Any, ...]]) -> tuple[SourceColumn, ...]:
    """``SYS.TABLE_COLUMNS`` rows (name, type, length, scale, nullable) as source columns."""
    return tuple(
        SourceColumn(column.name, column.native_type, logical_type(column), nullable == "TRUE")
        for column, nullable in zip(catalog_columns(rows), (row[4] for row in rows), strict=True)
    )


def catalog_columns(rows: Sequence[tuple[Any, ...]]) -> tuple[HanaColumn, ...]:
    """``SYS.TABLE_COLUMNS`` rows (name, type, length, scale, ...) as ``HanaColumn``s."""
    return tuple(HanaColumn(str(row[0]), str(row[1]), _int(row[2]), _int(row[3])) for row in rows)


def _int(value: Any) -> int | None:
    return None if value is None else int(value)
