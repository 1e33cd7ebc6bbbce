"""The hash contract's rules, written out by hand (independent of the golden file)."""

from __future__ import annotations

import datetime as dt
import decimal
import uuid

import pytest

from cdc_core.errors import ContractError
from merkle.canonical import Interval, RowEncoder, to_canonical_field
from merkle.hashing import hash_bytes
from merkle.options import ComparisonOptions
from merkle.types import (
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
    parse_logical_type,
)

DEFAULT = ComparisonOptions()
D = decimal.Decimal


def field(value: object, ltype: LogicalType, **options: object) -> bytes:
    return to_canonical_field(value, ltype, ComparisonOptions(**options))  # type: ignore[arg-type]


def row(values: list[object], ltypes: list[LogicalType], **options: object) -> bytes:
    return RowEncoder(ltypes, ComparisonOptions(**options)).to_bytes(values)  # type: ignore[arg-type]


# -- the ambiguity traps named in DESIGN.md ------------------------------------------------


def test_null_differs_from_every_null_like_string() -> None:
    text = StringType()
    assert field(None, text) == b"N"
    spellings = ["<null>", "NULL", "null", "N", "", "\x00"]
    encoded = {field(s, text) for s in spellings}
    assert b"N" not in encoded
    assert len(encoded) == len(spellings)
    assert field("<null>", text) == b"6:<null>"


def test_length_prefix_separates_field_boundaries() -> None:
    two = [StringType(), StringType()]
    left = row(["a|b", "c"], two)
    right = row(["a", "b|c"], two)
    assert left == b"3:a|b1:c"
    assert right == b"1:a3:b|c"
    assert hash_bytes(left) != hash_bytes(right)
    assert row(["ab", ""], two) != row(["a", "b"], two)
    assert row(["1:a", None], two) != row(["1", ":a"], two)


def test_decimal_trailing_zeros_do_not_count() -> None:
    assert field(D("1.10"), DecimalType(10, 2)) == field(D("1.1"), DecimalType(10, 1)) == b"3:1.1"
    assert field(D("100.00"), DecimalType(10, 2)) == b"3:100"
    assert field(D("-0.00"), DecimalType(5, 2)) == field(0, DecimalType()) == b"1:0"
    assert field(D("1E+2"), DecimalType()) == b"3:100"
    assert field(D("1.11"), DecimalType(10, 2)) != field(D("1.1"), DecimalType(10, 2))


def test_one_microsecond_is_a_difference() -> None:
    base = dt.datetime(2024, 1, 1, 12, 0, 0, 0)
    later = base + dt.timedelta(microseconds=1)
    assert field(base, TimestampType()) != field(later, TimestampType())
    assert field(later, TimestampType()) == b"16:1704110400000001"


# -- per type --------------------------------------------------------------------------------


def test_integers_are_plain_decimal_digits() -> None:
    assert field(0, IntegerType()) == b"1:0"
    assert field(-42, IntegerType()) == b"3:-42"
    assert field(2**64 - 1, IntegerType()) == b"20:18446744073709551615"
    assert field(D("7"), IntegerType()) == b"1:7"
    with pytest.raises(ContractError):
        field(D("7.5"), IntegerType())
    with pytest.raises(ContractError):
        field(7.0, IntegerType())


def test_floats_round_to_bits_and_normalise_signed_zero() -> None:
    double = FloatType(64)
    assert field(0.1, double) == b"19:4591870180066957722"  # 0x3FB999999999999A
    assert field(-0.0, double) == field(0.0, double) == b"1:0"
    assert field(float("nan"), double) == field(-float("nan"), double) == b"19:9221120237041090560"
    assert field(float("-inf"), double) == b"17:-4503599627370496"
    assert field(float("-inf"), double, float_digits=6) == b"9:-Infinity"
    assert field(-0.0, double, float_digits=6) == b"1:0"
    # 0.1 + 0.2 differs from 0.3 exactly, but not at 15 significant digits
    assert field(0.1 + 0.2, double) != field(0.3, double)
    assert field(0.1 + 0.2, double, float_digits=15) == field(0.3, double, float_digits=15)


def test_float32_columns_compare_at_single_precision() -> None:
    single = FloatType(32)
    widened = 0.10000000149011612  # what a FLOAT column holding 0.1 reads as in Spark
    assert field(0.1, single) == field(widened, single) == b"19:4591870180174331904"
    assert field(1e39, single) == field(float("inf"), single) == b"19:9218868437227405312"
    assert field(0.1, FloatType(64)) != field(widened, FloatType(64))


def test_strings_are_utf8_and_options_apply() -> None:
    assert field("é", StringType()) == b"2:\xc3\xa9"
    assert field("ab  ", StringType(padded=True), trim_char=True) == b"2:ab"
    assert field("ab  ", StringType(), trim_char=True) == b"4:ab  "  # only CHAR is padded
    assert field("ABC", StringType(), case_insensitive=True) == b"3:abc"
    assert field("", StringType()) == b"0:"
    assert field("", StringType(), empty_string_is_null=True) == b"N"
    assert field("  ", StringType(padded=True), trim_char=True, empty_string_is_null=True) == b"N"


