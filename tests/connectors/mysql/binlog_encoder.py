"""MySQL 8 binlog events, written from MySQL's documented formats (a test encoder).

There is no MySQL server here, so the log reader's MySQL paths are tested with binlog files
this module writes, byte for byte as the documentation describes them:
https://dev.mysql.com/doc/dev/mysql-server/latest/page_protocol_replication_binlog_event.html
and the ``mysql::binlog::event`` classes it links (``Format_description_event``,
``Gtid_event``, ``Previous_gtids_event``, ``Query_event``, ``Table_map_event``,
``Rows_event``, ``Xid_event``, ``Rotate_event``, ``Heartbeat_event``).

Layouts (all integers little-endian):

- common header, 19 bytes: timestamp u32, type u8, server_id u32, event_size u32 (header,
  body and checksum), log_pos u32 (the end of the event in its file; 0 for an artificial
  event), flags u16; then the event's post-header and body, then the CRC32 of all that
  (``binlog_checksum=CRC32``, MySQL's default: the only checksum written here);
- packed integers (``net_field_length``): < 251 in one byte, else 0xfc + u16, 0xfd + u24,
  0xfe + u64.

Compressed transactions (``binlog_transaction_compression=ON``): events written inside
``BinlogFile.compressed()`` go, without their checksums, into one zstd frame in a
TRANSACTION_PAYLOAD_EVENT (``mysql::binlog::event::Transaction_payload_event``; its header
fields as ``codecs::binary::Transaction_payload::encode`` writes them).

Column types: TINYINT, INT, BIGINT (signed and unsigned), DOUBLE, VARCHAR, DECIMAL, DATE,
DATETIME, TIMESTAMP, JSON, ENUM, SET and BLOB (their value formats: ``binlog_values``).
Not here: TIME, BIT, YEAR, GEOMETRY, and partial JSON's diffs.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import struct
import uuid
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import zstandard

from tests.connectors.mysql.binlog_values import (
    date_bytes,
    datetime2_bytes,
    decimal_bytes,
    json_bytes,
    timestamp2_bytes,
)

BINLOG_MAGIC = b"\xfebin"

# Log_event_type (https://dev.mysql.com/doc/dev/mysql-server/latest/namespacemysql_1_1binlog_1_1event.html).
QUERY_EVENT, STOP_EVENT, ROTATE_EVENT, FORMAT_DESCRIPTION_EVENT, XID_EVENT = 2, 3, 4, 15, 16
TABLE_MAP_EVENT, HEARTBEAT_LOG_EVENT = 19, 27
WRITE_ROWS_EVENT, UPDATE_ROWS_EVENT, DELETE_ROWS_EVENT = 30, 31, 32
GTID_LOG_EVENT, ANONYMOUS_GTID_LOG_EVENT, PREVIOUS_GTIDS_LOG_EVENT = 33, 34, 35
XA_PREPARE_LOG_EVENT, PARTIAL_UPDATE_ROWS_EVENT, TRANSACTION_PAYLOAD_EVENT = 38, 39, 40
MARIADB_GTID_EVENT = 162

# Post-header length of each event type 1..41, as MySQL 8.0's Format_description_event
# writes them (``server_version_split`` >= 8.0.26, which has HEARTBEAT_LOG_EVENT_V2 = 41).
POST_HEADER_LENGTHS = (
    56, 13, 0, 8, 0, 18, 0, 4, 4, 4, 4, 18, 0, 0, 98, 0, 4, 26, 8, 0,  # 1-20
    0, 0, 8, 8, 8, 2, 0, 0, 0, 10, 10, 10, 42, 42, 0, 18, 52, 0, 10, 40,  # 21-40
    0,  # 41
)  # fmt: skip
# Transaction_payload's header fields and compression types (``OTW_PAYLOAD_*``).
PAYLOAD_END, PAYLOAD_SIZE, PAYLOAD_COMPRESSION, PAYLOAD_UNCOMPRESSED_SIZE = 0, 1, 2, 3
ZSTD, NO_COMPRESSION = 0, 255
LOG_EVENT_ARTIFICIAL_F = 0x20
STMT_END_F = 0x0001
BINLOG_CHECKSUM_ALG_CRC32 = 1
# Query_event status variables (statement_events.h): flags2, sql_mode, charset.
Q_FLAGS2_CODE, Q_SQL_MODE_CODE, Q_CHARSET_CODE = 0, 1, 4
UTF8MB4_0900_AI_CI = 255  # MySQL 8's default collation id
# Table_map optional metadata field types (Table_map_event::Optional_metadata_field_type).
SIGNEDNESS, DEFAULT_CHARSET, COLUMN_NAME, SIMPLE_PRIMARY_KEY, COLUMN_VISIBILITY = 1, 2, 4, 8, 12

SET_STR_VALUE, ENUM_STR_VALUE, ENUM_AND_SET_DEFAULT_CHARSET = 5, 6, 10
BINARY_COLLATION = 63  # a BLOB's (binary) "collation" in DEFAULT_CHARSET

ColumnKind = Literal[
    "tinyint", "int", "bigint", "double", "varchar", "decimal", "date", "datetime",
    "timestamp", "json", "enum", "set", "blob",
]  # fmt: skip
# enum_field_types (field_types.h) of each kind, and whether the kind is numeric (its
# signedness is in the SIGNEDNESS bitmap) or a character kind (its collation in the charset).
# ENUM and SET are logged as STRING (254), their real type in the metadata.
_TYPE_CODES: dict[str, int] = {
    "tinyint": 1, "int": 3, "bigint": 8, "double": 5, "varchar": 15, "decimal": 246,
    "date": 10, "datetime": 18, "timestamp": 17, "json": 245, "enum": 254, "set": 254,
    "blob": 252,
}  # fmt: skip
_REAL_TYPES = {"enum": 247, "set": 248}
_NUMERIC = ("tinyint", "int", "bigint", "double", "decimal")
_CHARACTER = ("varchar", "blob")
_INTEGER_FORMATS = {"tinyint": "b", "int": "i", "bigint": "q"}
_BLOB_LENGTH_BYTES = 2  # BLOB (TINYBLOB 1, MEDIUMBLOB 3, LONGBLOB 4)
_JSON_LENGTH_BYTES = 4


def packed(value: int) -> bytes:
    """``net_field_length``: a length-encoded integer."""
    if value < 251:
        return bytes([value])
    if value < 1 << 16:
        return b"\xfc" + struct.pack("<H", value)
    if value < 1 << 24:
        return b"\xfd" + struct.pack("<I", value)[:3]
    return b"\xfe" + struct.pack("<Q", value)


def _bits(flags: Sequence[bool], msb_first: bool) -> bytes:
    """A bitmap: rows bitmaps put column 0 in bit 0; optional metadata in bit 7."""
    out = bytearray((len(flags) + 7) // 8)
    for index, flag in enumerate(flags):
        if flag:
            out[index // 8] |= (0x80 >> (index % 8)) if msb_first else (1 << (index % 8))
    return bytes(out)


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a table as its table map describes it.

    Args:
        name: The column name (optional metadata ``COLUMN_NAME``).
        kind: Its SQL type.
        max_length: For ``varchar``, its maximum length in bytes (characters x 4 in utf8mb4).
        unsigned: For the integer kinds, ``UNSIGNED``.
        nullable: Whether it may hold NULL.
        precision: For ``decimal``, its precision and ``scale``.
        scale: For ``decimal``, its digits after the point.
        fsp: For ``datetime`` and ``timestamp``, the fractional digits.
        values: For ``enum`` and ``set``, the values in definition order.
    """

    name: str
    kind: ColumnKind
    max_length: int = 0
    unsigned: bool = False
    nullable: bool = True
    precision: int = 0
    scale: int = 0
    fsp: int = 0
    values: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if (self.kind == "varchar") != (self.max_length > 0):
            raise ValueError("a varchar, and only a varchar, has a max_length")

    def metadata(self) -> bytes:
        """Its bytes in the table map's column metadata block."""
        if self.kind == "double":
            return bytes([8])  # the pack length
        if self.kind == "varchar":
            return struct.pack("<H", self.max_length)
        if self.kind == "decimal":
            return bytes([self.precision, self.scale])
        if self.kind in ("datetime", "timestamp"):
            return bytes([self.fsp])
        if self.kind in _REAL_TYPES:
            return bytes([_REAL_TYPES[self.kind], self._pack_length])
        if self.kind == "blob":
            return bytes([_BLOB_LENGTH_BYTES])
        if self.kind == "json":
            return bytes([_JSON_LENGTH_BYTES])
        return b""

    @property
    def _pack_length(self) -> int:
        """ENUM: 1 or 2 bytes; SET: a bit per value, in 1, 2, 3, 4 or 8 bytes."""
        if self.kind == "enum":
            return 1 if len(self.values) < 256 else 2
        size = (len(self.values) + 7) // 8
        return 8 if size > 4 else size

    def encode(self, value: object) -> bytes:
        """A non-NULL value as a row image holds it."""
        if self.kind in _INTEGER_FORMATS:
            fmt = _INTEGER_FORMATS[self.kind]
            assert isinstance(value, int)
            return struct.pack("<" + (fmt.upper() if self.unsigned else fmt), value)
        if self.kind == "double":
            assert isinstance(value, float)
            return struct.pack("<d", value)
        if self.kind not in ("varchar", "blob", "json", "enum", "set"):
            return self._encode_dated_or_decimal(value)
        if self.kind == "blob":
            assert isinstance(value, bytes)
            return len(value).to_bytes(_BLOB_LENGTH_BYTES, "little") + value
        assert isinstance(value, str)
        if self.kind == "json":
            data = json_bytes(value)
            return len(data).to_bytes(_JSON_LENGTH_BYTES, "little") + data
        if self.kind == "enum":
            return (self.values.index(value) + 1).to_bytes(self._pack_length, "little")
        if self.kind == "set":
            mask = sum(1 << self.values.index(v) for v in value.split(",") if v)
            return mask.to_bytes(self._pack_length, "little")
        data = value.encode()
        if len(data) > self.max_length:
            raise ValueError(f"{value!r} is longer than {self.name}'s {self.max_length} bytes")
        return (
            bytes([len(data)]) if self.max_length < 256 else struct.pack("<H", len(data))
        ) + data

    def _encode_dated_or_decimal(self, value: object) -> bytes:
        if self.kind == "decimal":
            assert isinstance(value, decimal.Decimal)
            return decimal_bytes(value, self.precision, self.scale)
        if self.kind == "date":
            assert isinstance(value, dt.date)
            return date_bytes(value)
        assert isinstance(value, dt.datetime)
        if self.kind == "timestamp":
            return timestamp2_bytes(value, self.fsp)
        return datetime2_bytes(value, self.fsp)


