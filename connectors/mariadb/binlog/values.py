"""Exact decoding of MariaDB/MySQL row-event images into the values the pipeline uses.

mysql-replication frames the binlog and parses table maps, but its own row decoding differs
from what a snapshot read of the same row gives (negative TIME with a fraction is wrong, an
empty SET becomes NULL, YEAR 0000 becomes 1900, BIT comes back as a string of digits, BINARY
loses its zero padding). So the log reader decodes the row bytes itself, here, with the
column metadata of the table map in force at the event, into exactly the values the snapshot
path of ``connectors/mariadb/connector.py`` produces:

- integers as ``int``; ``BIGINT UNSIGNED`` as ``Decimal`` (its Arrow type is DECIMAL(20,0));
- DECIMAL as ``Decimal``; FLOAT/DOUBLE as ``float`` (a FLOAT widened exactly);
- DATE as ``date``; DATETIME as a naive ``datetime``; TIMESTAMP as a UTC ``datetime`` (the
  binlog stores TIMESTAMP as seconds since the epoch, whatever the session time zone); a
  zero value as None and any other date that is not a calendar date as ``NOT_A_DATE``,
  which ``row_changes`` refuses (``zero_dates``);
- TIME as ``int`` microseconds; YEAR as ``int``;
- CHAR/VARCHAR/TEXT/ENUM/SET (comma-joined in definition order) and JSON as ``str``;
  BINARY/VARBINARY/BLOB as ``bytes``; BIT(1) as ``bool``, wider BIT as ``int``;
- UUID as its text (``uuid_text``: its table map shows a ``BINARY(16)``, so the caller
  knows it from the catalog).

Byte layouts: https://mariadb.com/kb/en/rows_event_v1v2-rows_compressed_event_v1/ and
MySQL's ``my_time.cc`` / ``decimal.c`` (``*_packed_from_binary``, ``bin2decimal``).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import struct
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cdc_core.capture.events import ABSENT
from cdc_core.errors import TerminalError
from connectors.mariadb.zero_dates import to_date, to_datetime

Decode = Callable[[bytes, int], tuple[object, int]]
"""Reads one non-NULL value at an offset; returns it and the offset after it."""

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_DECIMAL_GROUP_BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)  # bytes for 0..9 leftover digits

# Binlog field types (MySQL's enum_field_types, include/mysql_com.h).
DECIMAL, TINY, SHORT, LONG, FLOAT, DOUBLE, NULL, TIMESTAMP, LONGLONG, INT24 = range(10)
DATE, TIME, DATETIME, YEAR, NEWDATE, VARCHAR, BIT, TIMESTAMP2, DATETIME2, TIME2 = range(10, 20)
JSON, NEWDECIMAL, ENUM, SET = 245, 246, 247, 248
BLOB, VAR_STRING, STRING, GEOMETRY = 252, 253, 254, 255


class UnsupportedColumnError(TerminalError):
    """A binlog column type replcheck cannot decode (the message names table and column)."""


@dataclass(frozen=True, slots=True)
class ColumnCodec:
    """How one column of a table map is read.

    Args:
        name: The column's name (from ``binlog_row_metadata=FULL``).
        decode: Reads a non-NULL value.
        kept: False for columns that have no logical type (spatial): read past, not kept.
        dated: True for the date types whose stored value may be no calendar date
            (``NOT_A_DATE``): only these are checked per row.
    """

    name: str
    decode: Decode
    kept: bool = True
    dated: bool = False


def _fixed(fmt: str) -> Decode:
    unpack, size = struct.Struct(fmt).unpack_from, struct.calcsize(fmt)
    return lambda data, at: (unpack(data, at)[0], at + size)


def _int24(signed: bool) -> Decode:
    return lambda data, at: (int.from_bytes(data[at : at + 3], "little", signed=signed), at + 3)


def _ubigint(data: bytes, at: int) -> tuple[object, int]:
    return decimal.Decimal(struct.unpack_from("<Q", data, at)[0]), at + 8


def _big_endian(data: bytes | bytearray, at: int, size: int) -> int:
    return int.from_bytes(data[at : at + size], "big")


def _new_decimal(precision: int, scale: int) -> Decode:
    """MySQL's packed DECIMAL: groups of 9 digits in 4 bytes, big-endian, sign in bit 7.

    The value is read as one integer, whose groups are cut out by shifts and joined by
    multiplying: a few integer operations per group, in place of a text per group (this
    runs for every DECIMAL value of every row).
    """
    integral = precision - scale
    int_full, int_rest = divmod(integral, 9)
    frac_full, frac_rest = divmod(scale, 9)
    sizes = (
        [_DECIMAL_GROUP_BYTES[int_rest]] * bool(int_rest)
        + [4] * int_full
        + [4] * frac_full
        + [_DECIMAL_GROUP_BYTES[frac_rest]] * bool(frac_rest)
    )
    widths = (
        [int_rest] * bool(int_rest) + [9] * (int_full + frac_full) + [frac_rest] * bool(frac_rest)
    )
    total = sum(sizes)
    sign_bit = 1 << (8 * total - 1)
    negated = sign_bit ^ ((1 << (8 * total)) - 1)  # a negative number's flipped bits
    groups, shift, digits = [], 0, 0  # (shift, mask, multiplier), from the last group
    for size, width in zip(reversed(sizes), reversed(widths), strict=True):
        groups.append((shift, (1 << (8 * size)) - 1, 10**digits))
        shift, digits = shift + 8 * size, digits + width

    def decode(data: bytes, at: int) -> tuple[object, int]:
        packed = int.from_bytes(data[at : at + total], "big")
        negative = not packed & sign_bit
        packed ^= negated if negative else sign_bit
        number = 0
        for shift, mask, multiplier in groups:
            number += (packed >> shift & mask) * multiplier
        text = str(number)
        if scale:
            text = text.rjust(scale + 1, "0")
            text = text[:-scale] + "." + text[-scale:]
        return decimal.Decimal("-" + text if negative else text), at + total

    return decode


def _fraction(fsp: int) -> tuple[int, int]:
    """(bytes, multiplier to microseconds) of a fractional-second part of ``fsp`` digits."""
    size = (fsp + 1) // 2
    return size, 10 ** (6 - 2 * size)


def _datetime2(fsp: int) -> Decode:
    frac_size, scale = _fraction(fsp)

    def decode(data: bytes, at: int) -> tuple[object, int]:
        packed = int.from_bytes(data[at : at + 5], "big") - 0x8000000000  # inline: per value
        micros = int.from_bytes(data[at + 5 : at + 5 + frac_size], "big") * scale
        ymd, hms = packed >> 17, packed & 0x1FFFF
        year_month = ymd >> 5
        day = (year_month // 13, year_month % 13, ymd & 0x1F)
        time = (hms >> 12, (hms >> 6) & 0x3F, hms & 0x3F)
        try:  # a calendar date, nearly every value, first: this runs per value
            return dt.datetime(*day, *time, micros), at + 5 + frac_size
        except ValueError:
            return to_datetime(day, time, micros), at + 5 + frac_size

    return decode


def _timestamp2(fsp: int) -> Decode:
    frac_size, scale = _fraction(fsp)

    def decode(data: bytes, at: int) -> tuple[object, int]:
        seconds = int.from_bytes(data[at : at + 4], "big")  # inline: per value
        micros = int.from_bytes(data[at + 4 : at + 4 + frac_size], "big") * scale
        if seconds == 0 and micros == 0:
            return None, at + 4 + frac_size  # the zero timestamp '0000-00-00 00:00:00'
        value = _EPOCH + dt.timedelta(seconds=seconds, microseconds=micros)
        return value, at + 4 + frac_size

    return decode


def _time2(fsp: int) -> Decode:
    """TIME as signed microseconds (MySQL ``my_time_packed_from_binary``)."""
    frac_size, scale = _fraction(fsp)

    def decode(data: bytes, at: int) -> tuple[object, int]:
        if frac_size == 3:
            packed = _big_endian(data, at, 6) - 0x800000000000
        else:
            hms = _big_endian(data, at, 3) - 0x800000
            frac = _big_endian(data, at + 3, frac_size)
            if hms < 0 and frac:
                # Negative values store the fraction complemented, for binary sort order.
                hms, frac = hms + 1, frac - (1 << (8 * frac_size))
            packed = (hms << 24) + frac * scale
        sign, packed = (-1 if packed < 0 else 1), abs(packed)
        hms, micros = packed >> 24, packed & 0xFFFFFF
        seconds = ((hms >> 12) & 0x3FF) * 3600 + ((hms >> 6) & 0x3F) * 60 + (hms & 0x3F)
        return sign * (seconds * 1_000_000 + micros), at + 3 + frac_size

    return decode


def _date(data: bytes, at: int) -> tuple[object, int]:
    packed = int.from_bytes(data[at : at + 3], "little")
    return to_date(packed >> 9, (packed >> 5) & 0xF, packed & 0x1F), at + 3


def _year(data: bytes, at: int) -> tuple[object, int]:
    stored = data[at]
    return (stored + 1900 if stored else 0), at + 1


def _old_datetime(data: bytes, at: int) -> tuple[object, int]:
    """The pre-5.6 DATETIME: YYYYMMDDhhmmss as a little-endian integer."""
    packed = struct.unpack_from("<Q", data, at)[0]
    day, time = divmod(packed, 1_000_000)
    parts = (day // 10_000, day // 100 % 100, day % 100)
    return to_datetime(parts, (time // 10_000, time // 100 % 100, time % 100), 0), at + 8


def _old_time(data: bytes, at: int) -> tuple[object, int]:
    """The pre-5.6 TIME: +-HHMMSS as a signed 3-byte integer."""
    packed = int.from_bytes(data[at : at + 3], "little", signed=True)
    sign, packed = (-1 if packed < 0 else 1), abs(packed)
    seconds = packed // 10_000 * 3600 + packed // 100 % 100 * 60 + packed % 100
    return sign * seconds * 1_000_000, at + 3


def _old_timestamp(data: bytes, at: int) -> tuple[object, int]:
    seconds = struct.unpack_from("<I", data, at)[0]
    return (_EPOCH + dt.timedelta(seconds=seconds) if seconds else None), at + 4


def _length_prefixed(length_size: int, encoding: str | None, pad_to: int = 0) -> Decode:
    def decode(data: bytes, at: int) -> tuple[object, int]:
        length = int.from_bytes(data[at : at + length_size], "little")
        start = at + length_size
        raw = bytes(data[start : start + length])
        if encoding is not None:
            return raw.decode(encoding), start + length
        if pad_to > length:
            # BINARY(n) is logged without its trailing zero bytes; the column holds them.
            raw += b"\x00" * (pad_to - length)
        return raw, start + length

    return decode


def _enum(size: int, values: Sequence[str]) -> Decode:
    def decode(data: bytes, at: int) -> tuple[object, int]:
        index = int.from_bytes(data[at : at + size], "little")
        return (values[index] if index < len(values) else ""), at + size

    return decode


def _set(size: int, values: Sequence[str]) -> Decode:
    def decode(data: bytes, at: int) -> tuple[object, int]:
        mask = int.from_bytes(data[at : at + size], "little")
        chosen = [value for bit, value in enumerate(values) if mask >> bit & 1]
        return ",".join(chosen), at + size

    return decode


def _bit(bits: int) -> Decode:
    size = (bits + 7) // 8

    def decode(data: bytes, at: int) -> tuple[object, int]:
        value = _big_endian(data, at, size)
        return (bool(value) if bits == 1 else value), at + size

    return decode


def _mysql_json(length_size: int) -> Decode:
    """MySQL's binary JSON (MariaDB stores JSON as LONGTEXT, a BLOB in the binlog)."""
    from pymysqlreplication.json_binary import parse_json

    def decode(data: bytes, at: int) -> tuple[object, int]:
        length = int.from_bytes(data[at : at + length_size], "little")
        start = at + length_size
        raw = bytes(data[start : start + length])
        value = parse_json(raw[0], raw[1:]) if raw else None
        return json.dumps(_plain_json(value), ensure_ascii=False), start + length

    return decode


