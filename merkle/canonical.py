"""Canonical bytes: the specification of how a row becomes the input of its hash.

This module is the contract. ``merkle.spark`` implements the same rules as Spark SQL
expressions; both must reproduce ``tests/merkle/golden_vectors.jsonl`` bit for bit.

Row layout::

    row   := field(column_1) field(column_2) ... field(column_n)
    field := b"N"                                  -- SQL NULL (after the options below)
           | ascii(len(payload)) b":" payload      -- everything else

``len`` counts payload bytes in ASCII decimal. A non-NULL field starts with a digit, so the
NULL marker differs from every value, including the strings "N", "NULL" and "<null>", and
the length prefix keeps ``("a|b", "c")`` apart from ``("a", "b|c")``. Columns appear in the
order of the comparison's column list, the same on both sides.

Payload per logical type (all text is ASCII unless stated):

- ``integer``: decimal digits, ``-`` for negatives, no leading zeros (``-0`` is ``0``).
- ``decimal``: plain decimal notation (never an exponent) with trailing fractional zeros
  and a bare trailing point removed, so ``1.10``, ``1.1`` and ``1.100`` are all ``1.1``;
  ``100`` stays ``100``; zero of any scale or sign is ``0``.
- ``float``: a 32-bit column's value is first narrowed to IEEE single precision (round
  half to even, overflow to infinity), as the column stores it; ``-0.0`` becomes ``0.0``.
  By default (exact comparison) the payload is the value's IEEE 754 binary64 bit pattern
  as a signed decimal integer (Java's ``Double.doubleToLongBits``: every NaN is
  ``9221120237041090560``, ``0.1`` is ``4591870180066957722``). With ``float_digits = d``:
  ``NaN``, ``Infinity``, ``-Infinity``, ``0``, or ``[-]<n>e<e>``, the magnitude rounded
  to ``d`` significant decimal digits, ``n`` being those ``d`` digits
  (``10**(d-1) <= n < 10**d``) and ``e`` the decimal exponent of the first. ``n`` is
  computed with IEEE arithmetic only, so every engine gets the same bits:
  ``e = floor(log10(|x|))`` (corrected once if the scaled value falls outside
  ``[10**(d-1), 10**d)``), ``s = |x| * 10**(d-1-e)`` evaluated as one multiplication (or
  division, for a negative power) by ``10**(k mod 22)`` followed by ``k div 22``
  multiplications (divisions) by ``1e22`` (all exact powers of ten), then ``n = rint(s)``
  (half to even; ``10**d`` carries into the exponent). Decimal formatting of doubles is
  not used because Java's and Python's digit generation disagree on ties.
- ``string``: UTF-8. With ``trim_char``, trailing U+0020 of ``char`` columns are dropped;
  with ``case_insensitive``, the text is lower-cased (Unicode default mapping).
- ``bytes``: the bytes themselves.
- ``boolean``: ``1`` or ``0``; an integer is true when it is not zero, as MariaDB reads its
  BOOLEAN, which is TINYINT(1) (https://mariadb.com/kb/en/boolean/).
- ``date``: days since 1970-01-01 as a signed decimal integer.
- ``time``: microseconds since midnight (signed: MySQL TIME is a duration); a value may be
  given as a ``time``, a ``timedelta`` or an integer count of microseconds.
- ``timestamp``: microseconds from 1970-01-01T00:00:00 to the wall-clock value, read as UTC.
- ``timestamp_tz``: microseconds from the Unix epoch to the instant (time zone: UTC).
- ``json``: compact JSON (no spaces) with object keys sorted by code point; numbers
  written as ``decimal`` payloads (``1.0`` and ``1e0`` are ``1``); strings escaped only for
  ``"``, ``\\`` and control characters (``\\b \\f \\n \\r \\t``, others as ``\\u00XX``,
  upper-case hex); everything else, including non-ASCII, as UTF-8.
- ``uuid``: 32 lower-case hexadecimal digits, no hyphens.
- ``interval``: ``<months>,<microseconds>``, where a day counts 86,400,000,000 µs.
- ``time_tz``: ``<m>,<o>``: ``m`` the wall-clock time of day in microseconds since
  midnight (as ``time``; PostgreSQL also accepts ``24:00:00``, 86,400,000,000), ``o`` the
  UTC offset in whole seconds east of Greenwich, signed (``+05:30`` is ``19800``,
  ``-03:30`` is ``-12600``, UTC is ``0``). Both parts count, as in PostgreSQL, whose
  ``time with time zone`` equality compares the UTC-adjusted time *and* the zone
  (``timetz_cmp_internal`` in ``src/backend/utils/adt/date.c``): ``12:00+02`` and
  ``11:00+01`` are the same instant of a day but differ, and equal (wall clock, offset)
  pairs are exactly equal (UTC time, offset) pairs. A value is an aware ``time``, or the
  struct readers hand to Arrow and Spark: a mapping ``{"micros": m, "offset_seconds": o}``
  or a pair ``(m, o)`` (``merkle.types.TIME_TZ_FIELDS``).
- ``array<e>``: ``ascii(n) ":" field(v_1) field(v_2) ... field(v_n)``: the element count,
  then every element framed as a row field in order (``N`` for a NULL element, otherwise
  its length-prefixed payload by the element type ``e`` under the same options, so an
  empty string element is ``N`` with ``empty_string_is_null``). ``[]`` is ``0:``, and it
  is not NULL; ``[1, NULL, 23]`` as ``array<integer>`` is ``3:1:1N2:23``. An array is a
  one-dimensional list, numbered from its first element: an element may itself be an
  array (``array<array<integer>>``, as Spark and DuckDB nest lists). PostgreSQL arrays
  also carry dimensions and lower bounds, which its equality compares (``'[0:1]={1,2}'``
  is not ``'{1,2}'``, nor is ``'{{1,2},{3,4}}'`` ``'{1,2,3,4}'``); only one-dimensional
  values with lower bound 1 (and the empty array) have canonical bytes, and a reader
  meeting any other raises an error naming the column instead of flattening the value or
  dropping its bound (``connectors.postgres.pgoutput.binary_values``).

Times (``time``, and the wall clock of ``time_tz``; its offset is never rounded) and
timestamps keep ``ComparisonOptions.fraction_digits`` fractional digits, reduced by the rule
``ComparisonOptions.rounding`` names (``u = 10**(6 - digits)``, ``m`` the microsecond
count above, ``E`` the rule's epoch in the same count):

- ``round``: ``floor((m + u/2) / u) * u`` (a half goes to the later instant, also before
  1970; MariaDB with ``TIME_ROUND_FRACTIONAL``);
- ``truncate``: ``floor(m / u) * u`` (MariaDB's default);
- ``half_away_from_1970`` (DuckDB, ``E = 0``) and ``half_away_from_2000`` (PostgreSQL,
  ``E = 946684800000000`` for timestamps): with ``d = m - E``,
  ``E + sign(d) * floor((|d| + u/2) / u) * u``, so an exact half before ``E`` goes to
  the earlier instant. For ``time`` and ``time_tz`` columns ``E = 0`` (midnight) under
  every rule.

With ``empty_string_is_null`` an empty string or empty bytes value (after trimming) encodes
as NULL, as Oracle stores it.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import struct
import uuid
from collections.abc import Callable, Mapping, Sequence
from functools import singledispatch
from typing import Any

from cdc_core.capture.events import Interval
from cdc_core.errors import ContractError
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

NULL_MARKER = b"N"
MICROS_PER_DAY = 86_400_000_000
EPOCH_DATE = dt.date(1970, 1, 1)
EPOCH = dt.datetime(1970, 1, 1)
EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_ONE_MICRO = dt.timedelta(microseconds=1)

PayloadEncoder = Callable[[Any], bytes | None]
"""Turns one non-NULL value into its payload, or None when the options make it NULL."""


def to_field(payload: bytes | None) -> bytes:
    """Frame one payload as a field: length-prefixed, or the NULL marker."""
    if payload is None:
        return NULL_MARKER
    return b"%d:%b" % (len(payload), payload)


def payload_encoder(ltype: LogicalType, options: ComparisonOptions) -> PayloadEncoder:
    """The payload encoder for one column (resolved once per column, not per value)."""
    return _encoder_for(ltype, options)


def to_canonical_field(value: Any, ltype: LogicalType, options: ComparisonOptions) -> bytes:
    """Canonical bytes of one value as a field of a row."""
    if value is None:
        return NULL_MARKER
    return to_field(payload_encoder(ltype, options)(value))


class RowEncoder:
    """Encodes rows of a fixed list of logical types into canonical bytes."""

    __slots__ = ("_encoders",)

    def __init__(self, ltypes: Sequence[LogicalType], options: ComparisonOptions) -> None:
        self._encoders = tuple(payload_encoder(ltype, options) for ltype in ltypes)

    def to_bytes(self, values: Sequence[Any]) -> bytes:
        """Canonical bytes of a row; ``values`` are in the encoder's column order."""
        if len(values) != len(self._encoders):
            raise ContractError(f"row has {len(values)} values for {len(self._encoders)} columns")
        parts = []
        for encode, value in zip(self._encoders, values, strict=True):
            parts.append(NULL_MARKER if value is None else to_field(encode(value)))
        return b"".join(parts)


