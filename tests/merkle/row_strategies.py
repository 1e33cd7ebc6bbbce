"""Hypothesis strategies: random row layouts and rows Spark and Python both accept."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from hypothesis import strategies as st

from merkle.layout import RowLayout
from merkle.options import ComparisonOptions, TimeRounding
from merkle.types import (
    TIME_TZ_FIELDS,
    ArrayType,
    BooleanType,
    BytesType,
    DateType,
    DecimalType,
    FloatType,
    IntegerType,
    IntervalType,
    JsonType,
    LogicalType,
    StringType,
    TimestampType,
    TimestampTzType,
    TimeType,
    TimeTzType,
    UuidType,
)

_TEXT = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=12)
_OFFSETS = st.integers(min_value=-14 * 60, max_value=14 * 60).map(
    lambda minutes: dt.timezone(dt.timedelta(minutes=minutes))
)
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**20), 10**20)
    | _TEXT
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=8,
)


def _decimal_type() -> st.SearchStrategy[DecimalType]:
    return st.integers(1, 38).flatmap(lambda p: st.integers(0, p).map(lambda s: DecimalType(p, s)))


def _logical_types() -> st.SearchStrategy[LogicalType]:
    return _scalar_types() | _scalar_types().map(ArrayType)


def _scalar_types() -> st.SearchStrategy[LogicalType]:
    return st.one_of(
        st.just(IntegerType()),
        _decimal_type(),
        st.sampled_from([FloatType(32), FloatType(64)]),
        st.sampled_from([StringType(), StringType(padded=True)]),
        st.just(BytesType()),
        st.just(BooleanType()),
        st.just(DateType()),
        st.integers(0, 6).map(TimeType),
        st.integers(0, 6).map(TimestampType),
        st.integers(0, 6).map(TimestampTzType),
        st.just(JsonType()),
        st.just(UuidType()),
        st.just(IntervalType()),
        st.integers(0, 6).map(TimeTzType),
    )


_DAY_MICROS = 86_400_000_000
_TIME_TZ = st.tuples(st.integers(0, _DAY_MICROS), st.integers(-57_599, 57_599))


def values_of(ltype: LogicalType) -> st.SearchStrategy[Any]:
    """Python values of a logical type that Spark's createDataFrame takes as they are."""
    if isinstance(ltype, ArrayType):
        element = ltype.element
        if isinstance(element, TimeType):  # in a list, as the lake stores times
            return st.lists(st.none() | st.integers(0, _DAY_MICROS), max_size=4)
        return st.lists(st.none() | values_of(element), max_size=4)
    if isinstance(ltype, DecimalType):
        assert ltype.precision is not None and ltype.scale is not None
        bound = 10 ** (ltype.precision - ltype.scale) - 1
        return st.decimals(-bound, bound, places=ltype.scale, allow_nan=False)
    strategies: dict[type, st.SearchStrategy[Any]] = {
        IntegerType: st.integers(-(2**63), 2**63 - 1),
        FloatType: st.floats(width=getattr(ltype, "bits", 64)),
        StringType: _TEXT.map(lambda s: s + " " * (len(s) % 3)),
        BytesType: st.binary(max_size=12),
        BooleanType: st.booleans(),
        DateType: st.dates(),
        TimeType: st.times(),
        TimestampType: st.datetimes(),
        TimestampTzType: st.datetimes(
            min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30), timezones=_OFFSETS
        ),
        JsonType: _JSON.map(json.dumps),
        UuidType: st.uuids().map(str),
        IntervalType: st.timedeltas(dt.timedelta(days=-(10**6)), dt.timedelta(days=10**6)),
        TimeTzType: _TIME_TZ,  # the struct (micros, offset_seconds) as a tuple
    }
    return strategies[type(ltype)]


