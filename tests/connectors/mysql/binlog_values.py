"""Column values as MySQL 8 writes them in row images (the test encoder's value formats).

Written from MySQL's sources and documentation, not from the reader's decoder:

- DECIMAL: ``decimal2bin`` (strings/decimal.cc): the integer and fraction digits in groups
  of nine, four bytes each, big-endian, a leftover group in the bytes its digits need;
  the first bit flipped; a negative number with every byte inverted.
- DATE: 3 bytes little-endian, ``day | month << 5 | year << 9`` (``my_date_to_binary``).
- DATETIME2: 5 bytes big-endian, ``(year * 13 + month) << 22 | day << 17 | hour << 12 |
  minute << 6 | second`` plus ``0x8000000000``, then the fraction in ``(fsp + 1) // 2``
  bytes (``my_datetime_packed_to_binary``).
- TIMESTAMP2: 4 bytes big-endian seconds since the epoch, then the fraction.
- JSON: MySQL's binary JSON (``json_binary.h``): a type byte, then a small object or
  array (counts, size, key and value entries with 2-byte offsets, inlined literals and
  16-bit integers), strings with a packed length.
- ENUM: the 1-based index; SET: the bitmask; both in the pack length's bytes.
- BLOB: the length in the column's length bytes, then the bytes.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import struct

_GROUP = 9
_LEFTOVER_BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


def decimal_bytes(value: decimal.Decimal, precision: int, scale: int) -> bytes:
    """A DECIMAL(precision, scale) value (``decimal2bin``)."""
    sign, digits, _ = value.quantize(decimal.Decimal(1).scaleb(-scale)).as_tuple()
    text = "".join(map(str, digits)).rjust(scale + 1, "0")
    integer, fraction = text[: len(text) - scale], text[len(text) - scale :]
    integer = integer.lstrip("0").rjust(precision - scale, "0")
    out = bytearray(_groups(integer, leftover_first=True) + _groups(fraction, leftover_first=False))
    out[0] ^= 0x80
    return bytes(b ^ 0xFF for b in out) if sign else bytes(out)


def _groups(text: str, *, leftover_first: bool) -> bytes:
    """Groups of nine digits, four bytes each; the leftover digits in the bytes they need,
    first (the integer part) or last (the fraction)."""
    cut = len(text) % _GROUP if leftover_first else len(text) - len(text) % _GROUP
    head, tail = text[:cut], text[cut:]
    nines, rest = (tail, head) if leftover_first else (head, tail)
    groups = b"".join(
        int(nines[at : at + _GROUP]).to_bytes(4, "big") for at in range(0, len(nines), _GROUP)
    )
    extra = int(rest).to_bytes(_LEFTOVER_BYTES[len(rest)], "big") if rest else b""
    return extra + groups if leftover_first else groups + extra


def date_bytes(value: dt.date) -> bytes:
    """A DATE value."""
    return (value.day | value.month << 5 | value.year << 9).to_bytes(3, "little")


def _fraction(microsecond: int, fsp: int) -> bytes:
    size = (fsp + 1) // 2
    if not size:
        return b""
    return (microsecond // 10 ** (6 - 2 * size)).to_bytes(size, "big")


def datetime2_bytes(value: dt.datetime, fsp: int) -> bytes:
    """A DATETIME(fsp) value (naive)."""
    ym = value.year * 13 + value.month
    packed = ym << 22 | value.day << 17 | value.hour << 12 | value.minute << 6 | value.second
    return (packed + 0x8000000000).to_bytes(5, "big") + _fraction(value.microsecond, fsp)


def timestamp2_bytes(value: dt.datetime, fsp: int) -> bytes:
    """A TIMESTAMP(fsp) value (aware)."""
    seconds = int(value.timestamp())
    return seconds.to_bytes(4, "big") + _fraction(value.microsecond, fsp)


# Binary JSON value types (json_binary.h).
_SMALL_OBJECT, _SMALL_ARRAY, _LITERAL, _INT16, _INT64, _DOUBLE, _STRING = 0, 2, 4, 5, 9, 11, 12
_LITERALS = {None: 0, True: 1, False: 2}


def json_bytes(document: str) -> bytes:
    """A JSON document (text) in MySQL's binary form: its type byte, then its value."""
    value = json.loads(document)
    kind, inline, data = _json_value(value)
    return bytes([kind]) + (inline if data is None else data)


def _json_value(value: object) -> tuple[int, bytes, bytes | None]:
    """(type, the 2-byte inline value or b"", the value's bytes when not inlined)."""
    if value is None or isinstance(value, bool):
        return _LITERAL, struct.pack("<H", _LITERALS[value]), None
    if isinstance(value, int) and -(2**15) <= value < 2**15:
        return _INT16, struct.pack("<h", value), None
    if isinstance(value, int):
        return _INT64, b"", struct.pack("<q", value)
    if isinstance(value, float):
        return _DOUBLE, b"", struct.pack("<d", value)
    if isinstance(value, str):
        data = value.encode()
        return _STRING, b"", _varlen(len(data)) + data
    if isinstance(value, list):
        return _SMALL_ARRAY, b"", _container([], value)
    assert isinstance(value, dict)
    keys = sorted(value, key=lambda k: (len(k.encode()), k.encode()))  # MySQL's key order
    return _SMALL_OBJECT, b"", _container(keys, [value[k] for k in keys])


def _container(keys: list[str], values: list[object]) -> bytes:
    """A small object (``keys``) or array (no keys): count, size, entries, then data."""
    header = 4 + 4 * len(keys) + 3 * len(values)
    key_bytes = [k.encode() for k in keys]
    at = header + sum(map(len, key_bytes))
    key_entries = b""
    offset = header
    for key in key_bytes:
        key_entries += struct.pack("<HH", offset, len(key))
        offset += len(key)
    value_entries, data = b"", b""
    for value in values:
        kind, inline, body = _json_value(value)
        if body is None:
            value_entries += bytes([kind]) + inline
        else:
            value_entries += bytes([kind]) + struct.pack("<H", at + len(data))
            data += body
    size = at + len(data)
    counts = struct.pack("<HH", len(values), size)
    return counts + key_entries + value_entries + b"".join(key_bytes) + data


def _varlen(length: int) -> bytes:
    """A length in 7-bit groups, low first, the high bit set on all but the last."""
    out = bytearray()
    while True:
        byte, length = length & 0x7F, length >> 7
        out.append(byte | (0x80 if length else 0))
        if not length:
            return bytes(out)