@singledispatch
def _encoder_for(ltype: LogicalType, options: ComparisonOptions) -> PayloadEncoder:
    raise ContractError(f"no canonical encoding for logical type {ltype}")


def _type_error(ltype: LogicalType, value: object) -> ContractError:
    # The value itself may be sensitive: name only its Python type.
    return ContractError(f"cannot encode a {type(value).__name__} as {ltype}")


@_encoder_for.register
def _integer(ltype: IntegerType, options: ComparisonOptions) -> PayloadEncoder:
    def encode(value: Any) -> bytes:
        if isinstance(value, int):
            return b"%d" % value
        if isinstance(value, decimal.Decimal) and value == value.to_integral_value():
            return b"%d" % int(value)
        raise _type_error(ltype, value)

    return encode


def decimal_text(value: decimal.Decimal) -> str:
    """Plain, normalised decimal text (the ``decimal`` payload as a str)."""
    if not value.is_finite():
        raise ContractError("NaN and infinite values have no decimal encoding")
    if value.is_zero():
        return "0"
    text = format(value, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


@_encoder_for.register
def _decimal(ltype: DecimalType, options: ComparisonOptions) -> PayloadEncoder:
    def encode(value: Any) -> bytes:
        if isinstance(value, bool) or not isinstance(value, int | decimal.Decimal):
            raise _type_error(ltype, value)
        return decimal_text(decimal.Decimal(value)).encode()

    return encode


def _special_float(value: float) -> str | None:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return "0" if value == 0 else None


CANONICAL_NAN_BITS = 0x7FF8000000000000  # Java's doubleToLongBits of every NaN


def float_bits(value: float) -> int:
    """The exact ``float`` payload: binary64 bits as a signed integer (0.0 for -0.0)."""
    if math.isnan(value):
        return CANONICAL_NAN_BITS
    packed: int = struct.unpack("<q", struct.pack("<d", value + 0.0))[0]  # -0.0 + 0.0 = 0.0
    return packed


POW10_STEP = 22  # 10**22 is the largest power of ten a double holds exactly


def scale_by_pow10(value: float, power: int) -> float:
    """``value * 10**power`` with exact powers of ten, in the contract's fixed order."""
    steps, rest = divmod(abs(power), POW10_STEP)
    if power >= 0:
        value *= float(10**rest)
        for _ in range(steps):
            value *= 1e22
    else:
        value /= float(10**rest)
        for _ in range(steps):
            value /= 1e22
    return value


def float_digits_text(value: float, digits: int) -> str:
    """The ``float`` payload with ``float_digits`` set: ``[-]<n>e<e>`` (see module doc)."""
    special = _special_float(value)
    if special is not None:
        return special
    magnitude = abs(value)
    exponent = math.floor(math.log10(magnitude))
    scaled = scale_by_pow10(magnitude, digits - 1 - exponent)
    if scaled >= float(10**digits) or scaled < float(10 ** (digits - 1)):
        exponent += 1 if scaled >= float(10**digits) else -1
        scaled = scale_by_pow10(magnitude, digits - 1 - exponent)
    mantissa = round(scaled)  # half to even, like Java's Math.rint
    if mantissa >= 10**digits:
        mantissa //= 10
        exponent += 1
    return f"{'-' if value < 0 else ''}{mantissa}e{exponent}"


def to_single(value: float) -> float:
    """``value`` narrowed to IEEE single precision, as a FLOAT/REAL column stores it."""
    try:
        return float(struct.unpack("<f", struct.pack("<f", value))[0])
    except OverflowError:  # beyond the largest single: the column would hold infinity
        return math.copysign(math.inf, value)


@_encoder_for.register
def _float(ltype: FloatType, options: ComparisonOptions) -> PayloadEncoder:
    narrow = ltype.bits == 32
    digits = options.float_digits

    def encode(value: Any) -> bytes:
        if isinstance(value, bool) or not isinstance(value, float | int | decimal.Decimal):
            raise _type_error(ltype, value)
        number = to_single(float(value)) if narrow else float(value)
        if digits is None:
            return b"%d" % float_bits(number)
        return float_digits_text(number, digits).encode()

    return encode


@_encoder_for.register
def _string(ltype: StringType, options: ComparisonOptions) -> PayloadEncoder:
    trim = options.trim_char and ltype.padded
    lower = options.case_insensitive
    empty_is_null = options.empty_string_is_null

    def encode(value: Any) -> bytes | None:
        if not isinstance(value, str):
            raise _type_error(ltype, value)
        if trim:
            value = value.rstrip(" ")
        if empty_is_null and not value:
            return None
        return (value.lower() if lower else value).encode("utf-8")

    return encode


@_encoder_for.register
def _bytes(ltype: BytesType, options: ComparisonOptions) -> PayloadEncoder:
    empty_is_null = options.empty_string_is_null

    def encode(value: Any) -> bytes | None:
        if not isinstance(value, bytes | bytearray | memoryview):
            raise _type_error(ltype, value)
        data = bytes(value)
        return None if empty_is_null and not data else data

    return encode


@_encoder_for.register
def _boolean(ltype: BooleanType, options: ComparisonOptions) -> PayloadEncoder:
    def encode(value: Any) -> bytes:
        if isinstance(value, int):  # bool is an int too
            return b"1" if value else b"0"
        raise _type_error(ltype, value)

    return encode


@_encoder_for.register
def _date(ltype: DateType, options: ComparisonOptions) -> PayloadEncoder:
    def encode(value: Any) -> bytes:
        if isinstance(value, dt.datetime):
            if value.time() != dt.time(0) or value.tzinfo is not None:
                raise ContractError("a date column got a timestamp with a time of day")
            value = value.date()
        if not isinstance(value, dt.date):
            raise _type_error(ltype, value)
        return b"%d" % (value - EPOCH_DATE).days

    return encode


EPOCH_2000_MICROS = 946_684_800_000_000  # 2000-01-01T00:00:00 counted from 1970-01-01


def rounding_epoch(rounding: TimeRounding, ltype: LogicalType) -> int:
    """Where ``rounding`` counts from, in the value's own microsecond count (module doc)."""
    if rounding is TimeRounding.HALF_AWAY_FROM_2000 and not isinstance(
        ltype, TimeType | TimeTzType
    ):
        return EPOCH_2000_MICROS
    return 0


def reduce_micros(micros: int, digits: int, rounding: TimeRounding, epoch: int = 0) -> int:
    """Reduce a microsecond count to ``digits`` fractional-second digits by ``rounding``
    (``epoch``: where a ``half_away_from_*`` rule counts from, see ``rounding_epoch``)."""
    unit = 10 ** (6 - digits)
    if rounding is TimeRounding.ROUND:
        return (micros + unit // 2) // unit * unit
    if rounding is TimeRounding.TRUNCATE:
        return micros // unit * unit
    offset = micros - epoch
    magnitude = (abs(offset) + unit // 2) // unit * unit
    return epoch + (magnitude if offset >= 0 else -magnitude)


def _micros_encoder(
    ltype: LogicalType, options: ComparisonOptions, to_micros: Callable[[Any], int]
) -> PayloadEncoder:
    digits = options.fraction_digits(ltype)
    rounding = options.rounding
    epoch = rounding_epoch(rounding, ltype)

    def encode(value: Any) -> bytes:
        return b"%d" % reduce_micros(to_micros(value), digits, rounding, epoch)

    return encode


@_encoder_for.register
def _time(ltype: TimeType, options: ComparisonOptions) -> PayloadEncoder:
    def to_micros(value: Any) -> int:
        if isinstance(value, dt.timedelta):
            return value // _ONE_MICRO
        if isinstance(value, int) and not isinstance(value, bool):
            return value  # microseconds, as readers hand time columns to Arrow and Spark
        if isinstance(value, dt.time) and value.tzinfo is None:
            seconds = value.hour * 3600 + value.minute * 60 + value.second
            return seconds * 1_000_000 + value.microsecond
        raise _type_error(ltype, value)

    return _micros_encoder(ltype, options, to_micros)


_ONE_SECOND = dt.timedelta(seconds=1)


def time_tz_parts(value: Any) -> tuple[int, int] | None:
    """``(wall-clock microseconds since midnight, offset seconds east of UTC)`` of a
    ``time_tz`` value (see the module doc), or None when ``value`` is not one."""
    if isinstance(value, dt.time):
        offset = value.utcoffset()
        if offset is None:
            raise ContractError(
                "a time_tz column got a time without a UTC offset: the reader must attach it"
            )
        if offset % _ONE_SECOND:
            raise ContractError("a time_tz offset has fractions of a second")
        seconds = value.hour * 3600 + value.minute * 60 + value.second
        return seconds * 1_000_000 + value.microsecond, offset // _ONE_SECOND
    if isinstance(value, Mapping):
        micros, offset = value.get(TIME_TZ_FIELDS[0]), value.get(TIME_TZ_FIELDS[1])
    elif isinstance(value, tuple | list) and len(value) == 2:
        micros, offset = value
    else:
        return None
    if isinstance(micros, bool) or isinstance(offset, bool):
        return None
    if isinstance(micros, int) and isinstance(offset, int):
        return micros, offset
    return None


@_encoder_for.register
def _time_tz(ltype: TimeTzType, options: ComparisonOptions) -> PayloadEncoder:
    digits = options.fraction_digits(ltype)
    rounding = options.rounding

    def encode(value: Any) -> bytes:
        parts = time_tz_parts(value)
        if parts is None:
            raise _type_error(ltype, value)
        micros, offset = parts
        return b"%d,%d" % (reduce_micros(micros, digits, rounding), offset)

    return encode


@_encoder_for.register
def _timestamp(ltype: TimestampType, options: ComparisonOptions) -> PayloadEncoder:
    def to_micros(value: Any) -> int:
        if not isinstance(value, dt.datetime):
            raise _type_error(ltype, value)
        if value.tzinfo is not None:
            raise ContractError("a timestamp column (no time zone) got an aware datetime")
        return (value - EPOCH) // _ONE_MICRO

    return _micros_encoder(ltype, options, to_micros)


@_encoder_for.register
def _timestamp_tz(ltype: TimestampTzType, options: ComparisonOptions) -> PayloadEncoder:
    def to_micros(value: Any) -> int:
        if not isinstance(value, dt.datetime):
            raise _type_error(ltype, value)
        if value.tzinfo is None or value.utcoffset() is None:
            raise ContractError(
                "a timestamp_tz column got a naive datetime: the reader must attach its zone"
            )
        return (value - EPOCH_UTC) // _ONE_MICRO

    return _micros_encoder(ltype, options, to_micros)


_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r"}
_JSON_ESCAPES["\t"] = "\\t"


def _json_string(text: str) -> str:
    out = []
    for char in text:
        if char in _JSON_ESCAPES:
            out.append(_JSON_ESCAPES[char])
        elif char < " ":
            out.append(f"\\u{ord(char):04X}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def json_text(document: Any) -> str:
    """Canonical JSON text of a parsed document (see the module docstring)."""
    if document is None:
        return "null"
    if document is True or document is False:
        return "true" if document else "false"
    if isinstance(document, str):
        return _json_string(document)
    if isinstance(document, int | decimal.Decimal):
        return decimal_text(decimal.Decimal(document))
    if isinstance(document, float):
        return decimal_text(decimal.Decimal(repr(document)))
    if isinstance(document, dict):
        items = sorted(document.items())
        return "{" + ",".join(f"{_json_string(k)}:{json_text(v)}" for k, v in items) + "}"
    if isinstance(document, list | tuple):
        return "[" + ",".join(json_text(item) for item in document) + "]"
    raise ContractError(f"not a JSON value: {type(document).__name__}")


def _parse_json(text: str) -> Any:
    # Integers as Decimal too: int() refuses more than 4,300 digits (sys.int_info), which
    # JSON allows. The messages name what is wrong, never the document.
    try:
        return json.loads(text, parse_float=decimal.Decimal, parse_int=decimal.Decimal)
    except json.JSONDecodeError as exc:
        raise ContractError(f"invalid JSON document: {exc.msg}") from exc
    except RecursionError as exc:
        raise ContractError("invalid JSON document: nested too deeply to parse") from exc
    except decimal.InvalidOperation as exc:  # an exponent beyond decimal's (about 10**18)
        raise ContractError("invalid JSON document: a number's exponent is out of range") from exc


@_encoder_for.register
def _json(ltype: JsonType, options: ComparisonOptions) -> PayloadEncoder:
    def encode(value: Any) -> bytes:
        if isinstance(value, bytes | bytearray):
            try:
                value = bytes(value).decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ContractError("invalid JSON document: not UTF-8") from exc
        if isinstance(value, str):
            value = _parse_json(value)
        try:
            return json_text(value).encode("utf-8")
        except UnicodeEncodeError as exc:  # "\ud800": a lone surrogate is not Unicode text
            raise ContractError("invalid JSON document: a lone surrogate") from exc

    return encode


@_encoder_for.register
def _uuid(ltype: UuidType, options: ComparisonOptions) -> PayloadEncoder:
    def encode(value: Any) -> bytes:
        try:
            if isinstance(value, uuid.UUID):
                return value.hex.encode()
            if isinstance(value, bytes | bytearray) and len(value) == 16:
                return bytes(value).hex().encode()
            if isinstance(value, str):
                return uuid.UUID(value.strip()).hex.encode()
        except ValueError as exc:
            raise ContractError("malformed UUID text") from exc
        raise _type_error(ltype, value)

    return encode


@_encoder_for.register
def _interval(ltype: IntervalType, options: ComparisonOptions) -> PayloadEncoder:
    def encode(value: Any) -> bytes:
        if isinstance(value, dt.timedelta):
            return b"0,%d" % (value // _ONE_MICRO)
        if isinstance(value, Interval):
            return b"%d,%d" % (value.months, value.days * MICROS_PER_DAY + value.micros)
        raise _type_error(ltype, value)

    return encode


@_encoder_for.register
def _array(ltype: ArrayType, options: ComparisonOptions) -> PayloadEncoder:
    element = payload_encoder(ltype.element, options)

    def encode(value: Any) -> bytes:
        if not isinstance(value, list | tuple):
            raise _type_error(ltype, value)
        fields = [NULL_MARKER if item is None else to_field(element(item)) for item in value]
        return b"%d:%b" % (len(fields), b"".join(fields))

    return encode
