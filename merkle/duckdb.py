"""The MD5 flavour of the hash contract as DuckDB SQL over a lake's Arrow-typed columns.

The local engine (``validator.engines.local``) reads a lake with DuckDB and hashes it as a
source database hashes its own rows (``connectors.pushdown``): the canonical payloads of
``merkle.canonical``, framed as fields, hashed with ``merkle.hashing.md5_hash64``. This
module mirrors ``merkle.spark`` function by function, but writes SQL text: it runs no
query (``merkle`` does no I/O) and needs no DuckDB to import.

A column is described by its Arrow type (as ``deltalake`` reports the lake's schema: DuckDB
reads Parquet into the matching types) and its logical type. Payloads are ``BLOB`` (a
``bytes`` payload need not be UTF-8), NULL where the field is NULL.

``json`` text is canonicalised by the SQL of ``merkle.duckdb_json``, written from the
contract's rule independently of ``merkle.canonical``'s code (a document nested deeper than
its ``MAX_JSON_DEPTH`` raises an error when the query runs). Whatever DuckDB cannot compute
bit for bit raises ``NotInDuckDB`` (the validator then hashes the lake in Spark):
``float_digits`` (IEEE steps written out in ``merkle.spark``), ``case_insensitive`` (DuckDB
lower-cases Unicode by its own tables), and any Arrow type a logical type has no rule for.
Functions: https://duckdb.org/docs/sql/functions/overview .
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa

from cdc_core.errors import ContractError
from merkle.canonical import NULL_MARKER, rounding_epoch
from merkle.duckdb_json import json_text_sql
from merkle.layout import ColumnSpec, RowLayout
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

# Java's Double.doubleToLongBits of every NaN (merkle.canonical): DuckDB keeps a NaN's bits.
_CANONICAL_NAN_BITS = 9221120237041090560
_MICROS_PER_MONTH = 30 * 86_400_000_000  # how DuckDB's epoch_us counts an interval's month
# Lambda parameters of nested arrays get their own names (x0, x1, ...): DuckDB binds a
# lambda's parameter by name, and an inner one must not hide an outer one.
_LAMBDA = "x{}"


class NotInDuckDB(ContractError):
    """DuckDB cannot compute this part of the hash contract exactly (a type, an option)."""


def quote(name: str) -> str:
    """A DuckDB identifier: double quotes, inner quotes doubled."""
    return '"' + name.replace('"', '""') + '"'


def _unsupported(ltype: LogicalType, dtype: pa.DataType) -> NotInDuckDB:
    return NotInDuckDB(f"cannot hash an Arrow {dtype} column as {ltype} in DuckDB")


def _text(sql: str) -> str:
    """The UTF-8 bytes of a text expression (NULL stays NULL)."""
    return f"encode({sql})"


def _decimal_payload(value: str, dtype: pa.DataType) -> str:
    # A DECIMAL's text has exactly its scale's digits after the point, and zero has no sign
    # (DuckDB stores the unscaled integer): trailing zeros then a bare point go, so "1.10"
    # is "1.1" and "0.00" is "0". An integer's text is already canonical.
    text = f"CAST({value} AS VARCHAR)"
    if pa.types.is_decimal(dtype) and dtype.scale == dtype.precision:
        text = f"regexp_replace({text}, '^(-?)[.]', '\\10.')"  # DuckDB writes ".5" here
    if pa.types.is_decimal(dtype) and dtype.scale > 0:
        text = f"rtrim(rtrim({text}, '0'), '.')"
    return _text(text)


def _float_payload(value: str, options: ComparisonOptions) -> str:
    if options.float_digits is not None:
        raise NotInDuckDB("float_digits rounds with IEEE steps only Python and Spark write out")
    # A FLOAT column widens to DOUBLE exactly; its bits then are the contract's. Zero
    # (either sign) and NaN (any payload) are written apart, as doubleToLongBits does.
    x = f"CAST({value} AS DOUBLE)"
    bits = (
        f"CASE WHEN isnan({x}) THEN {_CANONICAL_NAN_BITS} WHEN {x} = 0 THEN 0"
        f" ELSE CAST(CAST({x} AS BIT) AS BIGINT) END"
    )
    return _text(f"CAST({bits} AS VARCHAR)")


def _floor_to(micros: str, unit: int) -> str:
    # DuckDB's % keeps the dividend's sign: add a unit and take it again to floor below zero.
    return f"({micros} - ((({micros}) % {unit}) + {unit}) % {unit})"


def reduce_micros(micros: str, digits: int, rounding: TimeRounding, epoch: int) -> str:
    """``merkle.canonical.reduce_micros`` in DuckDB SQL (``micros`` an integer expression)."""
    unit = 10 ** (6 - digits)
    if unit == 1:
        return micros
    half = unit // 2
    if rounding is TimeRounding.ROUND:
        return _floor_to(f"({micros} + {half})", unit)
    if rounding is TimeRounding.TRUNCATE:
        return _floor_to(micros, unit)
    offset = f"({micros} - {epoch})"
    magnitude = _floor_to(f"(abs({offset}) + {half})", unit)
    return f"({epoch} + CASE WHEN {offset} >= 0 THEN {magnitude} ELSE -{magnitude} END)"


def _interval_micros(value: str) -> str:
    """Microseconds of a DuckDB INTERVAL without months (an Arrow duration)."""
    return f"epoch_us({value})"


def _time_micros(value: str, dtype: pa.DataType, ltype: LogicalType) -> str:
    if pa.types.is_time(dtype) and dtype.unit in ("s", "ms", "us"):
        return f"epoch_us({value})"
    if pa.types.is_duration(dtype) and dtype.unit in ("s", "ms", "us"):
        return _interval_micros(value)
    if pa.types.is_integer(dtype):
        return f"CAST({value} AS BIGINT)"
    raise _unsupported(ltype, dtype)


def _instant_micros(value: str, dtype: pa.DataType, ltype: LogicalType) -> str:
    # Nanoseconds would be truncated by epoch_us, not reduced by the contract's rule.
    # epoch_us of a TIMESTAMP reads its wall clock as UTC; of a TIMESTAMPTZ it is the
    # instant: neither depends on the connection's TimeZone setting.
    timestamp = pa.types.is_timestamp(dtype) and dtype.unit in ("s", "ms", "us")
    if timestamp and (dtype.tz is not None or isinstance(ltype, TimestampType)):
        return f"epoch_us({value})"
    raise _unsupported(ltype, dtype)


def _temporal_payload(
    value: str, dtype: pa.DataType, ltype: LogicalType, options: ComparisonOptions
) -> str:
    micros = (
        _time_micros(value, dtype, ltype)
        if isinstance(ltype, TimeType)
        else _instant_micros(value, dtype, ltype)
    )
    rounding = options.rounding
    epoch = rounding_epoch(rounding, ltype)
    reduced = reduce_micros(micros, options.fraction_digits(ltype), rounding, epoch)
    return _text(f"CAST({reduced} AS VARCHAR)")


def _string_payload(value: str, ltype: StringType, options: ComparisonOptions) -> str:
    if options.case_insensitive:
        raise NotInDuckDB("case_insensitive: DuckDB lower-cases Unicode by its own rules")
    if options.trim_char and ltype.padded:
        value = f"rtrim({value}, ' ')"  # U+0020 only, as the contract says
    if options.empty_string_is_null:
        value = f"nullif({value}, '')"
    return _text(value)


def _bytes_payload(value: str, options: ComparisonOptions) -> str:
    if options.empty_string_is_null:
        return f"CASE WHEN octet_length({value}) > 0 THEN {value} END"
    return value


def _boolean_payload(value: str, dtype: pa.DataType, ltype: LogicalType) -> str:
    if pa.types.is_boolean(dtype):
        return _text(f"CASE WHEN {value} THEN '1' WHEN NOT {value} THEN '0' END")
    if pa.types.is_integer(dtype):  # a TINYINT(1): true when not zero
        return _text(f"CASE WHEN {value} <> 0 THEN '1' WHEN {value} = 0 THEN '0' END")
    raise _unsupported(ltype, dtype)


def _uuid_payload(value: str, dtype: pa.DataType, ltype: LogicalType) -> str:
    if pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype):
        return _text(f"lower(hex({value}))")
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype):
        bare = f"regexp_replace(lower(trim({value})), '^urn:uuid:|[{{}}\\-]', '', 'g')"
        return _text(bare)
    raise _unsupported(ltype, dtype)


def _interval_payload(value: str, dtype: pa.DataType, ltype: LogicalType) -> str:
    if pa.types.is_duration(dtype) and dtype.unit in ("s", "ms", "us"):
        return _text(f"'0,' || CAST({_interval_micros(value)} AS VARCHAR)")
    if pa.types.is_interval(dtype):
        # epoch_us counts a month as 30 days; the contract keeps months apart and counts a
        # day as 86,400 s. Nanoseconds below a microsecond are dropped by DuckDB's reader.
        months = f"(datepart('year', {value}) * 12 + datepart('month', {value}))"
        micros = f"(epoch_us({value}) - {months} * {_MICROS_PER_MONTH})"
        return _text(f"CAST({months} AS VARCHAR) || ',' || CAST({micros} AS VARCHAR)")
    raise _unsupported(ltype, dtype)


def _time_tz_payload(
    value: str, dtype: pa.DataType, ltype: TimeTzType, options: ComparisonOptions
) -> str:
    """``<micros>,<offset>`` of the struct readers produce (``merkle.types.TimeTzType``)."""
    if not pa.types.is_struct(dtype) or tuple(f.name for f in dtype) != TIME_TZ_FIELDS:
        raise _unsupported(ltype, dtype)
    micros_name, offset_name = TIME_TZ_FIELDS
    micros_type = dtype.field(micros_name).type
    field_of = f"struct_extract({value}, '{{}}')"
    micros = _time_micros(field_of.format(micros_name), micros_type, ltype)
    reduced = reduce_micros(micros, options.fraction_digits(ltype), options.rounding, 0)
    offset = f"CAST({field_of.format(offset_name)} AS VARCHAR)"
    return _text(f"CAST({reduced} AS VARCHAR) || ',' || {offset}")


def _array_payload(
    value: str, dtype: pa.DataType, ltype: ArrayType, options: ComparisonOptions, depth: int
) -> str:
    """``<count>:`` and each element as a field (``merkle.canonical``, ``array``)."""
    if not (pa.types.is_list(dtype) or pa.types.is_large_list(dtype)):
        raise _unsupported(ltype, dtype)
    item = _LAMBDA.format(depth)
    element = field_sql(_payload(item, dtype.value_type, ltype.element, options, depth + 1))
    fields = f"list_transform({value}, lambda {item}: {element})"
    # list_reduce needs one element: an empty BLOB first makes "[]" the empty fields.
    joined = f"list_reduce(list_prepend(''::BLOB, {fields}), lambda a, b: a || b)"
    count = _text(f"CAST(len({value}) AS VARCHAR) || ':'")
    return f"CASE WHEN {value} IS NOT NULL THEN {count} || {joined} END"


def _is_text(dtype: pa.DataType) -> bool:
    return pa.types.is_string(dtype) or pa.types.is_large_string(dtype)


def _is_binary(dtype: pa.DataType) -> bool:
    return pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype)


def _payload(
    value: str, dtype: pa.DataType, ltype: LogicalType, options: ComparisonOptions, depth: int
) -> str:
    # decimal256 is not read by DuckDB as a DECIMAL (it has no precision above 38).
    if isinstance(ltype, IntegerType):
        if pa.types.is_integer(dtype):
            return _text(f"CAST({value} AS VARCHAR)")
        if pa.types.is_decimal128(dtype):
            return _decimal_payload(value, dtype)
    elif isinstance(ltype, DecimalType):
        if pa.types.is_integer(dtype) or pa.types.is_decimal128(dtype):
            return _decimal_payload(value, dtype)
    elif isinstance(ltype, FloatType):
        if pa.types.is_floating(dtype) and not pa.types.is_float16(dtype):
            return _float_payload(value, options)
    elif isinstance(ltype, StringType):
        if _is_text(dtype):
            return _string_payload(value, ltype, options)
    elif isinstance(ltype, BytesType):
        if _is_binary(dtype):
            return _bytes_payload(value, options)
    elif isinstance(ltype, BooleanType):
        return _boolean_payload(value, dtype, ltype)
    elif isinstance(ltype, DateType):
        if pa.types.is_date(dtype):
            return _text(f"CAST(({value} - DATE '1970-01-01') AS VARCHAR)")
    elif isinstance(ltype, TimeType | TimestampType | TimestampTzType):
        return _temporal_payload(value, dtype, ltype, options)
    elif isinstance(ltype, JsonType):
        if _is_text(dtype):
            return _text(json_text_sql(value))
    elif isinstance(ltype, UuidType):
        return _uuid_payload(value, dtype, ltype)
    elif isinstance(ltype, IntervalType):
        return _interval_payload(value, dtype, ltype)
    elif isinstance(ltype, TimeTzType):
        return _time_tz_payload(value, dtype, ltype, options)
    elif isinstance(ltype, ArrayType):
        return _array_payload(value, dtype, ltype, options, depth)
    raise _unsupported(ltype, dtype)


def payload_sql(
    value: str, dtype: pa.DataType, ltype: LogicalType, options: ComparisonOptions
) -> str:
    """SQL of one column's payload bytes (NULL where the field is NULL), per
    ``merkle.canonical``; ``value`` is the column's SQL (a quoted name).

    Raises:
        NotInDuckDB: DuckDB cannot compute it exactly.
    """
    return _payload(value, dtype, ltype, options, 0)


def field_sql(payload: str) -> str:
    """Frame a payload as a field: ``<length>:<payload>``, or the NULL marker. The payload
    is written twice, not three times: a long one (``json``) costs DuckDB time and memory
    to bind for every copy, and arrays frame each element again."""
    marker = NULL_MARKER.decode("ascii")
    prefix = f"encode(CAST(octet_length({payload}) AS VARCHAR) || ':')"
    return f"coalesce({prefix} || ({payload}), '{marker}'::BLOB)"  # NULL || x is NULL


def _fields(
    specs: tuple[ColumnSpec, ...], types: Mapping[str, pa.DataType], options: ComparisonOptions
) -> str:
    fields = []
    for spec in specs:
        if spec.name not in types:
            raise ContractError(f"column {spec.name!r} is not in the lake's schema")
        payload = payload_sql(quote(spec.name), types[spec.name], spec.ltype, options)
        fields.append(field_sql(payload))
    return " || ".join(fields)


def row_bytes_sql(layout: RowLayout, types: Mapping[str, pa.DataType]) -> str:
    """SQL of each row's canonical bytes (columns named as in the layout; ``types`` their
    Arrow types)."""
    return _fields(layout.columns, types, layout.options)


def key_bytes_sql(layout: RowLayout, types: Mapping[str, pa.DataType]) -> str:
    """SQL of each row's canonical key bytes."""
    return _fields(layout.key_columns, types, layout.options)