def _plain_json(value: object) -> object:
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, dict):
        return {_plain_json(k): _plain_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain_json(v) for v in value]
    return value


def uuid_text(decode: Decode) -> Decode:
    """Reads a UUID column as the text a snapshot reads (``123e4567-e89b-...``).

    A row event holds the 16 bytes in the text's order, for every version and variant
    (measured on MariaDB 10.11: the index order of https://mariadb.com/kb/en/uuid-data-type/
    is the storage engine's, not the binlog's; ``tests/connectors/mariadb/test_uuid.py``).
    """

    def read(data: bytes, at: int) -> tuple[object, int]:
        value, at = decode(data, at)
        assert isinstance(value, bytes)  # a BINARY(16) decoder's value
        return str(uuid.UUID(bytes=value)), at

    return read


def python_encoding(charset: str | None) -> str | None:
    """The Python codec of a MySQL character set name; ``None`` for binary data."""
    if charset is None or charset == "binary":
        return None
    from pymysql.charset import charset_by_name

    found = charset_by_name(charset)
    return found.encoding if found is not None else charset


_INTEGERS = {
    (TINY, False): "<b",
    (TINY, True): "<B",
    (SHORT, False): "<h",
    (SHORT, True): "<H",
    (LONG, False): "<i",
    (LONG, True): "<I",
    (LONGLONG, False): "<q",
}


