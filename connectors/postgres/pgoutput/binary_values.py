"""Column values of the logical replication stream, decoded from PostgreSQL's binary form.

The log reader asks ``pgoutput`` for values in binary (``binary 'true'``, PostgreSQL 14+):
each value is its type's send function output, independent of the walsender's DateStyle,
IntervalStyle, TimeZone, extra_float_digits and bytea_output settings, and exact.
Formats: ``src/backend/utils/adt/*.c`` (``*_send``) and "Binary format" notes in
https://www.postgresql.org/docs/current/protocol-overview.html .

Values come out as the snapshot path produces them (``connectors.postgres.types``, read
through Arrow), so an image from the log equals the same row read in a snapshot:

- integers ``int``; ``numeric`` ``Decimal`` (its display scale kept; NaN and infinities as
  the ``Decimal`` specials); ``real`` the exact single-precision value as ``float``;
- text types, enum labels, JSON documents and UUIDs ``str``; ``bytea`` ``bytes``;
- ``date`` ``datetime.date``; ``time`` microseconds since midnight (the lake's int64);
  ``timestamp`` a naive ``datetime``; ``timestamptz`` a ``datetime`` in UTC; ``timetz``
  the struct the lake stores, ``{"micros": wall clock since midnight,
  "offset_seconds": seconds east of UTC}`` (``merkle.types.TIME_TZ_FIELDS``; a dict, as
  Arrow hands a struct back, since ``datetime.time`` cannot hold ``24:00:00``);
- ``money`` a ``Decimal`` of its int64 count of cents (``types.MONEY``);
- network, range, multirange, geometric and interval types ``str``: the text their output
  function prints (``text_values``; an interval in ISO 8601 form, its months, days and
  microseconds kept apart);
- arrays a list of their elements' values. Only one-dimensional arrays with lower bound 1
  (and empty ones) have a logical value (``merkle.canonical``, ``array``): any other is an
  error naming the column, never flattened. The snapshot path reads arrays and ``timetz``
  through the same send functions (``array_send``, ``timetz_send``) and these decoders.
"""

from __future__ import annotations

import datetime as dt
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final

from connectors.postgres.errors import ValueContext
from connectors.postgres.pgoutput import text_values as tv
from merkle.types import TIME_TZ_FIELDS

if TYPE_CHECKING:
    import psycopg

MICROS, OFFSET_SECONDS = TIME_TZ_FIELDS
PG_EPOCH_DATE: Final = dt.date(2000, 1, 1)
PG_EPOCH_NAIVE: Final = dt.datetime(2000, 1, 1)
PG_EPOCH_UTC: Final = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
_INT32_LIMITS = (-(2**31), 2**31 - 1)  # DATEVAL_NOBEGIN / DATEVAL_NOEND
_INT64_LIMITS = (-(2**63), 2**63 - 1)  # DT_NOBEGIN / DT_NOEND
_NUMERIC_SPECIAL = {
    0xC000: Decimal("NaN"),
    0xD000: Decimal("Infinity"),
    0xF000: Decimal("-Infinity"),
}
_NUMERIC_NEGATIVE = 0x4000


@dataclass(frozen=True, slots=True)
class TypeInfo:
    """What a non-builtin type OID is: an enum, a domain over ``base``, an array of
    ``element``, or something else (decoded as its raw bytes)."""

    kind: str  # "enum", "domain", "array", "other"
    base: int = 0
    element: int = 0


TypeLookup = Callable[[int], TypeInfo]
"""Looks a non-builtin type up in the catalog (``pg_type``)."""

Decode = Callable[[bytes, ValueContext], Any]


def _text(data: bytes, _: ValueContext) -> str:
    return data.decode("utf-8")


def _int(fmt: str) -> Decode:
    return lambda data, _: struct.unpack(fmt, data)[0]


def _float(fmt: str) -> Decode:
    return lambda data, _: float(struct.unpack(fmt, data)[0])


def _bool(data: bytes, _: ValueContext) -> bool:
    return data != b"\x00"


def _bytea(data: bytes, _: ValueContext) -> bytes:
    return bytes(data)


