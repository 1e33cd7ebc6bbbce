"""The ``pgoutput`` logical replication messages, protocol version 2, parsed from bytes.

One ``parse_message`` call turns the payload of one XLogData message into a frozen value.
Reference: "Logical Replication Message Formats",
https://www.postgresql.org/docs/15/protocol-logicalrep-message-formats.html . Integers are
big-endian; strings are NUL-terminated UTF-8; timestamps are microseconds since
2000-01-01 UTC. Inside a stream block (between Stream Start and Stream Stop) the data
messages (Relation, Type, Insert, Update, Delete, Truncate, Message) carry the xid of the
(sub)transaction they belong to after their type byte; outside one they do not, so the
caller says whether it is inside a stream block.

Tuple data: one entry per column, ``None`` for NULL, ``UNCHANGED_TOAST`` for an unchanged
TOASTed value that the server did not send (kind ``u``), ``Text`` for a value in text form
and ``bytes`` for a value in binary (send/recv) form.
"""

from __future__ import annotations

import datetime as dt
import struct
from dataclasses import dataclass
from typing import Final

from cdc_core.errors import TerminalError

PG_EPOCH: Final = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)


class ProtocolError(TerminalError):
    """A message does not follow the pgoutput protocol (a server or replcheck bug)."""


class _UnchangedToast:
    """The type of ``UNCHANGED_TOAST``."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNCHANGED_TOAST"


UNCHANGED_TOAST: Final = _UnchangedToast()
"""A TOASTed column an update left unchanged: the server sent no value for it."""


@dataclass(frozen=True, slots=True)
class Text:
    """A column value the server sent in text form (its type has no binary send function)."""

    value: str


TupleValue = bytes | Text | _UnchangedToast | None


@dataclass(frozen=True, slots=True)
class BeginMessage:
    """A (not streamed) transaction starts; its changes follow, then its commit."""

    final_lsn: int  # where its commit record starts
    commit_ts: dt.datetime
    xid: int


@dataclass(frozen=True, slots=True)
class CommitMessage:
    """The transaction of the last Begin committed."""

    commit_lsn: int
    end_lsn: int  # the end of its commit record: the transaction's commit_pos
    commit_ts: dt.datetime


@dataclass(frozen=True, slots=True)
class RelationColumn:
    """A column of a relation message; ``key`` marks replica identity columns."""

    name: str
    type_oid: int
    type_modifier: int
    key: bool


@dataclass(frozen=True, slots=True)
class RelationMessage:
    """A table's current shape; sent before its first change and after it changed."""

    xid: int | None
    relation_id: int
    namespace: str
    name: str
    replica_identity: str  # d default, n nothing, f full, i index
    columns: tuple[RelationColumn, ...]


@dataclass(frozen=True, slots=True)
class TypeMessage:
    """A non-builtin type used by a following relation (its name only)."""

    xid: int | None
    type_oid: int
    namespace: str
    name: str


@dataclass(frozen=True, slots=True)
class InsertMessage:
    """A row was inserted."""

    xid: int | None
    relation_id: int
    new: tuple[TupleValue, ...]


@dataclass(frozen=True, slots=True)
class UpdateMessage:
    """A row was updated; ``old`` is sent with REPLICA IDENTITY FULL (kind ``O``) or when the
    replica identity key changed (kind ``K``: only key columns carry values)."""

    xid: int | None
    relation_id: int
    old_kind: str | None  # "K", "O" or None
    old: tuple[TupleValue, ...] | None
    new: tuple[TupleValue, ...]


@dataclass(frozen=True, slots=True)
class DeleteMessage:
    """A row was deleted; ``old`` holds the key (``K``) or the whole row (``O``)."""

    xid: int | None
    relation_id: int
    old_kind: str
    old: tuple[TupleValue, ...]


@dataclass(frozen=True, slots=True)
class TruncateMessage:
    """Tables were truncated."""

    xid: int | None
    relation_ids: tuple[int, ...]
    cascade: bool
    restart_identity: bool


@dataclass(frozen=True, slots=True)
class StreamStartMessage:
    """A block of an in-progress transaction's changes starts."""

    xid: int
    first_segment: bool