def spark_type(ltype: LogicalType) -> Any:
    """The Spark type of ``values_of(ltype)`` columns."""
    from pyspark.sql import types as T

    if isinstance(ltype, ArrayType):
        element = ltype.element
        return T.ArrayType(T.LongType() if isinstance(element, TimeType) else spark_type(element))
    if isinstance(ltype, TimeTzType):
        micros, offset = TIME_TZ_FIELDS
        return T.StructType(
            [T.StructField(micros, T.LongType()), T.StructField(offset, T.IntegerType())]
        )
    if isinstance(ltype, DecimalType):
        return T.DecimalType(ltype.precision or 38, ltype.scale or 0)
    if isinstance(ltype, FloatType):
        return T.FloatType() if ltype.bits == 32 else T.DoubleType()
    simple = {
        IntegerType: T.LongType(),
        StringType: T.StringType(),
        BytesType: T.BinaryType(),
        BooleanType: T.BooleanType(),
        DateType: T.DateType(),
        TimeType: T.TimeType(6),
        TimestampType: T.TimestampNTZType(),
        TimestampTzType: T.TimestampType(),
        JsonType: T.StringType(),
        UuidType: T.StringType(),
        IntervalType: T.DayTimeIntervalType(),
    }
    return simple[type(ltype)]


_OPTIONS = st.builds(
    ComparisonOptions,
    trim_char=st.booleans(),
    case_insensitive=st.booleans(),
    empty_string_is_null=st.booleans(),
    timestamp_precision=st.none() | st.integers(0, 6),
    timestamp_rounding=st.none() | st.sampled_from(list(TimeRounding)),
    float_digits=st.none() | st.integers(1, 17),
)


def _layout_and_rows(
    draw: st.DrawFn,
    types: st.SearchStrategy[LogicalType],
    options: st.SearchStrategy[ComparisonOptions],
) -> tuple[RowLayout, list[tuple[Any, ...]]]:
    ltypes = draw(st.lists(types, min_size=1, max_size=6))
    names = [f"c{i}" for i in range(len(ltypes))]
    key_size = draw(st.integers(1, min(2, len(ltypes))))
    layout = RowLayout.of(list(zip(names, ltypes, strict=True)), names[:key_size], draw(options))
    row = st.tuples(*(st.none() | values_of(lt) for lt in ltypes))
    return layout, draw(st.lists(row, max_size=30))


@st.composite
def layouts_with_rows(draw: st.DrawFn) -> tuple[RowLayout, list[tuple[Any, ...]], Any]:
    """A random layout, up to 30 random rows (NULLs included) and the Spark schema."""
    from pyspark.sql import types as T

    layout, rows = _layout_and_rows(draw, _logical_types(), _OPTIONS)
    schema = T.StructType([T.StructField(c.name, spark_type(c.ltype)) for c in layout.columns])
    return layout, rows, schema


def arrow_type(ltype: LogicalType) -> Any:
    """The Arrow type of ``values_of(ltype)`` columns, as a lake stores them."""
    import pyarrow as pa

    from connectors.base import arrow_type_of

    if isinstance(ltype, ArrayType):
        element = ltype.element
        return pa.list_(pa.int64() if isinstance(element, TimeType) else arrow_type(element))
    if isinstance(ltype, TimeTzType):
        micros, offset = TIME_TZ_FIELDS
        return pa.struct([pa.field(micros, pa.int64()), pa.field(offset, pa.int32())])
    if isinstance(ltype, TimeType):
        return pa.time64("us")  # values_of gives times of day
    return arrow_type_of(ltype)


# What DuckDB computes exactly (merkle.duckdb): every type, but no float_digits and no case
# folding.
_DUCKDB_SCALARS = _scalar_types()
_DUCKDB_OPTIONS = st.builds(
    ComparisonOptions,
    trim_char=st.booleans(),
    empty_string_is_null=st.booleans(),
    timestamp_precision=st.none() | st.integers(0, 6),
    timestamp_rounding=st.none() | st.sampled_from(list(TimeRounding)),
)


@st.composite
def duckdb_layouts_with_rows(draw: st.DrawFn) -> tuple[RowLayout, list[tuple[Any, ...]], Any]:
    """A random layout DuckDB can hash, up to 30 random rows and the Arrow schema."""
    import pyarrow as pa

    types = _DUCKDB_SCALARS | _DUCKDB_SCALARS.map(ArrayType)
    layout, rows = _layout_and_rows(draw, types, _DUCKDB_OPTIONS)
    schema = pa.schema([pa.field(c.name, arrow_type(c.ltype)) for c in layout.columns])
    return layout, rows, schema