@dataclass(frozen=True, slots=True)
class Table:
    """A table as its table map events describe it.

    Args:
        table_id: The server's id for it (6 bytes in the events).
        schema: Its database.
        name: Its name.
        columns: Its columns in order.
        primary_key: Its primary key's columns (optional metadata ``SIMPLE_PRIMARY_KEY``).
    """

    table_id: int
    schema: str
    name: str
    columns: tuple[Column, ...]
    primary_key: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        names = [column.name for column in self.columns]
        if any(key not in names for key in self.primary_key):
            raise ValueError(f"primary key {self.primary_key} is not among {names}")

    def image(self, row: Mapping[str, object]) -> bytes:
        """One full row image: its NULL bitmap, then each non-NULL value."""
        values = [row[column.name] for column in self.columns]
        body = b"".join(
            c.encode(v) for c, v in zip(self.columns, values, strict=True) if v is not None
        )
        return _bits([value is None for value in values], msb_first=False) + body


@dataclass(slots=True)
class BinlogFile:
    """One binlog file being written: its events, each with the offset it starts at.

    Args:
        name: The file name (``binlog.000001``).
        server_id: The server id in every event header.
        timestamp: The timestamp of every event (seconds since the epoch).
    """

    name: str
    server_id: int = 1
    timestamp: int = 1_700_000_000
    events: list[tuple[int, bytes]] = field(default_factory=list)
    position: int = len(BINLOG_MAGIC)
    inner: list[bytes] | None = None  # inside ``compressed()``: the payload's events

    def _event(self, event_type: int, body: bytes, flags: int = 0) -> bytes:
        if self.inner is not None:  # no checksum and no position inside a payload
            header = struct.pack(
                "<IBIIIH", self.timestamp, event_type, self.server_id, 19 + len(body), 0, flags
            )
            self.inner.append(header + body)
            return header + body
        size = 19 + len(body) + 4
        end = self.position + size
        event = _framed(self.timestamp, event_type, self.server_id, end, flags, body)
        self.events.append((self.position, event))
        self.position = end
        return event

    @contextlib.contextmanager
    def compressed(self, compression: int = ZSTD) -> Iterator[None]:
        """The events written inside, as one TRANSACTION_PAYLOAD_EVENT at the end."""
        self.inner = []
        try:
            yield
        finally:
            inner, self.inner = b"".join(self.inner), None
        data = zstandard.ZstdCompressor().compress(inner) if compression == ZSTD else inner
        self.transaction_payload(data, compression, len(inner))

    def format_description(self, server_version: str = "8.0.36") -> bytes:
        """FORMAT_DESCRIPTION_EVENT: the file's first event (binlog version 4)."""
        body = (
            struct.pack("<H", 4)
            + server_version.encode().ljust(50, b"\0")
            + struct.pack("<I", self.timestamp)
            + bytes([19, *POST_HEADER_LENGTHS, BINLOG_CHECKSUM_ALG_CRC32])
        )
        return self._event(FORMAT_DESCRIPTION_EVENT, body)

    def mariadb_gtid(self, domain_id: int, seq_no: int, flags: int = 0) -> bytes:
        """MariaDB's GTID_EVENT (type 162, https://mariadb.com/kb/en/gtid_event/), for the
        streams that check MariaDB is read as before: ``domain-server-seq_no``, its flags,
        and 6 bytes of padding (no commit id)."""
        body = struct.pack("<QIB", seq_no, domain_id, flags) + b"\0" * 6
        return self._event(MARIADB_GTID_EVENT, body)

    def previous_gtids(self, executed: Mapping[uuid.UUID, Sequence[tuple[int, int]]]) -> bytes:
        """PREVIOUS_GTIDS_LOG_EVENT: the GTID set before this file, as ``{sid: [(first,
        last)]}`` (written as half-open intervals ``[first, last + 1)``)."""
        body = struct.pack("<Q", len(executed))
        for sid, intervals in executed.items():
            body += sid.bytes + struct.pack("<Q", len(intervals))
            for first, last in intervals:
                body += struct.pack("<qq", first, last + 1)
        return self._event(PREVIOUS_GTIDS_LOG_EVENT, body)

    def gtid(self, sid: uuid.UUID, gno: int, sequence_number: int = 1) -> bytes:
        """GTID_LOG_EVENT: the next transaction is ``sid:gno``."""
        return self._event(GTID_LOG_EVENT, _gtid_body(sid, gno, sequence_number))

    def anonymous_gtid(self, sequence_number: int = 1) -> bytes:
        """ANONYMOUS_GTID_LOG_EVENT (``gtid_mode=OFF``): a transaction with no GTID."""
        return self._event(
            ANONYMOUS_GTID_LOG_EVENT, _gtid_body(uuid.UUID(int=0), 0, sequence_number)
        )

    def query(self, sql: str, schema: str = "", thread_id: int = 7) -> bytes:
        """QUERY_EVENT: ``BEGIN``, ``COMMIT`` or a DDL statement run in ``schema``."""
        status = (
            bytes([Q_FLAGS2_CODE])
            + struct.pack("<I", 0)
            + bytes([Q_SQL_MODE_CODE])
            + struct.pack("<Q", 0)
            + bytes([Q_CHARSET_CODE])
            + struct.pack("<HHH", UTF8MB4_0900_AI_CI, UTF8MB4_0900_AI_CI, UTF8MB4_0900_AI_CI)
        )
        db = schema.encode()
        post_header = struct.pack("<IIBHH", thread_id, 0, len(db), 0, len(status))
        return self._event(QUERY_EVENT, post_header + status + db + b"\0" + sql.encode())

    def table_map(self, table: Table) -> bytes:
        """TABLE_MAP_EVENT with the optional metadata of ``binlog_row_metadata=FULL``."""
        columns = table.columns
        metadata = b"".join(column.metadata() for column in columns)
        body = (
            _table_id(table.table_id)
            + struct.pack("<H", 1)
            + bytes([len(table.schema)])
            + table.schema.encode()
            + b"\0"
            + bytes([len(table.name)])
            + table.name.encode()
            + b"\0"
            + packed(len(columns))
            + bytes(_TYPE_CODES[column.kind] for column in columns)
            + packed(len(metadata))
            + metadata
            + _bits([column.nullable for column in columns], msb_first=False)
            + _optional_metadata(table)
        )
        return self._event(TABLE_MAP_EVENT, body)

    def write_rows(self, table: Table, rows: Sequence[Mapping[str, object]]) -> bytes:
        """WRITE_ROWS_EVENT (v2): inserted rows' after-images."""
        return self._rows(WRITE_ROWS_EVENT, table, [table.image(row) for row in rows], False)

    def update_rows(
        self, table: Table, rows: Sequence[tuple[Mapping[str, object], Mapping[str, object]]]
    ) -> bytes:
        """UPDATE_ROWS_EVENT (v2): (before, after) image pairs."""
        images = [table.image(before) + table.image(after) for before, after in rows]
        return self._rows(UPDATE_ROWS_EVENT, table, images, True)

    def partial_update_rows(
        self, table: Table, rows: Sequence[tuple[Mapping[str, object], Mapping[str, object]]]
    ) -> bytes:
        """PARTIAL_UPDATE_ROWS_EVENT, as MySQL writes updates with
        ``binlog_row_value_options=PARTIAL_JSON``: UPDATE_ROWS v2 whose after-images start
        with their ``value_options`` (a packed integer; 0 here: every value whole, so no
        bitmap of partially updated JSON columns follows)."""
        images = [table.image(b) + packed(0) + table.image(a) for b, a in rows]
        return self._rows(PARTIAL_UPDATE_ROWS_EVENT, table, images, True)

    def delete_rows(self, table: Table, rows: Sequence[Mapping[str, object]]) -> bytes:
        """DELETE_ROWS_EVENT (v2): deleted rows' before-images."""
        return self._rows(DELETE_ROWS_EVENT, table, [table.image(row) for row in rows], False)

    def _rows(self, event_type: int, table: Table, images: list[bytes], update: bool) -> bytes:
        present = _bits([True] * len(table.columns), msb_first=False)
        body = (
            _table_id(table.table_id)
            + struct.pack("<HH", STMT_END_F, 2)  # flags; extra data: only its own length
            + packed(len(table.columns))
            + present
            + (present if update else b"")
            + b"".join(images)
        )
        return self._event(event_type, body)

    def xid(self, xid: int) -> bytes:
        """XID_EVENT: the transaction committed (InnoDB)."""
        return self._event(XID_EVENT, struct.pack("<Q", xid))

    def xa_prepare(
        self, gtrid: bytes, bqual: bytes = b"", format_id: int = 1, one_phase: bool = False
    ) -> bytes:
        """XA_PREPARE_LOG_EVENT (``XA_prepare_event``): one_phase u8, formatID u32, the
        gtrid and bqual lengths u32 each, then both; ``XA PREPARE`` ends its group, ``XA
        COMMIT ... ONE PHASE`` (one_phase) commits it."""
        body = struct.pack("<BIII", one_phase, format_id, len(gtrid), len(bqual))
        return self._event(XA_PREPARE_LOG_EVENT, body + gtrid + bqual)

    def rotate(self, next_file: str, position: int = 4) -> bytes:
        """ROTATE_EVENT at the end of a file: the log goes on in ``next_file``."""
        return self._event(ROTATE_EVENT, struct.pack("<Q", position) + next_file.encode())

    def transaction_payload(
        self, payload: bytes, compression: int = ZSTD, uncompressed_size: int = 0
    ) -> bytes:
        """TRANSACTION_PAYLOAD_EVENT: its header fields, each a packed type, the packed
        length of its value and the packed value, in the order MySQL writes them
        (compression type, uncompressed size unless uncompressed, payload size, end
        mark), then ``payload`` as it is."""
        fields = [(PAYLOAD_COMPRESSION, compression)]
        if compression != NO_COMPRESSION:
            fields.append((PAYLOAD_UNCOMPRESSED_SIZE, uncompressed_size or len(payload)))
        fields.append((PAYLOAD_SIZE, len(payload)))
        header = b"".join(
            packed(kind) + packed(len(packed(value))) + packed(value) for kind, value in fields
        )
        return self._event(TRANSACTION_PAYLOAD_EVENT, header + packed(PAYLOAD_END) + payload)


