"""Type reconciliation: the less precise type wins; incompatible pairs are reported."""

from __future__ import annotations

import pyarrow as pa
import pytest

from cdc_core.errors import ConfigError
from merkle import types as lt
from merkle.options import ComparisonOptions
from validator.reconcile import logical_type_of_arrow, reconcile, reconcile_pair


@pytest.mark.parametrize(
    ("source", "target", "expected"),
    [
        (lt.IntegerType(), lt.IntegerType(), lt.IntegerType()),
        (lt.IntegerType(), lt.DecimalType(20, 0), lt.DecimalType(20, 0)),
        (lt.DecimalType(10, 2), lt.DecimalType(38, 10), lt.DecimalType()),
        (lt.FloatType(64), lt.FloatType(32), lt.FloatType(32)),
        (lt.TimestampType(6), lt.TimestampType(3), lt.TimestampType(3)),
        (lt.TimeType(6), lt.TimeType(0), lt.TimeType(0)),
        (lt.TimeType(6), lt.IntegerType(), lt.TimeType(6)),
        (lt.StringType(), lt.StringType(padded=True), lt.StringType(padded=True)),
        (lt.JsonType(), lt.StringType(), lt.JsonType()),
        (lt.StringType(), lt.UuidType(), lt.UuidType()),
        (lt.StringType(padded=True), lt.UuidType(), lt.UuidType()),
        (lt.TimestampType(6), lt.TimestampTzType(6), None),
        (lt.BytesType(), lt.StringType(), None),
        (lt.DateType(), lt.TimestampType(6), None),
    ],
)
def test_pairs(source: lt.LogicalType, target: lt.LogicalType, expected: object) -> None:
    assert reconcile_pair(source, target) == expected


def test_missing_extra_and_incompatible_columns_are_schema_differences() -> None:
    result = reconcile(
        {
            "id": lt.IntegerType(),
            "a": lt.StringType(),
            "b": lt.BytesType(),
            "gone": lt.DateType(),
            "skip": lt.DateType(),
            "odd": None,
        },
        {
            "id": lt.IntegerType(),
            "a_renamed": lt.StringType(),
            "b": lt.StringType(),
            "new": lt.DateType(),
            "odd": lt.StringType(),
        },
        key=["id"],
        rename={"a": "a_renamed"},
        exclude=["skip"],
        sensitive=["a"],
        options=ComparisonOptions(),
    )
    assert result.layout.names == ("id", "a")
    assert result.target_names == {"id": "id", "a": "a_renamed"}
    assert result.layout.columns[1].sensitive
    problems = {(d.column, d.problem) for d in result.schema_differences}
    assert problems == {
        ("b", "incompatible types bytes (source) and string (target)"),
        ("gone", "missing in target"),
        ("odd", "type not supported on the source side"),
        ("new", "extra in target"),
    }


def test_a_key_column_that_cannot_be_compared_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"key columns \['id'\]"):
        reconcile(
            {"id": lt.BytesType()}, {"id": lt.StringType()}, ["id"], {}, [], [], ComparisonOptions()
        )


def test_lake_arrow_types_map_to_logical_types() -> None:
    assert logical_type_of_arrow(pa.timestamp("ms")) == lt.TimestampType(3)
    assert logical_type_of_arrow(pa.timestamp("us", tz="UTC")) == lt.TimestampTzType(6)
    assert logical_type_of_arrow(pa.decimal128(12, 2)) == lt.DecimalType(12, 2)
    assert logical_type_of_arrow(pa.float32()) == lt.FloatType(32)
    assert logical_type_of_arrow(pa.int32()) == lt.IntegerType()
    assert logical_type_of_arrow(pa.list_(pa.int32())) is None