@dataclass(frozen=True, slots=True)
class StreamStopMessage:
    """The current stream block ends."""


@dataclass(frozen=True, slots=True)
class StreamCommitMessage:
    """A streamed transaction committed."""

    xid: int
    commit_lsn: int
    end_lsn: int
    commit_ts: dt.datetime


@dataclass(frozen=True, slots=True)
class StreamAbortMessage:
    """A streamed transaction (``subxid == xid``) or one of its subtransactions aborted."""

    xid: int
    subxid: int


@dataclass(frozen=True, slots=True)
class LogicalMessage:
    """A message written by ``pg_logical_emit_message`` (sent with ``messages 'true'``);
    a transactional one comes in its transaction, and only if that commits."""

    xid: int | None
    transactional: bool
    lsn: int
    prefix: str
    content: bytes


@dataclass(frozen=True, slots=True)
class OtherMessage:
    """A message replcheck does not act on (Origin)."""

    kind: str


Message = (
    BeginMessage
    | CommitMessage
    | RelationMessage
    | TypeMessage
    | InsertMessage
    | UpdateMessage
    | DeleteMessage
    | TruncateMessage
    | StreamStartMessage
    | StreamStopMessage
    | StreamCommitMessage
    | StreamAbortMessage
    | LogicalMessage
    | OtherMessage
)

STREAMED_KINDS: Final = frozenset("RYIUDTM")
"""Message kinds that carry an xid inside a stream block."""


class _Reader:
    """A cursor over one message's bytes."""

    __slots__ = ("at", "data")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def take(self, size: int) -> bytes:
        end = self.at + size
        if end > len(self.data):
            raise ProtocolError(f"pgoutput message truncated: {len(self.data)} bytes")
        chunk = self.data[self.at : end]
        self.at = end
        return chunk

    def unpack(self, fmt: str) -> tuple[int, ...]:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))

    def int8(self) -> int:
        return self.unpack(">B")[0]

    def int16(self) -> int:
        return self.unpack(">h")[0]

    def int32(self) -> int:
        return self.unpack(">i")[0]

    def uint32(self) -> int:
        return self.unpack(">I")[0]

    def int64(self) -> int:
        return self.unpack(">q")[0]

    def lsn(self) -> int:
        return self.unpack(">Q")[0]

    def timestamp(self) -> dt.datetime:
        return PG_EPOCH + dt.timedelta(microseconds=self.int64())

    def string(self) -> str:
        end = self.data.index(b"\x00", self.at)
        text = self.data[self.at : end].decode("utf-8")
        self.at = end + 1
        return text

    def char(self) -> str:
        return chr(self.int8())


def parse_message(payload: bytes, in_stream: bool) -> Message:
    """The message of one XLogData payload.

    Args:
        payload: The payload (starts with the message type byte).
        in_stream: Whether the message lies between Stream Start and Stream Stop.

    Raises:
        ProtocolError: The bytes are not a pgoutput message.
    """
    if not payload:
        raise ProtocolError("empty pgoutput message")
    reader = _Reader(payload)
    kind = reader.char()
    xid = reader.uint32() if in_stream and kind in STREAMED_KINDS else None
    parse = _PARSERS.get(kind)
    if parse is None:
        if kind == "O":
            return OtherMessage(kind)
        raise ProtocolError(f"unknown pgoutput message type {kind!r}")
    return parse(reader, xid)


def _begin(reader: _Reader, _: int | None) -> Message:
    return BeginMessage(reader.lsn(), reader.timestamp(), reader.uint32())


def _commit(reader: _Reader, _: int | None) -> Message:
    reader.int8()  # flags, unused
    return CommitMessage(reader.lsn(), reader.lsn(), reader.timestamp())


def _relation(reader: _Reader, xid: int | None) -> Message:
    relation_id, namespace, name = reader.uint32(), reader.string(), reader.string()
    identity, count = reader.char(), reader.int16()
    columns = []
    for _ in range(count):
        flags, column = reader.int8(), reader.string()
        columns.append(RelationColumn(column, reader.uint32(), reader.int32(), bool(flags & 1)))
    return RelationMessage(xid, relation_id, namespace, name, identity, tuple(columns))