def artificial_rotate(file_name: str, position: int, server_id: int = 1) -> bytes:
    """The ROTATE_EVENT a server sends first in a dump (timestamp 0, log_pos 0)."""
    body = struct.pack("<Q", position) + file_name.encode()
    return _framed(0, ROTATE_EVENT, server_id, 0, LOG_EVENT_ARTIFICIAL_F, body)


def heartbeat(file_name: str, position: int, server_id: int = 1) -> bytes:
    """HEARTBEAT_LOG_EVENT: the server has nothing more after ``file_name:position``."""
    return _framed(0, HEARTBEAT_LOG_EVENT, server_id, position, 0, file_name.encode())


def as_artificial(event: bytes) -> bytes:
    """``event`` with log_pos 0, as a server re-sends a file's FORMAT_DESCRIPTION_EVENT
    when a dump starts past it."""
    timestamp, event_type, server_id, _, _, flags = struct.unpack_from("<IBIIIH", event)
    return _framed(timestamp, event_type, server_id, 0, flags, event[19:-4])


def _framed(
    timestamp: int, event_type: int, server_id: int, log_pos: int, flags: int, body: bytes
) -> bytes:
    size = 19 + len(body) + 4
    header = struct.pack("<IBIIIH", timestamp, event_type, server_id, size, log_pos, flags)
    return header + body + struct.pack("<I", zlib.crc32(header + body))