def test_bytes_booleans_dates() -> None:
    assert field(b"\x00\xff", BytesType()) == b"2:\x00\xff"
    assert field(b"", BytesType(), empty_string_is_null=True) == b"N"
    assert field(True, BooleanType()) == b"1:1"
    assert field(0, BooleanType()) == b"1:0"
    assert field(dt.date(1969, 12, 31), DateType()) == b"2:-1"
    assert field(dt.date(2000, 1, 1), DateType()) == b"5:10957"


def test_time_of_day_and_durations() -> None:
    assert field(dt.time(0, 0, 1), TimeType()) == b"7:1000000"
    assert field(dt.timedelta(hours=-1), TimeType()) == b"11:-3600000000"
    assert field(dt.time(10, 0, 0, 999500), TimeType(3)) == b"11:36001000000"


def test_timestamp_precision_rounding_and_truncation() -> None:
    before_epoch = dt.datetime(1969, 12, 31, 23, 59, 59, 999500)  # -500 µs
    ts = TimestampType()
    assert field(before_epoch, ts, timestamp_precision=3) == b"1:0"  # half goes later
    assert field(before_epoch, ts, timestamp_precision=3, timestamp_rounding="truncate") == (
        b"5:-1000"
    )
    almost = dt.datetime(2020, 6, 30, 23, 59, 59, 999999)
    assert field(almost, ts, timestamp_precision=0) == field(dt.datetime(2020, 7, 1), ts)
    # the column's own precision caps the option
    assert field(dt.datetime(2020, 1, 1, 0, 0, 0, 123500), TimestampType(3)) == field(
        dt.datetime(2020, 1, 1, 0, 0, 0, 124000), TimestampType(6)
    )


def test_timestamp_tz_is_the_instant_whatever_the_zone() -> None:
    utc = dt.datetime(2024, 3, 10, 7, 30, tzinfo=dt.UTC)
    eastern = utc.astimezone(dt.timezone(dt.timedelta(hours=-5)))
    assert field(utc, TimestampTzType()) == field(eastern, TimestampTzType())
    with pytest.raises(ContractError, match="naive"):
        field(dt.datetime(2024, 1, 1), TimestampTzType())
    with pytest.raises(ContractError, match="aware"):
        field(utc, TimestampType())


def test_json_sorts_keys_and_normalises_numbers() -> None:
    js = JsonType()
    assert field('{"b": 1, "a": [1.50, 2e3]}', js) == b'22:{"a":[1.5,2000],"b":1}'
    assert field('{"a":2000,"b":1.0}', js) == field({"b": 1, "a": D("2E+3")}, js)
    assert field('"\\u00e9"', js) == field('"é"', js)
    assert field('"\\u0001"', js) == b'8:"\\u0001"'
    assert field("null", js) == b"4:null"  # a JSON null document is not SQL NULL
    with pytest.raises(ContractError, match="invalid JSON"):
        field("{not json", js)


def test_uuid_spellings_agree() -> None:
    value = uuid.UUID("123e4567-e89b-12d3-a456-426614174000")
    expected = b"32:123e4567e89b12d3a456426614174000"
    assert field(value, UuidType()) == expected
    assert field(str(value).upper(), UuidType()) == expected
    assert field("{" + str(value) + "}", UuidType()) == expected
    assert field(value.bytes, UuidType()) == expected


def test_intervals_fold_days_but_not_months() -> None:
    day = dt.timedelta(days=1)
    assert field(day, IntervalType()) == field(dt.timedelta(hours=24), IntervalType())
    assert (
        field(Interval(days=1), IntervalType())
        == field(day, IntervalType())
        == (b"13:0,86400000000")
    )
    assert field(Interval(months=1), IntervalType()) != field(Interval(days=30), IntervalType())


def _clock(hour: int, minute: int, offset_minutes: int, micro: int = 0) -> dt.time:
    zone = dt.timezone(dt.timedelta(minutes=offset_minutes))
    return dt.time(hour, minute, 0, micro, tzinfo=zone)


def test_time_tz_keeps_wall_clock_and_offset() -> None:
    assert field(_clock(12, 0, 150), TimeTzType()) == b"16:43200000000,9000"
    assert field(_clock(12, 0, -210), TimeTzType()) == b"18:43200000000,-12600"
    # The same instant of the day in two zones differs, as PostgreSQL's timetz equality says.
    assert field(_clock(12, 0, 120), TimeTzType()) != field(_clock(11, 0, 60), TimeTzType())
    # The struct readers produce (a mapping from Arrow, a pair from Spark) is the same value.
    struct = {"micros": 43_200_000_000, "offset_seconds": 9000}
    assert field(struct, TimeTzType()) == field((43_200_000_000, 9000), TimeTzType())
    assert field(struct, TimeTzType()) == field(_clock(12, 0, 150), TimeTzType())
    assert field({"micros": 86_400_000_000, "offset_seconds": 0}, TimeTzType()) == (
        b"13:86400000000,0"  # 24:00:00+00, which datetime.time cannot hold
    )


