"""Network, range, multirange, geometric and interval values of the stream, as the text
PostgreSQL prints for them.

These types are carried as the ``string`` their output function prints
(``connectors.postgres.types``): the snapshot and the validator read ``column::text`` in a
session with ``DateStyle=ISO``, ``TimeZone=UTC`` and ``extra_float_digits`` above zero
(``types.SESSION_OPTIONS``; ``IntervalStyle=iso_8601`` for intervals), and the stream's
binary values are printed here the way
those output functions print them, so both paths give the same text, and the text reads
back as the same value. Sources: ``network_show`` and ``inet_net_ntop.c``, ``macaddr_out``,
``range_out``/``multirange_out`` (``rangetypes.c``, ``multirangetypes.c``),
``EncodeDateOnly``/``EncodeDateTime``/``EncodeInterval`` (``datetime.c``), ``interval2itm``
(``timestamp.c``), ``float8out_internal`` and the
``*_out`` functions of ``geo_ops.c`` in ``src/backend/utils/adt``.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from decimal import Decimal
from typing import Any, Final

from connectors.postgres.errors import ValueContext

Decode = Callable[[bytes, ValueContext], Any]

_PGSQL_AF_INET: Final = 2  # inet's own family numbers (utils/inet.h), not the OS's
_POSTGRES_EPOCH_JDATE: Final = 2_451_545  # 2000-01-01 as a Julian day
_DAY_MICROS: Final = 86_400_000_000
_INT32_LIMITS = (-(2**31), 2**31 - 1)  # DATEVAL_NOBEGIN / DATEVAL_NOEND
_INT64_LIMITS = (-(2**63), 2**63 - 1)  # DT_NOBEGIN / DT_NOEND


def inet_text(data: bytes, _: ValueContext) -> str:
    """inet_send (family, mask bits, is-cidr flag, address length, address bytes) as
    ``inet::text`` prints it: network_show, which always shows the mask, unlike inet_out
    (``10.0.0.1/32``, where inet_out prints ``10.0.0.1``); cidr's text always does."""
    family, bits, _is_cidr, size = data[:4]
    address = data[4 : 4 + size]
    if family == _PGSQL_AF_INET:
        return ".".join(str(octet) for octet in address) + f"/{bits}"
    return _ipv6_text(address) + f"/{bits}"


def _ipv6_text(address: bytes) -> str:
    """inet_net_ntop_ipv6: the first longest run (two or more) of zero words as ``::``, an
    IPv4 address embedded in the last 32 bits dotted (BIND's rule, not RFC 5952's)."""
    words = struct.unpack(">8H", address)
    base, length = _longest_zero_run(words)
    parts: list[str] = []
    for i, word in enumerate(words):
        if base <= i < base + length:
            if i == base:
                parts.append(":")
            continue
        if i != 0:
            parts.append(":")
        embedded = length == 6 or (length == 7 and words[7] != 1)
        if i == 6 and base == 0 and (embedded or (length == 5 and words[5] == 0xFFFF)):
            parts.append(".".join(str(octet) for octet in address[12:]))
            break
        parts.append(f"{word:x}")
    if length and base + length == 8:
        parts.append(":")
    return "".join(parts)


def _longest_zero_run(words: tuple[int, ...]) -> tuple[int, int]:
    """(start, length) of the first longest run of zero words; (-1, 0) if none has two."""
    best, current = (-1, 0), (-1, 0)
    for i, word in enumerate((*words, 1)):  # a sentinel closes a trailing run
        if word == 0:
            current = (i, 1) if current[0] == -1 else (current[0], current[1] + 1)
        elif current[0] != -1:
            best = current if current[1] > best[1] else best
            current = (-1, 0)
    return best if best[1] >= 2 else (-1, 0)


def macaddr_text(data: bytes, _: ValueContext) -> str:
    """macaddr_send and macaddr8_send: the 6 or 8 bytes, printed as lowercase hex pairs."""
    return ":".join(f"{octet:02x}" for octet in data)