def decoder_of(column: object) -> Decode | None:
    """The decoder of one mysql-replication table-map column; ``None`` if unsupported.

    ``column`` is a ``pymysqlreplication.column.Column`` (read by attribute, untyped).
    """
    kind: int = column.type  # type: ignore[attr-defined]
    unsigned = bool(getattr(column, "unsigned", False))
    if (kind, unsigned) in _INTEGERS:
        return _fixed(_INTEGERS[(kind, unsigned)])
    simple: dict[int, Decode] = {
        LONGLONG: _ubigint,
        INT24: _int24(not unsigned),
        FLOAT: _fixed("<f"),
        DOUBLE: _fixed("<d"),
        DATE: _date,
        YEAR: _year,
        DATETIME: _old_datetime,
        TIME: _old_time,
        TIMESTAMP: _old_timestamp,
    }
    if kind in simple:
        return simple[kind]
    return _decoder_with_metadata(kind, column)


def _decoder_with_metadata(kind: int, column: object) -> Decode | None:
    meta = column.__dict__
    encoding = python_encoding(meta.get("character_set_name"))
    if kind == NEWDECIMAL:
        return _new_decimal(meta["precision"], meta["decimals"])
    if kind in (DATETIME2, TIMESTAMP2, TIME2):
        return {DATETIME2: _datetime2, TIMESTAMP2: _timestamp2, TIME2: _time2}[kind](meta["fsp"])
    if kind in (VARCHAR, VAR_STRING, STRING):
        max_length = meta["max_length"]
        pad_to = max_length if kind == STRING else 0
        return _length_prefixed(2 if max_length > 255 else 1, encoding, pad_to)
    if kind == BLOB:
        return _length_prefixed(meta["length_size"], encoding)
    if kind == ENUM:
        return _enum(meta["size"], meta.get("enum_values") or [""])
    if kind == SET:
        return _set(meta["size"], meta.get("set_values") or [])
    if kind == BIT:
        return _bit(meta["bits"])
    if kind == JSON:
        return _mysql_json(meta["length_size"])
    if kind == GEOMETRY:
        return _length_prefixed(meta["length_size"], None)
    return None


