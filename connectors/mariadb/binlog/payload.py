"""MySQL's compressed transactions: the events inside a TRANSACTION_PAYLOAD_EVENT.

With ``binlog_transaction_compression=ON`` MySQL 8 writes a transaction's events (its
``BEGIN``, table maps, rows and ``XID``) into one zstd frame inside a
TRANSACTION_PAYLOAD_EVENT, after the transaction's GTID event
(https://dev.mysql.com/doc/refman/8.0/en/binary-log-transaction-compression.html). The
event's header is a list of fields, each a packed type, the packed length of its value and
the packed value (``mysql::binlog::event::codecs::binary::Transaction_payload::decode``):
2 the compression type (0 zstd, 255 none), 3 the uncompressed size, 1 the payload size,
0 the end of the header. The events inside carry no checksum (the payload event's own
covers them) and are framed by their headers' sizes.
"""

from __future__ import annotations

import struct

from cdc_core.drivers import driver_import

OTW_END, OTW_PAYLOAD_SIZE, OTW_COMPRESSION, OTW_UNCOMPRESSED_SIZE = 0, 1, 2, 3
ZSTD, NO_COMPRESSION = 0, 255
HEADER_SIZE = 19  # the common event header: timestamp, type, server id, size, log_pos, flags


class UndecodablePayloadError(ValueError):
    """A payload this reader cannot decode (another compression, a damaged frame)."""


def inner_events(body: bytes) -> list[bytes]:
    """The events (header and body each, no checksum) of a payload event's ``body``.

    Raises:
        UndecodablePayloadError: The compression is not zstd or none, or the payload does
            not decode to whole events of the announced size.
    """
    fields, at = _fields(body)
    compression = fields.get(OTW_COMPRESSION, NO_COMPRESSION)
    payload = body[at : at + fields.get(OTW_PAYLOAD_SIZE, len(body) - at)]
    if compression == NO_COMPRESSION:
        data = payload
    elif compression == ZSTD:
        data = _unzstd(payload, fields.get(OTW_UNCOMPRESSED_SIZE, 0))
    else:
        raise UndecodablePayloadError(f"compression type {compression}")
    return _split(data)


def _fields(body: bytes) -> tuple[dict[int, int], int]:
    """The header's fields by type, and where the payload starts."""
    fields: dict[int, int] = {}
    at = 0
    while at < len(body):
        kind, at = _packed(body, at)
        if kind == OTW_END:
            return fields, at
        length, at = _packed(body, at)
        if kind in (OTW_PAYLOAD_SIZE, OTW_COMPRESSION, OTW_UNCOMPRESSED_SIZE):
            fields[kind], _ = _packed(body, at)
        at += length  # a field this reader does not know is skipped by its length
    raise UndecodablePayloadError("the header has no end mark")


def _packed(data: bytes, at: int) -> tuple[int, int]:
    """A packed integer (``net_field_length``) at ``at``, and where it ends."""
    if at >= len(data):
        raise UndecodablePayloadError("the header ends inside a field")
    first = data[at]
    if first < 251:
        return first, at + 1
    width = {0xFC: 2, 0xFD: 3, 0xFE: 8}.get(first)
    if width is None or at + 1 + width > len(data):
        raise UndecodablePayloadError(f"a packed integer starts with {first:#x}")
    return int.from_bytes(data[at + 1 : at + 1 + width], "little"), at + 1 + width


def _unzstd(payload: bytes, size: int) -> bytes:
    with driver_import("a MySQL compressed transaction"):
        import zstandard

    try:  # the frame may not say its size: the header's bounds the output
        return zstandard.ZstdDecompressor().decompress(payload, max_output_size=size)
    except zstandard.ZstdError as exc:
        raise UndecodablePayloadError(f"a damaged zstd frame ({exc})") from exc


def _split(data: bytes) -> list[bytes]:
    events, at = [], 0
    while at < len(data):
        if at + HEADER_SIZE > len(data):
            raise UndecodablePayloadError("the payload ends inside an event header")
        (size,) = struct.unpack_from("<I", data, at + 9)
        if size < HEADER_SIZE or at + size > len(data):
            raise UndecodablePayloadError(f"an event of {size} bytes at {at} of {len(data)}")
        events.append(data[at : at + size])
        at += size
    return events