def _type(reader: _Reader, xid: int | None) -> Message:
    return TypeMessage(xid, reader.uint32(), reader.string(), reader.string())


def _insert(reader: _Reader, xid: int | None) -> Message:
    relation_id = reader.uint32()
    _expect(reader, "N")
    return InsertMessage(xid, relation_id, _tuple(reader))


def _update(reader: _Reader, xid: int | None) -> Message:
    relation_id = reader.uint32()
    kind = reader.char()
    old_kind, old = None, None
    if kind in ("K", "O"):
        old_kind, old = kind, _tuple(reader)
        kind = reader.char()
    if kind != "N":
        raise ProtocolError(f"update message: expected a new tuple, found {kind!r}")
    return UpdateMessage(xid, relation_id, old_kind, old, _tuple(reader))


def _delete(reader: _Reader, xid: int | None) -> Message:
    relation_id = reader.uint32()
    kind = reader.char()
    if kind not in ("K", "O"):
        raise ProtocolError(f"delete message: expected an old tuple, found {kind!r}")
    return DeleteMessage(xid, relation_id, kind, _tuple(reader))


def _truncate(reader: _Reader, xid: int | None) -> Message:
    count, options = reader.int32(), reader.int8()
    relation_ids = tuple(reader.uint32() for _ in range(count))
    return TruncateMessage(xid, relation_ids, bool(options & 1), bool(options & 2))


def _stream_start(reader: _Reader, _: int | None) -> Message:
    return StreamStartMessage(reader.uint32(), reader.int8() == 1)


def _stream_stop(reader: _Reader, _: int | None) -> Message:
    return StreamStopMessage()


def _stream_commit(reader: _Reader, _: int | None) -> Message:
    xid = reader.uint32()
    reader.int8()  # flags, unused
    return StreamCommitMessage(xid, reader.lsn(), reader.lsn(), reader.timestamp())


def _stream_abort(reader: _Reader, _: int | None) -> Message:
    # Protocol version 4 (streaming = parallel) appends the abort LSN and time; v2 does not.
    return StreamAbortMessage(reader.uint32(), reader.uint32())


def _logical_message(reader: _Reader, xid: int | None) -> Message:
    transactional = bool(reader.int8() & 1)
    lsn, prefix = reader.lsn(), reader.string()
    return LogicalMessage(xid, transactional, lsn, prefix, reader.take(reader.int32()))


def _expect(reader: _Reader, kind: str) -> None:
    found = reader.char()
    if found != kind:
        raise ProtocolError(f"expected tuple kind {kind!r}, found {found!r}")


_LENGTH = struct.Struct(">i")


def _tuple(reader: _Reader) -> tuple[TupleValue, ...]:
    # The hot loop of decoding: offsets kept locally rather than through _Reader calls.
    data, at = reader.data, reader.at
    (count,) = struct.unpack_from(">h", data, at)
    at += 2
    values: list[TupleValue] = []
    for _ in range(count):
        kind = data[at] if at < len(data) else -1
        at += 1
        if kind == 0x62 or kind == 0x74:  # b, t: binary (the commonest) or text
            (length,) = _LENGTH.unpack_from(data, at)
            chunk = data[at + 4 : at + 4 + length]
            at += 4 + length
            values.append(chunk if kind == 0x62 else Text(chunk.decode("utf-8")))
        elif kind == 0x6E:  # n
            values.append(None)
        elif kind == 0x75:  # u
            values.append(UNCHANGED_TOAST)
        else:
            raise ProtocolError(f"unknown tuple value kind {kind!r}")
    if at > len(data):
        raise ProtocolError(f"pgoutput message truncated: {len(data)} bytes")
    reader.at = at
    return tuple(values)


_PARSERS = {
    "B": _begin,
    "C": _commit,
    "R": _relation,
    "Y": _type,
    "I": _insert,
    "U": _update,
    "D": _delete,
    "T": _truncate,
    "S": _stream_start,
    "E": _stream_stop,
    "c": _stream_commit,
    "A": _stream_abort,
    "M": _logical_message,
}
