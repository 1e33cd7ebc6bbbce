"""The hash contract as Spark SQL expressions (see ``merkle.canonical`` for the rules).

Every logical type except ``json`` is computed natively, with no Python UDF: canonical
bytes are built with ``concat``/``encode``, hashed with Spark's ``xxhash64`` (seed 42,
one binary argument), and leaf digests are one GROUP BY. ``json`` goes through an Arrow
UDF that runs ``merkle.canonical.json_text``, because Spark SQL cannot re-serialise a JSON
document with normalised numbers (its VARIANT keeps ``2e3`` and ``2000`` apart).

An array's elements are encoded by the same rules inside ``transform`` and joined with
``aggregate``; a Python UDF cannot run inside a higher-order function, so an array whose
elements are JSON documents is encoded whole by one Arrow UDF. A ``time_tz`` column is
the struct ``merkle.types.TIME_TZ_FIELDS`` names.

Spark 4 runs in ANSI mode, where ``sum`` of 64-bit hashes raises on overflow: each hash is
split into a signed upper and an unsigned lower 32-bit half, the halves are summed as
longs, and the wrapping sum is put back together with bit operations.

The MD5 flavour (``merkle.hashing.md5_hash64``, what databases compute) is Spark's native
``md5`` of the same bytes: its first 16 hex digits are read as two unsigned 32-bit halves
and joined with bit operations, which wrap where ANSI arithmetic would raise.

The session time zone must be UTC: ``timestamp`` (no zone) values are read as wall clocks
through Spark's session zone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from cdc_core.drivers import driver_import
from cdc_core.errors import ContractError
from cdc_core.names import backtick_quote
from merkle.canonical import NULL_MARKER, POW10_STEP, payload_encoder, rounding_epoch
from merkle.layout import ColumnSpec, RowLayout
from merkle.options import ComparisonOptions, TimeRounding
from merkle.tree import LeafDigest
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

with driver_import("Spark-native hashing"):
    from pyspark.sql import Column, DataFrame
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

if TYPE_CHECKING:
    from collections.abc import Callable

KEY_HASH = "_key_hash"
ROW_HASH = "_row_hash"
LEAF = "_leaf"
_LOW32 = 0xFFFFFFFF


def _text(column: Column) -> Column:
    return column.cast("binary")  # the UTF-8 bytes, cheaper than encode(column, 'UTF-8')


def _unsupported(ltype: LogicalType, dtype: T.DataType) -> ContractError:
    return ContractError(f"cannot hash a Spark {dtype.simpleString()} column as {ltype}")


def _decimal_payload(value: Column, dtype: T.DataType) -> Column:
    text = value.cast("string")  # plain notation, never an exponent
    if isinstance(dtype, T.DecimalType) and dtype.scale > 0:
        # Trailing zeros, then a bare point: "1.10" -> "1.1", "1.00" -> "1". Not the
        # two-argument rtrim(str, trimStr), which Spark 4 deprecates (a WARN per query).
        text = F.regexp_replace(text, r"\.?0*$", "")
    # signum, not "= 0": comparing DECIMAL(38,38) with 0 widens it and rounds 1e-38 to 0
    return _text(F.when(F.signum(value) == 0, F.lit("0")).otherwise(text))


def _let(value: Column, body: Callable[[Column], Column]) -> Column:
    """Bind ``value`` once for ``body``: Spark SQL has no LET, and an expression used twice
    is copied twice into the plan, which grows exponentially when such steps nest."""
    return F.transform(F.array(value), body).getItem(0)


def _scale_by_pow10(magnitude: Column, power: Column) -> Column:
    """``merkle.canonical.scale_by_pow10``: the same IEEE operations in the same order."""
    size = F.abs(power)
    steps = F.floor(size / F.lit(POW10_STEP)).cast("int")
    exact = F.pow(F.lit(10.0), size - steps * F.lit(POW10_STEP))  # Math.pow is exact here
    repeats = F.array_repeat(F.lit(1e22), steps)
    up = F.aggregate(repeats, magnitude * exact, lambda acc, factor: acc * factor)
    down = F.aggregate(repeats, magnitude / exact, lambda acc, factor: acc / factor)
    return F.when(power >= 0, up).otherwise(down)


def _digits_float_text(x: Column, digits: int) -> Column:
    top, bottom = F.lit(float(10**digits)), F.lit(float(10 ** (digits - 1)))

    def scaled(ax: Column, exponent: Column) -> Column:
        return _scale_by_pow10(ax, F.lit(digits - 1) - exponent)

    def corrected(ax: Column, guess: Column) -> Column:
        return _let(
            scaled(ax, guess),
            lambda first: (
                F.when(first >= top, guess + 1).when(first < bottom, guess - 1).otherwise(guess)
            ),
        )

    def text(exponent: Column, mantissa: Column) -> Column:
        carried = mantissa >= F.lit(10**digits)
        return F.concat(
            F.when(carried, F.lit(10 ** (digits - 1))).otherwise(mantissa).cast("string"),
            F.lit("e"),
            F.when(carried, exponent + 1).otherwise(exponent).cast("string"),
        )

    def from_magnitude(ax: Column) -> Column:
        return _let(
            corrected(ax, F.floor(F.log10(ax))),
            lambda exponent: _let(
                F.rint(scaled(ax, exponent)).cast("bigint"),
                lambda mantissa: text(exponent, mantissa),
            ),
        )

    return _let(F.abs(x), from_magnitude)


def _float_payload(value: Column, ltype: FloatType, digits: int | None) -> Column:
    if ltype.bits == 32:
        value = value.cast("float")  # narrow as the column stores it (IEEE half-even)
    x = value.cast("double")
    if digits is None:
        unsigned_zero = F.when(x == 0, F.lit(0.0)).otherwise(x)
        # One reflective call is far cheaper than rebuilding the bits with log2 and pow;
        # reflection cannot pass NULL to a primitive parameter, hence the guard.
        bits = F.reflect(F.lit("java.lang.Double"), F.lit("doubleToLongBits"), unsigned_zero)
        return F.when(x.isNotNull(), bits.cast("binary"))
    magnitude = _digits_float_text(x, digits)
    text = (
        F.when(F.isnan(x), F.lit("NaN"))
        .when(x == float("inf"), F.lit("Infinity"))
        .when(x == float("-inf"), F.lit("-Infinity"))
        .when(x == 0, F.lit("0"))
        .otherwise(F.concat(F.when(x < 0, F.lit("-")).otherwise(F.lit("")), magnitude))
    )
    return _text(text)


def _floor_to(micros: Column, unit: int) -> Column:
    return micros - F.pmod(micros, F.lit(unit))  # floor to a multiple, also below zero


def _reduce_micros(micros: Column, digits: int, rounding: TimeRounding, epoch: int) -> Column:
    """``merkle.canonical.reduce_micros`` as a Spark expression."""
    unit = 10 ** (6 - digits)
    if unit == 1:
        return micros
    half = F.lit(unit // 2)
    if rounding is TimeRounding.ROUND:
        return _floor_to(micros + half, unit)
    if rounding is TimeRounding.TRUNCATE:
        return _floor_to(micros, unit)

    def away(offset: Column) -> Column:
        magnitude = _floor_to(F.abs(offset) + half, unit)
        return F.lit(epoch) + F.when(offset >= 0, magnitude).otherwise(-magnitude)

    return _let(micros - F.lit(epoch), away)


def _time_micros(value: Column, dtype: T.DataType, ltype: LogicalType) -> Column:
    if isinstance(dtype, T.TimeType):
        return F.unix_micros(F.make_timestamp(date=F.lit("1970-01-01").cast("date"), time=value))
    if isinstance(dtype, T.DayTimeIntervalType):
        return F.unix_micros(F.timestamp_micros(F.lit(0)) + value)
    if isinstance(dtype, T.IntegralType):
        return value.cast("bigint")
    raise _unsupported(ltype, dtype)


def _instant_micros(value: Column, dtype: T.DataType, ltype: LogicalType) -> Column:
    if isinstance(dtype, T.TimestampType):
        return F.unix_micros(value)
    if isinstance(dtype, T.TimestampNTZType) and isinstance(ltype, TimestampType):
        return F.unix_micros(value.cast("timestamp"))  # wall clock read in the UTC session
    raise _unsupported(ltype, dtype)


def _string_payload(value: Column, ltype: StringType, options: ComparisonOptions) -> Column:
    if options.trim_char and ltype.padded:
        value = F.rtrim(value)
    if options.empty_string_is_null:
        value = F.when(value != "", value)
    if options.case_insensitive:
        value = F.lower(value)
    return _text(value)


def _uuid_payload(value: Column, dtype: T.DataType, ltype: LogicalType) -> Column:
    if isinstance(dtype, T.BinaryType):
        return _text(F.lower(F.hex(value)))
    if isinstance(dtype, T.StringType):
        bare = F.regexp_replace(F.lower(F.trim(value)), r"^urn:uuid:|[{}\-]", "")
        return _text(bare)
    raise _unsupported(ltype, dtype)


def _interval_payload(value: Column, dtype: T.DataType, ltype: LogicalType) -> Column:
    if isinstance(dtype, T.YearMonthIntervalType):
        return _text(F.concat(value.cast("bigint").cast("string"), F.lit(",0")))
    if isinstance(dtype, T.DayTimeIntervalType):
        micros = F.unix_micros(F.timestamp_micros(F.lit(0)) + value)
        return _text(F.concat(F.lit("0,"), micros.cast("string")))
    raise _unsupported(ltype, dtype)


def _python_payloads(ltype: LogicalType, options: ComparisonOptions) -> Callable[[Column], Column]:
    """An Arrow UDF computing payloads with ``merkle.canonical`` (columns holding JSON)."""

    def payloads(values: pa.Array) -> pa.Array:
        encode = payload_encoder(ltype, options)
        rows = values.to_pylist()
        return pa.array([None if v is None else encode(v) for v in rows], pa.binary())

    udf: Callable[[Column], Column] = F.arrow_udf(  # type: ignore[call-overload]
        payloads, T.BinaryType()
    )
    return udf


def _holds_json(ltype: LogicalType) -> bool:
    return isinstance(ltype, JsonType) or (
        isinstance(ltype, ArrayType) and _holds_json(ltype.element)
    )


def _time_tz_payload(
    value: Column, dtype: T.DataType, ltype: TimeTzType, options: ComparisonOptions
) -> Column:
    """``<micros>,<offset>`` of the struct readers produce (``merkle.types.TimeTzType``)."""
    if not isinstance(dtype, T.StructType) or tuple(dtype.names) != TIME_TZ_FIELDS:
        raise _unsupported(ltype, dtype)
    micros_name, offset_name = TIME_TZ_FIELDS
    micros = _time_micros(value.getField(micros_name), dtype[micros_name].dataType, ltype)
    reduced = _reduce_micros(micros, options.fraction_digits(ltype), options.rounding, 0)
    offset = value.getField(offset_name).cast("string")
    return _text(F.concat(reduced.cast("string"), F.lit(","), offset))


def _array_payload(
    value: Column, dtype: T.DataType, ltype: ArrayType, options: ComparisonOptions
) -> Column:
    """``<count>:`` and each element as a field (``merkle.canonical``, ``array``)."""
    if not isinstance(dtype, T.ArrayType):
        raise _unsupported(ltype, dtype)
    if _holds_json(ltype.element):
        return _python_payloads(ltype, options)(value)
    element_type, element = dtype.elementType, ltype.element
    fields = F.transform(
        value, lambda item: field_column(payload_column(item, element_type, element, options))
    )
    joined = F.aggregate(fields, F.lit(b""), lambda done, field: F.concat(done, field))
    count = F.concat(F.size(value).cast("string"), F.lit(":")).cast("binary")
    return F.when(value.isNotNull(), F.concat(count, joined))


def payload_column(
    value: Column, dtype: T.DataType, ltype: LogicalType, options: ComparisonOptions
) -> Column:
    """Payload bytes of one column (NULL where the field is NULL), per ``merkle.canonical``."""
    if isinstance(ltype, IntegerType):
        if isinstance(dtype, T.IntegralType):
            return _text(value.cast("string"))
        if isinstance(dtype, T.DecimalType):
            return _decimal_payload(value, dtype)
    elif isinstance(ltype, DecimalType):
        if isinstance(dtype, T.IntegralType | T.DecimalType):
            return _decimal_payload(value, dtype)
    elif isinstance(ltype, FloatType):
        if isinstance(dtype, T.NumericType):
            return _float_payload(value, ltype, options.float_digits)
    elif isinstance(ltype, StringType):
        if isinstance(dtype, T.StringType):
            return _string_payload(value, ltype, options)
    elif isinstance(ltype, BytesType):
        if isinstance(dtype, T.BinaryType):
            if options.empty_string_is_null:
                return F.when(F.octet_length(value) > 0, value)
            return value
    elif isinstance(ltype, BooleanType):
        if isinstance(dtype, T.BooleanType):
            return _text(F.when(value, F.lit("1")).when(~value, F.lit("0")))  # NULL stays NULL
        if isinstance(dtype, T.IntegralType):  # a TINYINT(1): true when not zero
            return _text(F.when(value != 0, F.lit("1")).when(value == 0, F.lit("0")))
    elif isinstance(ltype, DateType):
        if isinstance(dtype, T.DateType):
            return _text(F.unix_date(value).cast("string"))
    elif isinstance(ltype, TimeType | TimestampType | TimestampTzType):
        micros = (
            _time_micros(value, dtype, ltype)
            if isinstance(ltype, TimeType)
            else _instant_micros(value, dtype, ltype)
        )
        digits = options.fraction_digits(ltype)
        rounding = options.rounding
        reduced = _reduce_micros(micros, digits, rounding, rounding_epoch(rounding, ltype))
        return _text(reduced.cast("string"))
    elif isinstance(ltype, JsonType):
        if isinstance(dtype, T.StringType | T.BinaryType):
            return _python_payloads(ltype, options)(value.cast("string"))
    elif isinstance(ltype, UuidType):
        return _uuid_payload(value, dtype, ltype)
    elif isinstance(ltype, IntervalType):
        return _interval_payload(value, dtype, ltype)
    elif isinstance(ltype, TimeTzType):
        return _time_tz_payload(value, dtype, ltype, options)
    elif isinstance(ltype, ArrayType):
        return _array_payload(value, dtype, ltype, options)
    raise _unsupported(ltype, dtype)


def field_column(payload: Column) -> Column:
    """Frame a payload as a field: ``<length>:<payload>``, or the NULL marker."""
    prefix = F.concat(F.octet_length(payload).cast("string"), F.lit(":")).cast("binary")
    return F.when(payload.isNull(), F.lit(NULL_MARKER)).otherwise(F.concat(prefix, payload))


def _fields(df: DataFrame, specs: tuple[ColumnSpec, ...], options: ComparisonOptions) -> Column:
    types = {field.name: field.dataType for field in df.schema.fields}
    fields = []
    for spec in specs:
        if spec.name not in types:
            raise ContractError(f"column {spec.name!r} is not in the DataFrame")
        payload = payload_column(
            df[backtick_quote(spec.name)], types[spec.name], spec.ltype, options
        )
        fields.append(field_column(payload))
    return F.concat(*fields)


def row_bytes_column(df: DataFrame, layout: RowLayout) -> Column:
    """Canonical row bytes of each row of ``df`` (columns named as in the layout)."""
    return _fields(df, layout.columns, layout.options)


def key_bytes_column(df: DataFrame, layout: RowLayout) -> Column:
    """Canonical key bytes of each row of ``df``."""
    return _fields(df, layout.key_columns, layout.options)


def leaf_column(key_hash: Column, depth: int) -> Column:
    """The leaf of a key hash: its top ``depth`` bits."""
    if depth == 0:
        return F.lit(0).cast("bigint")  # a 64-bit shift is a no-op on the JVM
    return F.shiftrightunsigned(key_hash, 64 - depth)


def md5_hash64_column(data: Column) -> Column:
    """``merkle.hashing.md5_hash64`` of binary ``data``: the first 8 bytes of its MD5,
    big-endian, as a signed 64-bit integer."""
    digest = F.md5(data)  # 32 lower-case hex digits

    def half(start: int) -> Column:
        return F.conv(F.substring(digest, start, 8), 16, 10).cast("bigint")  # < 2**32

    return F.shiftleft(half(1), 32).bitwiseOR(half(9))


def with_md5_hashes(df: DataFrame, layout: RowLayout) -> DataFrame:
    """``df`` plus ``_key_hash`` and ``_row_hash`` in the MD5 flavour of the contract (the
    database engine's hashes), for comparing with digests a database computed."""
    _check_session_zone(df)
    return df.withColumn(KEY_HASH, md5_hash64_column(key_bytes_column(df, layout))).withColumn(
        ROW_HASH, md5_hash64_column(row_bytes_column(df, layout))
    )


def with_hashes(df: DataFrame, layout: RowLayout, depth: int) -> DataFrame:
    """``df`` plus ``_key_hash``, ``_row_hash`` and ``_leaf`` columns."""
    _check_session_zone(df)
    key_hash = F.xxhash64(key_bytes_column(df, layout))
    return (
        df.withColumn(KEY_HASH, key_hash)
        .withColumn(ROW_HASH, F.xxhash64(row_bytes_column(df, layout)))
        .withColumn(LEAF, leaf_column(F.col(KEY_HASH), depth))
    )


def leaf_digest_frame(hashed: DataFrame) -> DataFrame:
    """One row per non-empty leaf: ``_leaf``, ``count``, ``hash_sum`` (signed 64-bit)."""
    row_hash = F.col(ROW_HASH)
    # Narrow first: only the two hash columns travel, and Spark 4.3 cannot aggregate a
    # plan that still carries TIME columns.
    grouped = (
        hashed.select(LEAF, ROW_HASH)
        .groupBy(LEAF)
        .agg(
            F.count(F.lit(1)).alias("count"),
            F.sum(F.shiftright(row_hash, 32)).alias("_high"),
            F.sum(row_hash.bitwiseAND(F.lit(_LOW32))).alias("_low"),
        )
    )
    low, high = F.col("_low"), F.col("_high")
    upper = (high + F.shiftright(low, 32)).bitwiseAND(F.lit(_LOW32))
    hash_sum = F.shiftleft(upper, 32).bitwiseOR(low.bitwiseAND(F.lit(_LOW32)))
    return grouped.select(LEAF, "count", hash_sum.alias("hash_sum"))


def leaf_digests_of_hashed(hashed: DataFrame) -> dict[int, LeafDigest]:
    """Leaf digests of a frame that has ``_leaf`` and ``_row_hash``, collected to the driver."""
    return {
        row[LEAF]: LeafDigest.from_signed(row["count"], row["hash_sum"])
        for row in leaf_digest_frame(hashed).collect()
    }


def leaf_digests(df: DataFrame, layout: RowLayout, depth: int) -> dict[int, LeafDigest]:
    """Leaf digests of ``df`` computed by Spark, collected to the driver."""
    return leaf_digests_of_hashed(with_hashes(df, layout, depth))


def _check_session_zone(df: DataFrame) -> None:
    zone = df.sparkSession.conf.get("spark.sql.session.timeZone")
    if zone not in ("UTC", "Etc/UTC", "+00:00", "Z"):
        raise ContractError(
            f"Spark session time zone is {zone!r}; the hash contract needs "
            "spark.sql.session.timeZone=UTC"
        )


__all__ = [
    "KEY_HASH",
    "LEAF",
    "ROW_HASH",
    "field_column",
    "key_bytes_column",
    "leaf_column",
    "leaf_digest_frame",
    "leaf_digests",
    "leaf_digests_of_hashed",
    "md5_hash64_column",
    "payload_column",
    "row_bytes_column",
    "with_hashes",
    "with_md5_hashes",
]