def _jsonb(data: bytes, where: ValueContext) -> str:
    if data[:1] != b"\x01":
        raise where.error(f"unknown jsonb binary version {data[:1]!r}", "report this")
    return data[1:].decode("utf-8")


def _uuid(data: bytes, _: ValueContext) -> str:
    return str(uuid.UUID(bytes=bytes(data)))


def _numeric(data: bytes, _: ValueContext) -> Decimal:
    ndigits, weight, sign, dscale = struct.unpack_from(">hhHh", data)
    if sign in _NUMERIC_SPECIAL:
        return _NUMERIC_SPECIAL[sign]
    # Base-10000 digits, the first one at 10000**weight, joined as one integer (a few
    # integer operations per digit: this runs per value); then counted in units of
    # 10**-dscale, the display scale: numeric_send drops trailing zero groups (put back) and
    # keeps no digit beyond the display scale (cut). Read from text: exact, whatever the
    # decimal context's precision.
    number = 0
    for digit in struct.unpack_from(f">{ndigits}h", data, 8):
        number = number * 10_000 + digit
    shift = 4 * (weight + 1 - ndigits) + dscale
    if shift > 0:
        number *= 10**shift
    elif shift < 0:
        number //= 10**-shift
    text = str(number)
    if dscale:
        text = text.rjust(dscale + 1, "0")
        text = text[:-dscale] + "." + text[-dscale:]
    return Decimal("-" + text if sign == _NUMERIC_NEGATIVE else text)


def _date(data: bytes, where: ValueContext) -> dt.date:
    days = struct.unpack(">i", data)[0]
    if days in _INT32_LIMITS:
        raise where.error("an infinite date has no value", "leave the column out")
    try:
        return PG_EPOCH_DATE + dt.timedelta(days=days)
    except OverflowError as exc:
        raise where.error("a date outside years 1..9999", "leave the column out") from exc


def _micros(data: bytes, where: ValueContext) -> int:
    micros = struct.unpack(">q", data)[0]
    if micros in _INT64_LIMITS:
        raise where.error("an infinite timestamp has no value", "leave the column out")
    return int(micros)


def _time(data: bytes, _: ValueContext) -> int:
    return int(struct.unpack(">q", data)[0])


def decode_timetz(data: bytes, _: ValueContext) -> dict[str, int]:
    """timetz_send: the wall clock (int64 microseconds) and the zone in seconds *west* of
    UTC (int32, as PostgreSQL keeps it), as the lake's struct (offset east of UTC)."""
    micros, west = struct.unpack(">qi", data)
    return {MICROS: int(micros), OFFSET_SECONDS: -int(west)}


def _timestamp(data: bytes, where: ValueContext) -> dt.datetime:
    try:
        return PG_EPOCH_NAIVE + dt.timedelta(microseconds=_micros(data, where))
    except OverflowError as exc:
        raise where.error("a timestamp outside years 1..9999", "leave the column out") from exc


def _timestamptz(data: bytes, where: ValueContext) -> dt.datetime:
    try:
        return PG_EPOCH_UTC + dt.timedelta(microseconds=_micros(data, where))
    except OverflowError as exc:
        raise where.error("a timestamp outside years 1..9999", "leave the column out") from exc


def _money(data: bytes, _: ValueContext) -> Decimal:
    return Decimal(struct.unpack(">q", data)[0]).scaleb(-2)  # cash_send: int64 cents


def _ranges(bound: Decode) -> tuple[Decode, Decode]:
    """The decoders of a range type and its multirange, bounds printed by ``bound``."""
    ranges = tv.range_text(bound)
    return ranges, tv.multirange_text(ranges)


_INT4_RANGE = _ranges(lambda data, _: str(struct.unpack(">i", data)[0]))
_INT8_RANGE = _ranges(lambda data, _: str(struct.unpack(">q", data)[0]))
_NUM_RANGE = _ranges(lambda data, where: tv.numeric_text(_numeric(data, where)))
_DATE_RANGE = _ranges(tv.date_text)
_TS_RANGE = _ranges(tv.timestamp_text)
_TSTZ_RANGE = _ranges(tv.timestamptz_text)