def float8_text(value: float) -> str:
    """float8out with extra_float_digits > 0: the shortest text that reads back exactly,
    in fixed notation for decimal exponents -4..14, else as ``d.ddde+XX``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0" if math.copysign(1, value) < 0 else "0"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()  # repr is shortest
    assert isinstance(exponent, int)
    shown = "".join(map(str, digits))
    point = exponent + len(shown) - 1  # the decimal exponent of the first digit
    if -4 <= point < 15:
        if exponent >= 0:
            text = shown + "0" * exponent
        elif point >= 0:
            text = shown[: point + 1] + "." + shown[point + 1 :]
        else:
            text = "0." + "0" * (-point - 1) + shown
    else:
        mantissa = shown[0] + ("." + shown[1:] if len(shown) > 1 else "")
        text = f"{mantissa}e{'-' if point < 0 else '+'}{abs(point):02d}"
    return "-" + text if sign else text


def _floats(data: bytes, offset: int, count: int) -> list[str]:
    return [float8_text(v) for v in struct.unpack_from(f">{count}d", data, offset)]


def _points(data: bytes, offset: int, count: int) -> str:
    values = _floats(data, offset, 2 * count)
    return ",".join(f"({values[i]},{values[i + 1]})" for i in range(0, len(values), 2))


def point_text(data: bytes, _: ValueContext) -> str:
    return _points(data, 0, 1)


def line_text(data: bytes, _: ValueContext) -> str:
    return "{" + ",".join(_floats(data, 0, 3)) + "}"


def lseg_text(data: bytes, _: ValueContext) -> str:
    return "[" + _points(data, 0, 2) + "]"


def box_text(data: bytes, _: ValueContext) -> str:
    return _points(data, 0, 2)  # high corner, then low corner, as box_send sends them


def path_text(data: bytes, _: ValueContext) -> str:
    closed, count = struct.unpack_from(">bi", data)
    points = _points(data, 5, count)
    return f"({points})" if closed else f"[{points}]"


def polygon_text(data: bytes, _: ValueContext) -> str:
    (count,) = struct.unpack_from(">i", data)
    return "(" + _points(data, 4, count) + ")"


def circle_text(data: bytes, _: ValueContext) -> str:
    x, y, radius = _floats(data, 0, 3)
    return f"<({x},{y}),{radius}>"


def _iso_date(julian: int) -> tuple[str, bool]:
    """j2date of a Julian day, as ``EncodeDateOnly`` prints it in ISO style (four digits at
    least), and whether the year is BC (shown as a `` BC`` suffix)."""
    day_number = julian + 32044
    quad, rest = divmod(day_number, 146097)
    extra = rest * 4 + 3
    day_number += 60 + quad * 3 + extra // 146097
    quad, day_number = divmod(day_number, 1461)
    year = day_number * 4 // 1461
    day_number = ((day_number + 305) % 365 if year else (day_number + 306) % 366) + 123
    year += quad * 4 - 4800
    quad = day_number * 2141 // 65536
    day = day_number - 7834 * quad // 256
    month = (quad + 10) % 12 + 1
    shown = year if year > 0 else 1 - year
    return f"{shown:04d}-{month:02d}-{day:02d}", year <= 0


def date_text(data: bytes, _: ValueContext) -> str:
    """date_send (days since 2000-01-01) as date_out prints it with DateStyle ISO."""
    (days,) = struct.unpack(">i", data)
    if days in _INT32_LIMITS:
        return "-infinity" if days < 0 else "infinity"
    text, bc = _iso_date(days + _POSTGRES_EPOCH_JDATE)
    return text + (" BC" if bc else "")


def _timestamp_text(data: bytes, zone: str) -> str:
    """timestamp_send (microseconds since 2000-01-01) as printed with DateStyle ISO, with
    ``zone`` after the time (``+00``: a timestamptz in a UTC session)."""
    (micros,) = struct.unpack(">q", data)
    if micros in _INT64_LIMITS:
        return "-infinity" if micros < 0 else "infinity"
    days, clock = divmod(micros, _DAY_MICROS)
    date, bc = _iso_date(days + _POSTGRES_EPOCH_JDATE)
    seconds, fraction = divmod(clock, 1_000_000)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    time = f"{hour:02d}:{minute:02d}:{second:02d}"
    if fraction:
        time += "." + f"{fraction:06d}".rstrip("0")
    return f"{date} {time}{zone}" + (" BC" if bc else "")


def timestamp_text(data: bytes, _: ValueContext) -> str:
    return _timestamp_text(data, "")


def timestamptz_text(data: bytes, _: ValueContext) -> str:
    return _timestamp_text(data, "+00")


_RANGE_EMPTY, _LB_INC, _UB_INC, _LB_INF, _UB_INF = 0x01, 0x02, 0x04, 0x08, 0x10
_QUOTED = frozenset('"\\()[],') | frozenset(" \t\n\r\v\f")


def _bound_text(text: str) -> str:
    """range_bound_escape: quoted when empty or holding a quote, backslash, bracket, comma
    or white space, with quotes and backslashes doubled."""
    if text and not _QUOTED.intersection(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '""') + '"'


def range_text(bound: Decode) -> Decode:
    """range_send (flags, then each finite bound as a length and its subtype's binary
    form) printed as range_out prints it, bounds through ``bound``."""

    def decode(data: bytes, where: ValueContext) -> str:
        flags, at = data[0], 1
        if flags & _RANGE_EMPTY:
            return "empty"
        texts = []
        for infinite in (_LB_INF, _UB_INF):
            if flags & infinite:
                texts.append("")
                continue
            (size,) = struct.unpack_from(">i", data, at)
            texts.append(_bound_text(bound(data[at + 4 : at + 4 + size], where)))
            at += 4 + size
        opening = "[" if flags & _LB_INC else "("
        closing = "]" if flags & _UB_INC else ")"
        return f"{opening}{texts[0]},{texts[1]}{closing}"

    return decode


def multirange_text(range_decode: Decode) -> Decode:
    """multirange_send (a count, then each range as a length and its range_send form)
    printed as multirange_out prints it: ``{range,range}``."""

    def decode(data: bytes, where: ValueContext) -> str:
        (count,) = struct.unpack_from(">i", data)
        at, texts = 4, []
        for _ in range(count):
            (size,) = struct.unpack_from(">i", data, at)
            texts.append(range_decode(data[at + 4 : at + 4 + size], where))
            at += 4 + size
        return "{" + ",".join(texts) + "}"

    return decode


_HOUR_MICROS: Final = 3_600_000_000
# INTERVAL_NOBEGIN / INTERVAL_NOEND (PostgreSQL 17, utils/timestamp.h): (micros, days, months).
_INTERVAL_INFINITIES: Final = {
    (_INT64_LIMITS[1], _INT32_LIMITS[1], _INT32_LIMITS[1]): "infinity",
    (_INT64_LIMITS[0], _INT32_LIMITS[0], _INT32_LIMITS[0]): "-infinity",
}


def _truncated(value: int, unit: int) -> tuple[int, int]:
    """C's ``/`` and ``%`` (toward zero), as ``interval2itm`` splits an interval's fields:
    every part keeps the sign of the whole (``-90 min`` is ``-1 h -30 min``)."""
    quotient = abs(value) // unit * (1 if value >= 0 else -1)
    return quotient, value - quotient * unit


def interval_text(data: bytes, _: ValueContext) -> str:
    """interval_send (int64 microseconds, int32 days, int32 months) as interval_out prints
    it with ``IntervalStyle=iso_8601``: ``P1Y2M3DT4H5M6.000007S``, each field signed on its
    own (``P-1Y-2M3DT-4H-5M-6.5S``), zero fields left out, zero as ``PT0S``. The three
    fields stay apart, so the text reads back as the same value (``'1 mon'`` and ``'30
    days'`` are equal to PostgreSQL's ``=`` but are different values, printed differently).
    The two values PostgreSQL 17 made its infinities (every field at its extreme) print as
    ``infinity`` and ``-infinity``; before 17 they are finite values no arithmetic reaches."""
    fields = struct.unpack(">qii", data)
    if fields in _INTERVAL_INFINITIES:
        return _INTERVAL_INFINITIES[fields]
    micros, days, months = fields
    years, months = _truncated(months, 12)
    hours, rest = _truncated(micros, _HOUR_MICROS)
    minutes, rest = _truncated(rest, 60_000_000)
    seconds, fraction = _truncated(rest, 1_000_000)
    if not (years or months or days or micros):
        return "PT0S"
    dated = "".join(f"{n}{unit}" for n, unit in ((years, "Y"), (months, "M"), (days, "D")) if n)
    timed = "".join(f"{n}{unit}" for n, unit in ((hours, "H"), (minutes, "M")) if n)
    if seconds or fraction:
        shown = f".{abs(fraction):06d}".rstrip("0") if fraction else ""
        timed += f"{'-' if micros < 0 else ''}{abs(seconds)}{shown}S"
    return f"P{dated}T{timed}" if timed else f"P{dated}"


def numeric_text(value: Decimal) -> str:
    """numeric_out of a decoded numeric: plain notation with its display scale."""
    return format(value, "f")