def kept_type(kind: int) -> bool:
    """False for binlog types that have no logical type (spatial): read past, not kept."""
    return kind != GEOMETRY


def dated_type(kind: int) -> bool:
    """True for the binlog types whose decoder may return ``NOT_A_DATE`` (``to_date``,
    ``to_datetime``); a TIMESTAMP counts seconds, so it is a date or zero."""
    return kind in (DATE, NEWDATE, DATETIME, DATETIME2)


def _present(bitmap: bytes, count: int) -> list[bool]:
    return [bool(bitmap[i >> 3] >> (i & 7) & 1) for i in range(count)]


def iter_images(
    codecs: Sequence[ColumnCodec], bitmaps: Sequence[bytes], data: bytes
) -> list[list[dict[str, object]]]:
    """Every row of a rows event: per row, one image per bitmap (before, after).

    Columns the event's bitmap leaves out (MINIMAL and NOBLOB images) are ``ABSENT``; a
    column whose NULL bit is set is ``None``.
    """
    readers = [_image_reader(codecs, _present(bitmap, len(codecs))) for bitmap in bitmaps]
    rows, at = [], 0
    while at < len(data):
        row = []
        for read in readers:
            image, at = read(data, at)
            row.append(image)
        rows.append(row)
    return rows


def _image_reader(
    codecs: Sequence[ColumnCodec], present: Sequence[bool]
) -> Callable[[bytes, int], tuple[dict[str, object], int]]:
    """Reads one image of the columns ``present`` marks. This runs for every row: what is
    the same for all rows of an event is worked out once here."""
    columns = [(c.name, c.decode, c.kept, p) for c, p in zip(codecs, present, strict=True)]
    nulls_size = (sum(present) + 7) // 8
    plain = [(c.name, c.decode) for c in codecs]
    whole = all(present) and all(c.kept for c in codecs)  # a FULL image, no spatial column

    def read(data: bytes, at: int) -> tuple[dict[str, object], int]:
        nulls, at = int.from_bytes(data[at : at + nulls_size], "little"), at + nulls_size
        image: dict[str, object] = {}
        if whole and not nulls:
            for name, decode in plain:  # the common row: a FULL image without NULLs
                image[name], at = decode(data, at)
            return image, at
        index = 0  # the column's index among the present ones: its NULL bit
        for name, decode, kept, is_present in columns:
            value: object = ABSENT
            if is_present:
                if nulls >> index & 1:
                    value = None
                else:
                    value, at = decode(data, at)
                index += 1
            if kept:
                image[name] = value
        return image, at

    return read
