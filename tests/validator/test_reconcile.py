"""Type reconciliation: the less precise type wins; incompatible pairs are reported."""

from __future__ import annotations

import pyarrow as pa
import pytest

from cdc_core.errors import ConfigError
from merkle import types as lt
from merkle.options import ComparisonOptions, TimeRounding
from validator.reconcile import SideRounding, logical_type_of_arrow, reconcile, reconcile_pair


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
        (lt.TimeTzType(6), lt.TimeTzType(3), lt.TimeTzType(3)),
        (lt.TimeTzType(6), lt.TimeType(6), None),  # the offset counts
        (
            lt.ArrayType(lt.TimeType(3)),
            lt.ArrayType(lt.IntegerType()),
            lt.ArrayType(lt.TimeType(3)),
        ),
        (lt.ArrayType(lt.JsonType()), lt.ArrayType(lt.StringType()), lt.ArrayType(lt.JsonType())),
        (
            lt.ArrayType(lt.DecimalType(10, 2)),
            lt.ArrayType(lt.DecimalType(38, 18)),
            lt.ArrayType(lt.DecimalType()),
        ),
        (lt.ArrayType(lt.IntegerType()), lt.IntegerType(), None),
        (lt.ArrayType(lt.BytesType()), lt.ArrayType(lt.StringType()), None),
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


def test_a_whole_row_key_is_the_columns_both_sides_can_compare() -> None:
    """A table without a key is keyed by its rows: a column one side lacks is a schema
    difference, as for any table, and leaves the key (an error otherwise)."""
    source = {"a": lt.IntegerType(), "b": lt.StringType(), "c1": lt.IntegerType()}
    target = {"a": lt.IntegerType(), "b": lt.StringType()}
    options = ComparisonOptions()
    found = reconcile(source, target, ["a", "b", "c1"], {}, [], [], options, whole_row=True)
    assert found.layout.key == ("a", "b") and found.layout.whole_row_key
    assert {(d.column, d.problem) for d in found.schema_differences} == {
        ("c1", "missing in target")
    }
    with pytest.raises(ConfigError, match=r"key columns \['c1'\]"):
        reconcile(source, target, ["a", "b", "c1"], {}, [], [], options)


def test_lake_arrow_types_map_to_logical_types() -> None:
    assert logical_type_of_arrow(pa.timestamp("ms")) == lt.TimestampType(3)
    assert logical_type_of_arrow(pa.timestamp("us", tz="UTC")) == lt.TimestampTzType(6)
    assert logical_type_of_arrow(pa.decimal128(12, 2)) == lt.DecimalType(12, 2)
    assert logical_type_of_arrow(pa.float32()) == lt.FloatType(32)
    assert logical_type_of_arrow(pa.int32()) == lt.IntegerType()
    assert logical_type_of_arrow(pa.list_(pa.int32())) == lt.ArrayType(lt.IntegerType())
    assert logical_type_of_arrow(pa.large_list(pa.string())) == lt.ArrayType(lt.StringType())
    time_tz = pa.struct([("micros", pa.int64()), ("offset_seconds", pa.int32())])
    assert logical_type_of_arrow(time_tz) == lt.TimeTzType(6)
    assert logical_type_of_arrow(pa.list_(time_tz)) == lt.ArrayType(lt.TimeTzType(6))
    assert logical_type_of_arrow(pa.struct([("micros", pa.int64())])) is None
    assert logical_type_of_arrow(pa.list_(pa.struct([("x", pa.int8())]))) is None


def _one_column(
    source: lt.LogicalType,
    target: lt.LogicalType,
    rounding: SideRounding | None = None,
    options: ComparisonOptions | None = None,
) -> tuple[ComparisonOptions, tuple[str, ...]]:
    """The options the layout of ``id`` + column ``c`` gets, and its schema problems."""
    result = reconcile(
        {"id": lt.IntegerType(), "c": source},
        {"id": lt.IntegerType(), "c": target},
        ["id"],
        {},
        [],
        [],
        options or ComparisonOptions(),
        rounding=rounding or SideRounding(),
    )
    return result.layout.options, tuple(d.problem for d in result.schema_differences)