# Types carried as the text their output function prints (``text_values``), and money.
_TEXT_OUTPUT: Final[dict[int, Decode]] = {
    600: tv.point_text,
    601: tv.lseg_text,
    602: tv.path_text,
    603: tv.box_text,
    604: tv.polygon_text,
    628: tv.line_text,
    650: tv.inet_text,  # cidr
    718: tv.circle_text,
    774: tv.macaddr_text,  # macaddr8
    790: _money,
    829: tv.macaddr_text,
    869: tv.inet_text,
    1186: tv.interval_text,
    3904: _INT4_RANGE[0],
    3906: _NUM_RANGE[0],
    3908: _TS_RANGE[0],
    3910: _TSTZ_RANGE[0],
    3912: _DATE_RANGE[0],
    3926: _INT8_RANGE[0],
    4451: _INT4_RANGE[1],
    4532: _NUM_RANGE[1],
    4533: _TS_RANGE[1],
    4534: _TSTZ_RANGE[1],
    4535: _DATE_RANGE[1],
    4536: _INT8_RANGE[1],
}
# Builtin type OIDs (src/include/catalog/pg_type.dat).
BUILTIN: Final[dict[int, Decode]] = {
    16: _bool,
    17: _bytea,
    18: _text,  # "char"
    19: _text,  # name
    20: _int(">q"),
    21: _int(">h"),
    23: _int(">i"),
    25: _text,
    26: _int(">I"),  # oid
    114: _text,  # json: the document as stored
    700: _float(">f"),
    701: _float(">d"),
    1042: _text,  # character(n), with its padding
    1043: _text,
    1082: _date,
    1083: _time,
    1114: _timestamp,
    1184: _timestamptz,
    1266: decode_timetz,
    1700: _numeric,
    2950: _uuid,
    3802: _jsonb,
    **_TEXT_OUTPUT,
}
# Builtin types with a logical type (``connectors.postgres.types.logical_type``): the columns
# the lake stores. Enums, domains over these and arrays of them are stored too; "char",
# name, oid and the rest are decoded but not stored.
STORABLE: Final = frozenset(
    {16, 17, 20, 21, 23, 25, 114, 700, 701, 1042, 1043, 1082, 1083, 1114, 1184, 1186, 1266}
    | {1700, 2950, 3802}
    | set(_TEXT_OUTPUT)
)
# Array types of builtin elements: array OID -> element OID (typarray in pg_type.dat).
BUILTIN_ARRAYS: Final[dict[int, int]] = {
    1000: 16, 1001: 17, 1002: 18, 1003: 19, 1005: 21, 1007: 23, 1009: 25, 1014: 1042,
    1015: 1043, 1016: 20, 1021: 700, 1022: 701, 1028: 26, 199: 114, 1115: 1114, 1182: 1082,
    1183: 1083, 1185: 1184, 1187: 1186, 1231: 1700, 1270: 1266, 2951: 2950, 3807: 3802,
    1017: 600, 1018: 601, 1019: 602, 1020: 603, 1027: 604, 629: 628, 651: 650, 719: 718,
    775: 774, 1040: 829, 1041: 869, 3905: 3904, 3907: 3906, 3909: 3908, 3911: 3910,
    3913: 3912, 3927: 3926, 6150: 4451, 6151: 4532, 6152: 4533, 6153: 4534, 6155: 4535,
    6157: 4536,
}  # fmt: skip
# Types whose values cannot locate a row, as the snapshot chooses a key
# (``connectors.postgres.snapshot._locates``): timetz and the geometric types (point, lseg,
# path, box, polygon, line, circle); arrays of anything too.
NOT_LOCATING: Final = frozenset({1266, 600, 601, 602, 603, 604, 628, 718})
# money[] (791) is left out: the snapshot would read it through money's numeric cast,
# which depends on lc_monetary (``types.logical_type`` refuses it).
MONEY_ARRAY: Final = 791