def test_time_tz_rounds_the_clock_never_the_offset() -> None:
    half = _clock(10, 0, -90, 500_000)
    assert field(half, TimeTzType(6), timestamp_precision=0) == b"17:36001000000,-5400"
    truncated = field(half, TimeTzType(6), timestamp_precision=0, timestamp_rounding="truncate")
    assert truncated == b"17:36000000000,-5400"
    assert field(_clock(10, 0, 0, 1), TimeTzType()) != field(_clock(10, 0, 0), TimeTzType())
    assert field(_clock(10, 0, 1), TimeTzType()) != field(_clock(10, 0, 0), TimeTzType())


def test_time_tz_needs_an_offset() -> None:
    with pytest.raises(ContractError, match="without a UTC offset"):
        field(dt.time(12), TimeTzType())
    with pytest.raises(ContractError, match="cannot encode a str"):
        field("12:00+02", TimeTzType())


def test_arrays_count_and_frame_every_element() -> None:
    integers = ArrayType(IntegerType())
    assert field([1, None, 23], integers) == b"10:3:1:1N2:23"
    assert field([], integers) == b"2:0:"
    assert field(None, integers) == b"N"
    assert field([None], integers) == b"3:1:N"
    # Element boundaries and the column boundary stay apart.
    texts = ArrayType(StringType())
    assert field(["a", "b"], texts) != field(["ab"], texts) != field(["a,b"], texts)
    assert row([["a", "b"], []], [texts, texts]) != row([["a"], ["b"]], [texts, texts])
    assert row([[], ["a"]], [texts, texts]) != row([["a"], []], [texts, texts])
    assert field([12, 3], integers) != field([1, 23], integers)
    assert field([1, 2], integers) != field([2, 1], integers)  # order counts


def test_array_elements_follow_their_type_and_the_options() -> None:
    assert field(["", "x"], ArrayType(StringType()), empty_string_is_null=True) == b"6:2:N1:x"
    assert field([D("1.10")], ArrayType(DecimalType(10, 2))) == b"7:1:3:1.1"
    stamps = ArrayType(TimestampType(6))
    first = [dt.datetime(2020, 1, 1, 0, 0, 0, 123456)]
    assert field(first, stamps, timestamp_precision=3) == field(
        [dt.datetime(2020, 1, 1, 0, 0, 0, 123000)], stamps
    )
    nested = ArrayType(ArrayType(IntegerType()))
    assert field([[1, 2], None, []], nested) == b"17:3:8:2:1:11:2N2:0:"


def test_arrays_need_a_list() -> None:
    with pytest.raises(ContractError, match="cannot encode a str as array<string>"):
        field("{a,b}", ArrayType(StringType()))


def test_wrong_python_types_name_the_type_not_the_value() -> None:
    with pytest.raises(ContractError) as excinfo:
        field("secret-value", IntegerType())
    assert "str" in str(excinfo.value)
    assert "secret-value" not in str(excinfo.value)


def test_row_encoder_checks_arity() -> None:
    with pytest.raises(ContractError, match="2 values for 1 columns"):
        row([1, 2], [IntegerType()])


@pytest.mark.parametrize(
    "text",
    [
        "integer",
        "decimal(10,2)",
        "decimal",
        "float32",
        "float64",
        "string",
        "char",
        "bytes",
        "boolean",
        "date",
        "time(3)",
        "timestamp(6)",
        "timestamp_tz(0)",
        "json",
        "uuid",
        "interval",
        "time_tz(6)",
        "time_tz(0)",
        "array<integer>",
        "array<decimal(10,2)>",
        "array<time_tz(3)>",
        "array<array<char>>",
    ],
)
def test_logical_type_text_round_trips(text: str) -> None:
    assert str(parse_logical_type(text)) == text


@pytest.mark.parametrize(
    "text",
    [
        "decimal(5,7)",
        "timestamp(7)",
        "float16",
        "varchar",
        "int(",
        "array<>",
        "array<int>",
        "time_tz(7)",
    ],
)
def test_bad_logical_types_are_rejected(text: str) -> None:
    with pytest.raises(ContractError):
        parse_logical_type(text)


def test_options_are_validated() -> None:
    with pytest.raises(ContractError):
        ComparisonOptions(timestamp_precision=7)
    with pytest.raises(ContractError):
        ComparisonOptions(float_digits=0)
    with pytest.raises(ContractError, match=r"sideways.*round, truncate, half_away_from_1970"):
        ComparisonOptions(timestamp_rounding="sideways")  # type: ignore[arg-type]
