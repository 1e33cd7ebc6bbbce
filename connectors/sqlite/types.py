"""SQLite declared column types to logical types.

SQLite stores values by storage class, not by declared type (https://sqlite.org/datatype3.html),
so the declared type — what the schema's author meant — decides the logical type, and the
reader converts each stored value to it (e.g. a DATETIME stored as ISO text).
"""

from __future__ import annotations

import re

from merkle import types as lt

_DECIMAL = re.compile(r"^(?:DECIMAL|NUMERIC)\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
_NAMED: list[tuple[tuple[str, ...], lt.LogicalType]] = [
    (("BOOL",), lt.BooleanType()),
    (("JSON",), lt.JsonType()),
    (("UUID",), lt.UuidType()),
    (("DATETIME", "TIMESTAMP"), lt.TimestampType(6)),
    (("DATE",), lt.DateType()),
    (("INT",), lt.IntegerType()),  # SQLite's affinity rule 1: any type containing INT
    (("CHAR", "CLOB", "TEXT"), lt.StringType()),
    (("BLOB",), lt.BytesType()),
    (("REAL", "FLOA", "DOUB"), lt.FloatType(64)),
]


def logical_type(declared: str) -> lt.LogicalType | None:
    """The logical type of a declared column type, or None (NUMERIC without a scale)."""
    name = declared.strip().upper()
    match = _DECIMAL.match(name)
    if match:
        return lt.DecimalType(int(match.group(1)), int(match.group(2)))
    for words, ltype in _NAMED:
        if any(word in name for word in words):
            return ltype
    return None
