"""HANA catalog types (SYS.TABLE_COLUMNS) map to logical types (no server needed)."""

from __future__ import annotations

import pytest

from connectors.hana.types import HanaColumn, logical_type, source_columns
from connectors.model import SourceColumn
from merkle import types as lt


@pytest.mark.parametrize(
    ("data_type", "length", "scale", "expected"),
    [
        ("TINYINT", 3, 0, lt.IntegerType()),
        ("SMALLINT", 5, 0, lt.IntegerType()),
        ("INTEGER", 10, 0, lt.IntegerType()),
        ("BIGINT", 19, 0, lt.IntegerType()),
        ("DECIMAL", 12, 2, lt.DecimalType(12, 2)),
        ("DECIMAL", 34, None, lt.DecimalType()),  # floating-point decimal
        ("SMALLDECIMAL", 16, None, lt.DecimalType()),
        ("REAL", 24, None, lt.FloatType(32)),
        ("DOUBLE", 53, None, lt.FloatType(64)),
        ("FLOAT", 24, None, lt.FloatType(32)),
        ("FLOAT", 25, None, lt.FloatType(64)),
        ("VARCHAR", 40, None, lt.StringType()),
        ("NVARCHAR", 5000, None, lt.StringType()),
        ("ALPHANUM", 10, None, lt.StringType()),
        ("NCLOB", None, None, lt.StringType()),
        ("NCHAR", 10, None, lt.StringType(padded=True)),
        ("VARBINARY", 16, None, lt.BytesType()),
        ("BLOB", None, None, lt.BytesType()),
        ("BOOLEAN", 1, None, lt.BooleanType()),
        ("DATE", 10, None, lt.DateType()),
        ("TIME", 8, None, lt.TimeType(0)),
        ("SECONDDATE", 19, None, lt.TimestampType(0)),
        ("TIMESTAMP", 27, 7, lt.TimestampType(6)),
        ("ST_GEOMETRY", None, None, None),
        ("REAL_VECTOR", None, None, None),
    ],
)
def test_catalog_types_map_to_logical_types(
    data_type: str, length: int | None, scale: int | None, expected: object
) -> None:
    assert logical_type(HanaColumn("C", data_type, length, scale)) == expected


def test_catalog_rows_become_source_columns() -> None:
    rows = [
        ("ID", "BIGINT", 19, 0, "FALSE"),
        ("AMOUNT", "DECIMAL", 12, 2, "TRUE"),
        ("SHAPE", "ST_GEOMETRY", None, None, "TRUE"),
    ]
    assert source_columns(rows) == (
        SourceColumn("ID", "BIGINT", lt.IntegerType(), nullable=False),
        SourceColumn("AMOUNT", "DECIMAL(12,2)", lt.DecimalType(12, 2), nullable=True),
        SourceColumn("SHAPE", "ST_GEOMETRY", None, nullable=True),
    )