PG_DUCK = SideRounding(TimeRounding.HALF_AWAY_FROM_2000, TimeRounding.HALF_AWAY_FROM_1970)


@pytest.mark.parametrize(
    ("source", "target", "expected"),
    [
        (lt.TimestampType(3), lt.TimestampType(6), TimeRounding.HALF_AWAY_FROM_2000),
        (lt.TimestampType(6), lt.TimestampType(3), TimeRounding.HALF_AWAY_FROM_1970),
        (lt.TimestampTzType(6), lt.TimestampTzType(0), TimeRounding.HALF_AWAY_FROM_1970),
        (lt.TimeType(3), lt.IntegerType(), TimeRounding.HALF_AWAY_FROM_2000),  # lake micros
        (lt.TimeTzType(3), lt.TimeTzType(6), TimeRounding.HALF_AWAY_FROM_2000),
        (
            lt.ArrayType(lt.TimestampType(6)),
            lt.ArrayType(lt.TimestampType(3)),
            TimeRounding.HALF_AWAY_FROM_1970,
        ),
        (lt.TimestampType(3), lt.TimestampType(3), TimeRounding.ROUND),  # nobody rounded
    ],
)
def test_the_side_that_stored_fewer_digits_names_the_rounding_rule(
    source: lt.LogicalType, target: lt.LogicalType, expected: TimeRounding
) -> None:
    options, _ = _one_column(source, target, rounding=PG_DUCK)
    assert options.timestamp_rounding is expected


def test_an_unknown_rule_falls_back_to_round_and_the_config_wins() -> None:
    unknown = SideRounding(TimeRounding.HALF_AWAY_FROM_2000, None)
    options, _ = _one_column(lt.TimestampType(6), lt.TimestampType(3), rounding=unknown)
    assert options.timestamp_rounding is TimeRounding.ROUND
    configured = ComparisonOptions(timestamp_rounding=TimeRounding.TRUNCATE)
    options, _ = _one_column(
        lt.TimestampType(3), lt.TimestampType(6), rounding=PG_DUCK, options=configured
    )
    assert options.timestamp_rounding is TimeRounding.TRUNCATE


def test_columns_rounded_by_different_products_warn(caplog: pytest.LogCaptureFixture) -> None:
    result = reconcile(
        {"id": lt.IntegerType(), "a": lt.TimestampType(3), "b": lt.TimestampType(6)},
        {"id": lt.IntegerType(), "a": lt.TimestampType(6), "b": lt.TimestampType(3)},
        ["id"],
        {},
        [],
        [],
        ComparisonOptions(),
        rounding=PG_DUCK,
    )
    assert result.layout.options.timestamp_rounding is TimeRounding.HALF_AWAY_FROM_2000
    assert "a: half_away_from_2000, b: half_away_from_1970" in caplog.text


def test_a_boolean_integer_column_compares_with_a_boolean() -> None:
    _, problems = _one_column(lt.IntegerType(), lt.BooleanType())
    assert problems == (
        "incompatible types integer (source) and boolean (target); MariaDB keeps BOOLEAN as"
        " TINYINT(1): to compare it as a boolean, list it in the comparison's columns:"
        " {boolean: [c]}",
    )
    result = reconcile(
        {"id": lt.IntegerType(), "c": lt.IntegerType()},
        {"id": lt.IntegerType(), "c": lt.BooleanType()},
        ["id"],
        {},
        [],
        [],
        ComparisonOptions(),
        boolean=["c"],
    )
    assert result.schema_differences == ()
    assert result.layout.columns[1].ltype == lt.BooleanType()


@pytest.mark.parametrize(
    ("boolean", "message"),
    [
        (["nope"], r"columns.boolean lists columns the source does not have: \['nope'\]"),
        (["s"], "columns.boolean lists s, which is string on the source side"),
    ],
)
def test_boolean_columns_must_exist_and_hold_integers(boolean: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        reconcile(
            {"id": lt.IntegerType(), "s": lt.StringType()},
            {"id": lt.IntegerType(), "s": lt.BooleanType()},
            ["id"],
            {},
            [],
            [],
            ComparisonOptions(),
            boolean=boolean,
        )
