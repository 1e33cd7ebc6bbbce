"""PostgreSQL column types: logical types, the SQL that reads them, and their Arrow arrays.

Native types are spelled as ``format_type(atttypid, atttypmod)`` prints them
(``numeric(10,2)``, ``timestamp(3) with time zone``, ``character(5)``, ``integer[]``).
Reference: https://www.postgresql.org/docs/current/datatype.html

Values are read as the hash contract wants them without going through Python's date and
time types: dates as days and times and timestamps as microseconds, computed by
the server with exact ``numeric`` arithmetic (``extract`` returns ``numeric`` since
PostgreSQL 14), so years outside 1..9999 and ``24:00:00`` survive and the session time zone
cannot shift an instant. Arrays and ``time with time zone`` are read in binary, through
their send functions, and decoded as the log reader decodes the stream (``wal_values``):
one decoder for both paths, so a snapshot and the stream cannot disagree.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from cdc_core.errors import TerminalError
from connectors.base import arrow_type_of
from connectors.model import SourceColumn
from connectors.postgres.errors import ValueContext
from connectors.postgres.pgoutput.binary_values import TypeInfo, ValueDecoder, decode_timetz
from merkle import types as lt
from merkle.options import TimeRounding

if TYPE_CHECKING:
    import psycopg
    import pyarrow as pa

# timestamp(p) keeps int64 microseconds since 2000-01-01 and rounds them half away from
# zero (AdjustTimestampForTypmod in src/backend/utils/adt/timestamp.c), so before 2000 an
# exact half goes to the earlier instant; measured on PostgreSQL 15 (tests/merkle/
# test_rounding_rules.py). time(p) counts from midnight and is never negative.
TIMESTAMP_ROUNDING = TimeRounding.HALF_AWAY_FROM_2000

MAX_ARROW_PRECISION = 38  # decimal128, and Spark's DecimalType
# Unconstrained numeric is read as decimal(38,18), the type merkle.golden gives Spark for
# an unconstrained decimal: 20 integer and 18 fractional digits.
UNCONSTRAINED_SCALE = 18

_INTEGERS = {"smallint", "integer", "bigint"}
_RANGES = ("int4", "int8", "num", "date", "ts", "tstz")  # the builtin range types
# Geometric types: their `=` is no equality (box, circle: equal areas; point: none), so
# their columns never locate rows (``snapshot.choose_key``).
GEOMETRIC = ("point", "line", "lseg", "box", "path", "polygon", "circle")
# Network, geometric, range, multirange and interval values are carried as the text their
# output function prints, which reads back as the same value (issue 36). That text depends
# only on DateStyle, TimeZone, extra_float_digits and IntervalStyle (dates and timestamps in
# ranges, floats in geometric types, intervals), which every session of the connector fixes
# (``SESSION_OPTIONS``); the stream prints their binary form the same way (``wal_values``,
# ``text_values``). An interval is three fields (months, days, microseconds) that its `=`
# and any duration fold together ('1 mon' = '30 days'); its ISO 8601 text
# (``P1Y2M3DT4H5M6.000007S``) keeps them apart, each with its own sign, in a standard form
# that names every field it shows, so it reads back as the same three fields.
SESSION_OPTIONS = (
    "-c TimeZone=UTC -c DateStyle=ISO -c extra_float_digits=1 -c IntervalStyle=iso_8601"
)
"""libpq ``options`` of every session that reads values (extra_float_digits above zero:
the shortest float text that reads back exactly; IntervalStyle iso_8601:
``P1Y2M3DT4H5M6.000007S``; https://www.postgresql.org/docs/current/runtime-config-client.html)."""
# money is int64 cents: its text and its numeric cast follow lc_monetary (currency symbol,
# fractional digits), so it is read from cash_send as an exact decimal(19,2) instead; a
# database whose lc_monetary gives another number of digits has its money refused
# (``snapshot.describe_table``).
MONEY_DIGITS = 2
_SIMPLE: dict[str, lt.LogicalType] = {
    "real": lt.FloatType(32),
    "double precision": lt.FloatType(64),
    "text": lt.StringType(),
    "character varying": lt.StringType(),
    "bpchar": lt.StringType(padded=True),  # character without a length
    "character": lt.StringType(padded=True),
    "bytea": lt.BytesType(),
    "boolean": lt.BooleanType(),
    "date": lt.DateType(),
    "json": lt.JsonType(),
    "jsonb": lt.JsonType(),
    "uuid": lt.UuidType(),
    "numeric": lt.DecimalType(),
    "money": lt.DecimalType(19, MONEY_DIGITS),  # read by money_numeric
    **dict.fromkeys(
        (
            *("inet", "cidr", "macaddr", "macaddr8"),
            *GEOMETRIC,
            *(f"{kind}{range_}" for kind in _RANGES for range_ in ("range", "multirange")),
        ),
        lt.StringType(),  # the text the type's output function prints: see below
    ),
}
_FRACTIONAL: dict[str, Callable[[int], lt.LogicalType]] = {
    "time without time zone": lt.TimeType,
    "time with time zone": lt.TimeTzType,
    "timestamp without time zone": lt.TimestampType,
    "timestamp with time zone": lt.TimestampTzType,
}
# "numeric(10,2)", "character varying(20)", "timestamp(3) with time zone", "interval day
# to second(3)": the name with its modifier taken out, and the modifier's numbers.
_MODIFIER = re.compile(r"\((-?\d+)(?:,(-?\d+))?\)")


def logical_type(
    native_type: str, is_enum: bool = False, element: tuple[str, bool] | None = None
) -> lt.LogicalType | None:
    """The logical type of a column spelled by ``format_type``, or None if replcheck cannot
    hash it (text search types, bit strings, user-defined ranges, composites, ...).

    Args:
        native_type: The type, or a domain's base type (``numeric(10,2)``, ``integer[]``).
        is_enum: The type is an enum.
        element: For an array, its element's type spelled the same way (a domain's base)
            and whether that is an enum; None reads the element from ``native_type``.
    """
    if native_type.endswith("]"):
        named = (native_type[: native_type.index("[")], False)
        if (element or named)[0] == "money":
            return None  # array_send would need money[]::numeric[], which lc_monetary sets
        inner = logical_type(*(element or named))
        return None if inner is None else lt.ArrayType(inner)
    if is_enum:
        return lt.StringType()  # compared by label, as replicas usually store it
    match = _MODIFIER.search(native_type)
    name = _MODIFIER.sub("", native_type).strip()
    if name in _INTEGERS:
        return lt.IntegerType()
    if name.startswith("interval"):  # "interval day to second(3)": fields restrict input
        return lt.StringType()  # its ISO 8601 text (SESSION_OPTIONS)
    if name in _FRACTIONAL:
        precision = int(match.group(1)) if match else lt.MAX_FRACTION_DIGITS
        return _FRACTIONAL[name](precision)
    if name == "numeric" and match and match.group(2) is not None:
        return _decimal(int(match.group(1)), int(match.group(2)))
    return _SIMPLE.get(name)


def _decimal(precision: int, scale: int) -> lt.DecimalType:
    """numeric(p,s) as a logical decimal; PostgreSQL 15 also allows a negative scale
    (``numeric(5,-2)`` rounds to hundreds) and a scale above the precision
    (``numeric(3,5)`` holds 0.00123), which become the smallest ``decimal(p,s)`` with
    ``0 <= s <= p`` that holds every value (https://www.postgresql.org/docs/15/datatype-numeric.html)."""
    if scale < 0:
        return lt.DecimalType(precision - scale, 0)
    return lt.DecimalType(max(precision, scale), scale)


def arrow_type(column: SourceColumn) -> pa.DataType:
    """The Arrow type a column is read as (``connectors.base.arrow_type_of``, except that
    decimals wider than Arrow's 38 digits and unconstrained numerics are read as
    decimal128 with a scale chosen here; a value that does not fit raises, never rounds)."""

    if column.ltype is None:
        raise TerminalError(f"column {column.name!r} ({column.native_type}) cannot be read")
    return _arrow_of(column.ltype)


def _arrow_of(ltype: lt.LogicalType) -> pa.DataType:
    import pyarrow as pa

    if isinstance(ltype, lt.ArrayType):
        return pa.list_(_arrow_of(ltype.element))
    if isinstance(ltype, lt.TimeTzType):
        micros, offset = lt.TIME_TZ_FIELDS
        return pa.struct([pa.field(micros, pa.int64()), pa.field(offset, pa.int32())])
    if isinstance(ltype, lt.DecimalType):
        if ltype.precision is None:
            return pa.decimal128(MAX_ARROW_PRECISION, UNCONSTRAINED_SCALE)
        if ltype.precision > MAX_ARROW_PRECISION:
            return pa.decimal128(MAX_ARROW_PRECISION, min(ltype.scale or 0, UNCONSTRAINED_SCALE))
    result: pa.DataType = arrow_type_of(ltype)
    return result


# An array is cast to an array of the builtin type its logical element type reads exactly
# (enum labels as text, a domain as its base type, every integer width as bigint), so that
# array_send names only builtin element types and no catalog lookup is needed to decode it.
# char(n) stays bpchar (text would drop its padding); json and jsonb become the text their
# send functions give (the document as stored; jsonb's normalised form).
_ARRAY_CASTS: dict[type[lt.LogicalType], str] = {
    lt.IntegerType: "bigint",
    lt.DecimalType: "numeric",
    lt.BytesType: "bytea",
    lt.BooleanType: "boolean",
    lt.DateType: "date",
    lt.TimeType: "time",
    lt.TimeTzType: "timetz",
    lt.TimestampType: "timestamp",
    lt.TimestampTzType: "timestamptz",
    lt.JsonType: "text",
    lt.UuidType: "uuid",
}


def _array_cast(element: lt.LogicalType) -> str:
    if isinstance(element, lt.FloatType):
        return "real" if element.bits == 32 else "double precision"
    if isinstance(element, lt.StringType):
        return "bpchar" if element.padded else "text"
    return _ARRAY_CASTS[type(element)]


def money_numeric(value: str) -> str:
    """The exact decimal(19,2) of a ``money`` expression, whatever lc_monetary says: its
    int64 cents from cash_send (as the stream gets them) times 0.01 (a division would
    round: its scale keeps only 16 significant digits)."""
    cents = f"('x' || encode(cash_send({value}), 'hex'))::bit(64)::bigint"
    return f"({cents}::numeric * 0.01)::numeric(19,2)"


def select_expression(column: SourceColumn) -> str:
    """The SQL expression that reads ``column`` in the shape ``to_arrow`` expects."""
    quoted = quote(column.name)
    ltype = column.ltype
    if column.native_type == "money":
        return money_numeric(quoted)
    if isinstance(ltype, lt.ArrayType):
        return f"array_send({quoted}::{_array_cast(ltype.element)}[])"
    if isinstance(ltype, lt.TimeTzType):
        return f"timetz_send({quoted})"
    if isinstance(ltype, lt.DateType):
        return f"({quoted} - DATE '1970-01-01')"  # days since the epoch
    if isinstance(ltype, lt.TimeType | lt.TimestampType | lt.TimestampTzType):
        # time: seconds since midnight; timestamp: the wall clock read as UTC; timestamptz:
        # the instant (https://www.postgresql.org/docs/current/functions-datetime.html).
        return f"(extract(epoch FROM {quoted}) * 1000000)::bigint"
    if isinstance(ltype, lt.JsonType | lt.UuidType) or (
        isinstance(ltype, lt.StringType) and not ltype.padded
    ):
        return f"{quoted}::text"  # the document text, the canonical UUID, an enum's label
    return quoted


def read_intervals_as_text(connection: psycopg.Connection[Any]) -> None:
    """Have ``connection`` return an interval a query selects as is (a key column of the
    digest SQL, a row read by key) as the text the session prints, the column's logical
    value (``SESSION_OPTIONS``): psycopg's own loader parses only IntervalStyle postgres,
    into a ``timedelta`` that folds months into 30 days."""
    from psycopg.types.string import TextLoader

    connection.adapters.register_loader("interval", TextLoader)


def quote(name: str) -> str:
    """A PostgreSQL quoted identifier."""
    return '"' + name.replace('"', '""') + '"'


def _builtin_only(type_oid: int) -> TypeInfo:
    raise TerminalError(f"an array read by a snapshot has elements of type {type_oid}")


_BINARY = ValueDecoder(_builtin_only)  # arrays cast to builtin element types: no lookups


def to_arrow(column: SourceColumn, values: Sequence[Any], table: str) -> pa.Array:
    """An Arrow array of ``arrow_type(column)`` from values read by ``select_expression``."""
    import pyarrow as pa

    target = arrow_type(column)
    where = ValueContext(table, column.name)
    if isinstance(column.ltype, lt.ArrayType):
        return _array_to_arrow(column.ltype, values, target, where)
    if isinstance(column.ltype, lt.TimeTzType):
        decoded = [None if value is None else decode_timetz(value, where) for value in values]
        return pa.array(decoded, target)
    if pa.types.is_decimal(target):
        _check_decimals(values, target, where)
    if isinstance(column.ltype, lt.DateType):
        return pa.array(values, pa.int32()).cast(target)  # days since the epoch
    if isinstance(column.ltype, _MICROSECONDS):
        return pa.array(values, pa.int64()).cast(target)
    return pa.array(values, target)


# Logical types read as microseconds and cast to their Arrow type.
_MICROSECONDS = (lt.TimeType, lt.TimestampType, lt.TimestampTzType)


def _check_decimals(
    values: Sequence[Decimal | None], target: pa.DataType, where: ValueContext
) -> None:
    precision, scale = target.precision, target.scale
    for value in values:
        if value is not None and not decimal_fits(value, precision, scale):
            raise where.error(
                f"a value does not fit Arrow decimal128({precision},{scale}) (NaN, infinity,"
                f" more than {precision - scale} integer or {scale} fractional digits)",
                "declare the column numeric(p,s) with p <= 38, or leave it out of the comparison",
            )


def decimal_fits(value: Decimal, precision: int, scale: int) -> bool:
    """Whether ``value`` is exactly a ``decimal(precision, scale)`` (trailing fractional
    zeros do not count: ``1.500`` fits scale 1)."""
    if not value.is_finite():
        return False
    _, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    significant = list(digits)
    while exponent < 0 and len(significant) > 1 and significant[-1] == 0:
        significant.pop()
        exponent += 1
    if not any(significant):
        return True  # zero, of any scale
    fraction_digits = max(0, -exponent)
    integer_digits = max(0, len(significant) + exponent)
    return fraction_digits <= scale and integer_digits <= precision - scale


def _array_to_arrow(
    ltype: lt.ArrayType, values: Sequence[bytes | None], target: pa.ListType, where: ValueContext
) -> pa.Array:
    """Arrays read by ``array_send``, decoded as the stream decodes them (``wal_values``)."""
    import pyarrow as pa

    decoded = [None if value is None else _BINARY.decode_array(value, where) for value in values]
    element = target.value_type
    if pa.types.is_decimal(element):
        flat = [item for array in decoded if array is not None for item in array]
        _check_decimals(flat, element, where)
    return pa.array(decoded, target)