class ValueDecoder:
    """Decodes binary column values by type OID, looking non-builtin types up once.

    Args:
        lookup: Describes a non-builtin type OID (from the catalog).
    """

    def __init__(self, lookup: TypeLookup) -> None:
        self._lookup = lookup
        self._decoders: dict[int, Decode] = dict(BUILTIN)
        self._storable: dict[int, bool] = dict.fromkeys(STORABLE, True)
        self._storable[MONEY_ARRAY] = False  # see BUILTIN_ARRAYS

    def decode(self, type_oid: int, data: bytes, where: ValueContext) -> Any:
        """The value of one column in binary form."""
        return self.decoder(type_oid)(data, where)

    def decoder(self, type_oid: int) -> Decode:
        """The function decoding values of ``type_oid``."""
        found = self._decoders.get(type_oid)
        if found is None:
            found = self._decoders[type_oid] = self._resolve(type_oid)
        return found

    def storable(self, type_oid: int) -> bool:
        """Whether columns of ``type_oid`` have a logical type (are stored in the lake)."""
        found = self._storable.get(type_oid)
        if found is None:
            found = False
            if type_oid in BUILTIN_ARRAYS:
                found = self.storable(BUILTIN_ARRAYS[type_oid])
            elif type_oid not in BUILTIN:  # information_schema's domains have system OIDs too
                info = self._lookup(type_oid)
                found = info.kind == "enum" or (
                    info.kind in ("domain", "array")
                    and self.storable(info.base if info.kind == "domain" else info.element)
                )
            self._storable[type_oid] = found
        return found

    def locates(self, type_oid: int) -> bool:
        """Whether values of ``type_oid`` may locate a row (a stored scalar, neither an array
        nor a ``timetz`` or geometric value: ``NOT_LOCATING``)."""
        if not self.storable(type_oid) or type_oid in NOT_LOCATING or type_oid in BUILTIN_ARRAYS:
            return False
        if type_oid in BUILTIN:
            return True
        info = self._lookup(type_oid)
        return info.kind == "enum" or (info.kind == "domain" and self.locates(info.base))

    def _resolve(self, type_oid: int) -> Decode:
        if type_oid in BUILTIN_ARRAYS:
            return self.decode_array
        info = self._lookup(type_oid)
        if info.kind == "enum":
            return _text  # enum_send sends the label
        if info.kind == "domain":
            return self.decoder(info.base)  # a domain is sent as its base type
        if info.kind == "array":
            return self.decode_array
        return _bytea

    def decode_array(self, data: bytes, where: ValueContext) -> list[Any]:
        """array_send: ndim, has-nulls flag, element OID, (length, lower bound) per
        dimension, then each element as a length (-1: NULL) and its bytes.

        Raises:
            TerminalError: The array has more than one dimension or a lower bound other
                than 1 (no canonical value: ``merkle.canonical``, ``array``).
        """
        ndim, _, element = struct.unpack_from(">iiI", data)
        if ndim == 0:
            return []  # the empty array: no dimensions at all
        size, lower = struct.unpack_from(">ii", data, 12)
        if ndim > 1 or lower != 1:
            raise where.error(
                f"an array with {ndim} dimensions and lower bound {lower} has no logical value"
                " (replcheck compares one-dimensional arrays numbered from 1, as Arrow, Spark"
                " and other products hold lists)",
                "store one-dimensional arrays starting at index 1, or leave the column out",
            )
        decode, at = self.decoder(element), 20
        values: list[Any] = []
        for _ in range(size):
            (length,) = struct.unpack_from(">i", data, at)
            at += 4
            values.append(None if length < 0 else decode(data[at : at + length], where))
            at += max(length, 0)
        return values


def lookup_type(connection: psycopg.Connection[Any], type_oid: int) -> TypeInfo:
    """What a non-builtin type is, from ``pg_type``."""
    row = connection.execute(
        "SELECT typtype, typbasetype, typelem, typcategory FROM pg_type WHERE oid = %s",
        (type_oid,),
    ).fetchone()
    if row is None:
        return TypeInfo("other")
    kind, base, element, category = row
    if kind == "e":
        return TypeInfo("enum")
    if kind == "d":
        return TypeInfo("domain", base=int(base))
    if category == "A" and element:
        return TypeInfo("array", element=int(element))
    return TypeInfo("other")
