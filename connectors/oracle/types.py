"""Oracle data dictionary types (ALL_TAB_COLUMNS) to logical types.

Reference: Oracle Database SQL Language Reference, "Data Types". Oracle stores '' as NULL,
so comparisons with Oracle on one side usually want ``empty_string_is_null: true``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from connectors.model import SourceColumn, without_logical_type
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


LOB_TYPES = frozenset({"CLOB", "NCLOB", "BLOB"})
"""Types whose values LogMiner may write as LOB_WRITE/LOB_TRIM/LOB_ERASE fragments after the
row's INSERT or UPDATE (Oracle Database Utilities, "Supported Data Types ... LogMiner"),
assembled by ``logminer/lob_redo.py``; read whole (not as locators) by every query."""


def refusal(column: SourceColumn) -> str | None:
    """Why a pipeline cannot carry an Oracle column (``connectors.model.carried_columns``):
    no logical type (XMLTYPE, LONG RAW, SDO_GEOMETRY, object types: LogMiner shows their
    values as ``Unsupported Type`` at best), or an INTERVAL, which the snapshot's flashback
    read does not read yet (``OracleConnector.arrow_schema``), so a load could not fill it.
    LOBs are carried: their fragments are assembled (``logminer/lob_redo.py``)."""
    if isinstance(column.ltype, lt.IntervalType):
        return "not read by the Oracle snapshot yet, so no load could fill it"
    return without_logical_type(column)


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


_SYNONYMS = {
    "VARCHAR": "VARCHAR2", "CHARACTER": "CHAR", "NUMERIC": "NUMBER", "DECIMAL": "NUMBER",
    "DEC": "NUMBER", "INTEGER": "NUMBER", "INT": "NUMBER", "SMALLINT": "NUMBER",
}  # fmt: skip
_TYPE_WORDS = frozenset({
    *_SYNONYMS, "NUMBER", "FLOAT", "REAL", "DOUBLE", "BINARY_FLOAT", "BINARY_DOUBLE",
    "VARCHAR2", "NVARCHAR2", "CHAR", "NCHAR", "NATIONAL", "CLOB", "NCLOB", "BLOB", "BFILE",
    "RAW", "LONG", "DATE", "TIMESTAMP", "INTERVAL", "JSON", "XMLTYPE", "ROWID", "UROWID",
    "BOOLEAN", "VECTOR", "SDO_GEOMETRY",
})  # fmt: skip


def declared_type(words: list[str]) -> tuple[OracleColumn | None, int]:
    """A data type as DDL declares it (``words``: the upper-cased words and punctuation of
    a column definition after its name), as ALL_TAB_COLUMNS will show it (the column name
    is left empty), and how many words it took; ``None`` when the definition has no type.
    Synonyms become Oracle's own types (SQL Language Reference, "ANSI, DB2, and SQL/DS
    Data Types"): INTEGER is NUMBER with scale 0, DOUBLE PRECISION is FLOAT(126), ...
    """
    if not words or words[0] not in _TYPE_WORDS:
        return None, 0
    name, used = _type_name(words)
    arguments, used = _arguments(words, used)
    name, used = _type_suffix(name, words, used, arguments)
    return _as_dictionary(name, arguments), used


def _type_name(words: list[str]) -> tuple[str, int]:
    pairs = {("LONG", "RAW"), ("DOUBLE", "PRECISION"), ("CHARACTER", "VARYING")}
    if len(words) > 1 and (words[0], words[1]) in pairs:
        return f"{words[0]} {words[1]}", 2
    if words[0] == "NATIONAL":  # NATIONAL CHAR[ACTER] [VARYING]
        varying = "VARYING" in words[1:3]
        return ("NVARCHAR2" if varying else "NCHAR"), 3 if varying else 2
    return words[0], 1


def _arguments(words: list[str], at: int) -> tuple[list[str], int]:
    """The numbers (or ``*``) of a ``(...)`` after the type name."""
    if at >= len(words) or words[at] != "(":
        return [], at
    end = words.index(")", at) if ")" in words[at:] else len(words)
    return [w for w in words[at + 1 : end] if w.isdigit() or w == "*"], end + 1


def _type_suffix(name: str, words: list[str], at: int, arguments: list[str]) -> tuple[str, int]:
    """``TIMESTAMP(p) WITH [LOCAL] TIME ZONE`` and ``INTERVAL ... TO ...`` as one name."""
    if name == "TIMESTAMP":
        digits = arguments[0] if arguments else "6"
        for zone in (["WITH", "TIME", "ZONE"], ["WITH", "LOCAL", "TIME", "ZONE"]):
            if words[at : at + len(zone)] == zone:
                return f"TIMESTAMP({digits}) {' '.join(zone)}", at + len(zone)
        return f"TIMESTAMP({digits})", at
    if name == "INTERVAL" and at < len(words):
        unit = words[at]
        inner, after = _arguments(words, at + 1)
        if words[after : after + 2] in (["TO", "MONTH"], ["TO", "SECOND"]):
            last, end = _arguments(words, after + 2)
            if words[after + 1] == "MONTH":
                return f"INTERVAL YEAR({inner[0] if inner else 2}) TO MONTH", end
            fraction = last[0] if last else 6
            return f"INTERVAL {unit}({inner[0] if inner else 2}) TO SECOND({fraction})", end
    return name, at


def _as_dictionary(name: str, arguments: list[str]) -> OracleColumn:
    numbers = [None if a == "*" else int(a) for a in arguments]
    base = _SYNONYMS.get(name, name)
    if base == "NUMBER":
        if name in ("INTEGER", "INT", "SMALLINT") or (name != "NUMBER" and not numbers):
            return OracleColumn("", "NUMBER", None, 0)
        precision = numbers[0] if numbers else None
        scale = numbers[1] if len(numbers) > 1 else (0 if numbers else None)
        return OracleColumn("", "NUMBER", precision, scale)
    if base in ("FLOAT", "REAL", "DOUBLE PRECISION"):
        bits = {"REAL": 63, "DOUBLE PRECISION": 126}.get(base, numbers[0] if numbers else 126)
        return OracleColumn("", "FLOAT", bits, None)
    if base == "CHARACTER VARYING":
        return OracleColumn("", "VARCHAR2")
    if base.startswith("TIMESTAMP"):
        return OracleColumn("", base, None, int(base[10:].split(")")[0]))
    return OracleColumn("", base)