def md5_unsigned64_sql(data: str) -> str:
    """The first 8 bytes of MD5 of ``data`` as a UBIGINT: ``merkle.hashing.md5_hash64``
    mod 2**64, which is all a leaf digest (a sum mod 2**64) or a leaf needs."""
    return f"CAST('0x' || md5({data})[1:16] AS UBIGINT)"


def md5_hash64_sql(data: str) -> str:
    """``merkle.hashing.md5_hash64`` of ``data`` (BLOB): the first 8 bytes of its MD5,
    big-endian, as a signed BIGINT."""
    # (u xor 2**63) - 2**63 is u below 2**63 and u - 2**64 above: ``data`` written once.
    flipped = f"xor({md5_unsigned64_sql(data)}, CAST({1 << 63} AS UBIGINT))"
    return f"CAST(CAST({flipped} AS HUGEINT) - {1 << 63} AS BIGINT)"


def hash_leaf_sql(key_bytes: str, depth: int) -> str:
    """The leaf of a key under hash leaves: the top ``depth`` bits of its MD5 hash."""
    if depth == 0:
        return "CAST(0 AS BIGINT)"
    return f"CAST({md5_unsigned64_sql(key_bytes)} >> {64 - depth} AS BIGINT)"


def check_layout(layout: RowLayout, types: Mapping[str, pa.DataType]) -> None:
    """Raise ``NotInDuckDB`` unless every compared column can be hashed in DuckDB."""
    row_bytes_sql(layout, types)


__all__ = [
    "NotInDuckDB",
    "check_layout",
    "field_sql",
    "hash_leaf_sql",
    "key_bytes_sql",
    "md5_hash64_sql",
    "md5_unsigned64_sql",
    "payload_sql",
    "quote",
    "reduce_micros",
    "row_bytes_sql",
]