def _table_id(table_id: int) -> bytes:
    return struct.pack("<Q", table_id)[:6]


def _gtid_body(sid: uuid.UUID, gno: int, sequence_number: int) -> bytes:
    """Gtid_event: flags, SID, GNO, logical-clock type 2 with last_committed and
    sequence_number; then the 8.0 body: immediate commit timestamp (7 bytes; its top bit
    clear: the original one is the same), transaction length, immediate server version
    (top bit clear: the original one is the same)."""
    post_header = (
        bytes([1])
        + sid.bytes
        + struct.pack("<q", gno)
        + bytes([2])
        + struct.pack("<qq", sequence_number - 1, sequence_number)
    )
    commit_micros = 1_700_000_000_000_000
    return post_header + struct.pack("<Q", commit_micros)[:7] + packed(0) + struct.pack("<I", 80036)


def _optional_metadata(table: Table) -> bytes:
    """The TLV fields MySQL 8 writes with ``binlog_row_metadata=FULL``, in its order."""
    columns = table.columns
    numeric = [column.unsigned for column in columns if column.kind in _NUMERIC]
    names = b"".join(packed(len(c.name.encode())) + c.name.encode() for c in columns)
    indexes = [c.name for c in columns]
    characters = [c for c in columns if c.kind in _CHARACTER]
    binary = b"".join(  # (index among character columns, collation) where not the default
        packed(i) + packed(BINARY_COLLATION) for i, c in enumerate(characters) if c.kind == "blob"
    )
    fields = [
        (SIGNEDNESS, _bits(numeric, msb_first=True)),
        (DEFAULT_CHARSET, packed(UTF8MB4_0900_AI_CI) + binary if characters else b""),
        (COLUMN_NAME, names),
        (SET_STR_VALUE, _str_values(c for c in columns if c.kind == "set")),
        (ENUM_STR_VALUE, _str_values(c for c in columns if c.kind == "enum")),
        (SIMPLE_PRIMARY_KEY, b"".join(packed(indexes.index(k)) for k in table.primary_key)),
        (
            ENUM_AND_SET_DEFAULT_CHARSET,
            packed(UTF8MB4_0900_AI_CI) if any(c.kind in _REAL_TYPES for c in columns) else b"",
        ),
        (COLUMN_VISIBILITY, _bits([True] * len(columns), msb_first=True)),
    ]
    return b"".join(bytes([kind]) + packed(len(value)) + value for kind, value in fields if value)


def _str_values(columns: Iterable[Column]) -> bytes:
    """SET_STR_VALUE / ENUM_STR_VALUE: per column, its value count, then each value."""
    out = b""
    for column in columns:
        out += packed(len(column.values))
        out += b"".join(packed(len(v.encode())) + v.encode() for v in column.values)
    return out
