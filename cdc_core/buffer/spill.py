"""Spill files: a transaction's buffered changes on disk, framed and checksummed.

Layout of one segment file (all integers little-endian)::

    header  := b"RCSPILL1" | u16 txid_len | u32 crc32(txid) | txid (UTF-8)
    record  := u32 length | u32 crc32(seq || payload) | u64 seq | payload (length bytes)
    footer  := u32 0xFFFFFFFF | u32 crc32(count) | u64 count
    segment := header record* footer

A segment is written by appending records and is *sealed* by its footer; after that it never
changes. Reading checks the header, every record's checksum, the footer and the record count
the caller expects, so a flipped byte or a truncated file raises ``SpillCorruptError`` that
names the file, the offset and the transaction. ``TransactionSpill.iter_records`` verifies
all of a transaction's segments before it yields the first record, so a corrupt spill is
never half-read.

The payload of a change is ``encode_change``: ``marshal`` of a tuple of plain values, the
locators as ``cdc_core.state.value_codec.to_marshal_node`` and the images as
``cdc_core.state.image_codec`` has them, so reading a record builds data only. Version 1 wrote a
pickle instead; such a record starts with the pickle ``PROTO`` opcode (0x80), which no
``marshal`` tuple starts with (0x28/0x29, or 0xA8/0xA9 with marshal's reference flag), and
is read with the restricted unpickler of ``cdc_core.state.document`` (segments of transactions
open across the upgrade). Spill files are private to one ``TransactionBuffer`` and are never read by
another program.
"""

from __future__ import annotations

import logging
import marshal
import os
import struct
import uuid
import zlib
from collections.abc import Container, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, cast

from cdc_core.capture.events import Op, RowChange
from cdc_core.capture.position import Position
from cdc_core.disk_full import naming_full_disk
from cdc_core.errors import ContractError, DiskFullError, TerminalError
from cdc_core.state.document import ForbiddenPickleError, StateFileCorruptError, load_legacy_pickle
from cdc_core.state.image_codec import from_image_values, to_image_values
from cdc_core.state.value_codec import (
    MARSHAL_VERSION,
    ValueDecodeError,
    from_marshal_node,
    loads_marshal,
    to_marshal_node,
)

logger = logging.getLogger(__name__)

MAGIC = b"RCSPILL1"
SUFFIX = ".seg"
_HEADER = struct.Struct("<HI")
_FRAME = struct.Struct("<IIQ")
_SEQ = struct.Struct("<Q")
_END = 0xFFFFFFFF
_FIX = "restart from a checkpoint taken before the transaction began, or re-snapshot the tables"


class SpillCorruptError(TerminalError):
    """A spill segment is corrupt, truncated or missing; nothing of it was emitted."""


@dataclass(frozen=True, slots=True)
class SegmentRef:
    """A sealed segment: its file name inside the spill directory and what it holds."""

    name: str
    record_count: int
    size_bytes: int

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or "/" in self.name or not self.name.endswith(SUFFIX):
            raise SpillCorruptError(f"not a spill segment name: {self.name!r}")
        if self.record_count < 0 or self.size_bytes < 0:
            raise SpillCorruptError(f"negative count or size for segment {self.name}")

    def to_dict(self) -> dict[str, Any]:
        """The segment as a checkpoint holds it."""
        return {"name": self.name, "records": self.record_count, "bytes": self.size_bytes}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SegmentRef:
        """The inverse of ``to_dict``."""
        return cls(data["name"], _int(data["records"]), _int(data["bytes"]))


def _int(value: object) -> int:
    if type(value) is not int:
        raise SpillCorruptError(f"expected an integer in a checkpoint, found {value!r}")
    return value


def encode_change(change: RowChange) -> bytes:
    """The spill payload of ``change`` (its ``txid`` is kept by the segment, not per record)."""
    position = change.position
    after, before = change.after, change.before
    record: Any = (  # marshal's plain types only (see to_marshal_node, to_image_values)
        position.value,
        position.text,
        change.op,
        change.table,
        to_marshal_node(change.locator),
        None if after is None else to_image_values(after),
        None if before is None else to_image_values(before),
        to_marshal_node(change.new_locator),
    )
    return marshal.dumps(record, MARSHAL_VERSION)


def decode_change(txid: str, payload: bytes) -> RowChange:
    """The inverse of ``encode_change`` (a version-1 pickle is read by the migration).

    Raises:
        ValueDecodeError: The payload is not a stored change.
        ForbiddenPickleError: A version-1 payload names a class no state holds.
    """
    if payload[:1] == _PICKLE_PROTO:
        return _legacy_change(txid, payload)
    found = loads_marshal(payload)
    if type(found) is not tuple or len(found) != 8 or not _PAIRS.issuperset(map(type, found[5:7])):
        raise ValueDecodeError("a spill record is not a stored change")
    value, text, op, table, locator, after, before, moved_to = found
    if type(text) is not str or type(op) is not str or type(table) is not str:
        raise ValueDecodeError("a spill record's position, op or table is not a str")
    try:
        after = None if after is None else from_image_values(*after)
        before = None if before is None else from_image_values(*before)
    except TypeError as exc:  # an image that is not a pair
        raise ValueDecodeError("a spill record's row image is not a stored image") from exc
    position = Position(value, text)
    locator = from_marshal_node(locator)
    moved = None if moved_to is None else from_marshal_node(moved_to)
    return RowChange(txid, position, cast(Op, op), table, locator, after, before, moved)


_PICKLE_PROTO = b"\x80"
_PAIRS = frozenset({tuple, type(None)})  # a record's images: (values, kinds) or None


def _legacy_change(txid: str, payload: bytes) -> RowChange:
    found = load_legacy_pickle(payload)
    if type(found) is not tuple or len(found) != 8:
        raise ValueDecodeError("a version-1 spill record is not a stored change")
    value, text, op, table, locator, after, before, moved_to = found
    position = Position(value, text)
    return RowChange(txid, position, cast(Op, op), table, locator, after, before, moved_to)


def _crc(seq: int, payload: bytes) -> int:
    return zlib.crc32(payload, zlib.crc32(_SEQ.pack(seq)))


def _corrupt(path: Path, offset: int, txid: str, what: str) -> SpillCorruptError:
    context = {"file": str(path), "offset": offset, "txid": txid}
    message = (
        f"spill segment {path} of transaction {txid} is corrupt at byte {offset}: {what}; {_FIX}"
    )
    return SpillCorruptError(message, context)


def _header_bytes(txid: str) -> bytes:
    raw = txid.encode("utf-8")
    return MAGIC + _HEADER.pack(len(raw), zlib.crc32(raw)) + raw


def _read_exact(handle: BinaryIO, size: int, path: Path, txid: str, what: str) -> bytes:
    offset = handle.tell()
    data = handle.read(size)
    if len(data) != size:
        raise _corrupt(path, offset, txid, f"file ends inside the {what} (truncated)")
    return data


def _check_header(handle: BinaryIO, path: Path, txid: str) -> None:
    if _read_exact(handle, len(MAGIC), path, txid, "header") != MAGIC:
        raise _corrupt(path, 0, txid, "not a replcheck spill segment (bad magic)")
    size, crc = _HEADER.unpack(_read_exact(handle, _HEADER.size, path, txid, "header"))
    raw = _read_exact(handle, size, path, txid, "header")
    if zlib.crc32(raw) != crc or raw != txid.encode("utf-8"):
        raise _corrupt(path, len(MAGIC), txid, "the header names another transaction")


def iter_segment(path: Path, txid: str, expected_count: int) -> Iterator[tuple[int, bytes]]:
    """Yield ``(seq, payload)`` of a sealed segment, checking every checksum and the footer.

    Raises:
        SpillCorruptError: The file is missing, corrupt, truncated or holds another count.
    """
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise _corrupt(path, 0, txid, f"cannot open it ({exc.strerror})") from exc
    with handle:
        _check_header(handle, path, txid)
        yield from _iter_frames(handle, path, txid, expected_count)


def _iter_frames(
    handle: BinaryIO, path: Path, txid: str, expected_count: int
) -> Iterator[tuple[int, bytes]]:
    count = 0
    while True:
        offset = handle.tell()
        length, crc, seq = _FRAME.unpack(_read_exact(handle, _FRAME.size, path, txid, "frame"))
        if length == _END:
            _check_footer(handle, path, txid, (offset, crc, seq), (count, expected_count))
            return
        payload = _read_exact(handle, length, path, txid, "record")
        if _crc(seq, payload) != crc:
            raise _corrupt(path, offset, txid, "record checksum mismatch")
        count += 1
        yield seq, payload


def _check_footer(
    handle: BinaryIO,
    path: Path,
    txid: str,
    frame: tuple[int, int, int],
    counts: tuple[int, int],
) -> None:
    offset, crc, footer_count = frame
    if zlib.crc32(_SEQ.pack(footer_count)) != crc:
        raise _corrupt(path, offset, txid, "footer checksum mismatch")
    if not footer_count == counts[0] == counts[1]:
        found = f"footer says {footer_count}, read {counts[0]}, expected {counts[1]} records"
        raise _corrupt(path, offset, txid, found)
    if handle.read(1):
        raise _corrupt(path, handle.tell() - 1, txid, "bytes after the footer")


@contextmanager
def _decoding(path: Path, txid: str) -> Iterator[None]:
    """Name the segment in the error of a record that does not decode."""
    try:
        yield
    except ForbiddenPickleError as exc:
        message = f"spill segment {path} of transaction {txid}: {exc.message}; {_FIX}"
        raise ForbiddenPickleError(message, {"file": str(path), **exc.context}) from exc
    except (ValueDecodeError, StateFileCorruptError, ContractError) as exc:
        raise _corrupt(path, 0, txid, f"a record is not a stored change ({exc})") from exc


def fsync_directory(directory: Path) -> None:
    """Make file creations and deletions in ``directory`` durable (POSIX)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class TransactionSpill:
    """The segment files of one open transaction, oldest first.

    Records are appended to a current segment, which is sealed when it reaches
    ``segment_max_bytes``, before it is read, and at checkpoints; sealed segments never
    change, so a checkpoint can refer to them by name.

    Args:
        spill_dir: The directory holding the segments (owned by one buffer).
        txid: The transaction whose changes these are.
        segments: Sealed segments restored from a checkpoint.
        segment_max_bytes: When to start a new segment.
    """

    def __init__(
        self,
        spill_dir: Path,
        txid: str,
        segments: Sequence[SegmentRef] = (),
        segment_max_bytes: int = 64 << 20,
    ) -> None:
        self.spill_dir = spill_dir
        self.txid = txid
        self.segment_max_bytes = segment_max_bytes
        self._sealed: list[SegmentRef] = list(segments)
        self._unsynced: set[str] = set()
        self._current: Path | None = None
        self._current_count = 0
        self._current_size = 0

    @property
    def segments(self) -> tuple[SegmentRef, ...]:
        """The sealed segments, oldest first (the current one is not among them)."""
        return tuple(self._sealed)

    @property
    def size_bytes(self) -> int:
        """Bytes on disk, the unsealed segment included."""
        return sum(ref.size_bytes for ref in self._sealed) + self._current_size

    def names(self) -> list[str]:
        """File names of every segment, the unsealed one included."""
        names = [ref.name for ref in self._sealed]
        return [*names, self._current.name] if self._current is not None else names

    def append(self, records: Sequence[tuple[int, bytes]]) -> int:
        """Append ``(seq, payload)`` records, starting new segments as they fill up.

        Returns:
            The bytes written.
        """
        written = start = 0
        while start < len(records):
            if self._current is None:
                self._start_segment()
            count, size = self._write(records, start)
            written += size
            start += count
        return written

    def _write(self, records: Sequence[tuple[int, bytes]], start: int) -> tuple[int, int]:
        """Write records from ``start`` until the current segment is full; seal it if so."""
        assert self._current is not None
        count = size = 0
        with self._writing_current(), self._current.open("ab", buffering=1 << 20) as handle:
            for index in range(start, len(records)):
                seq, payload = records[index]
                handle.write(_FRAME.pack(len(payload), _crc(seq, payload), seq))
                handle.write(payload)
                count += 1
                size += _FRAME.size + len(payload)
                if self._current_size + size >= self.segment_max_bytes:
                    break
        self._current_count += count
        self._current_size += size
        if self._current_size >= self.segment_max_bytes:
            self.seal()
        return count, size

    def _start_segment(self) -> None:
        self._current = self.spill_dir / f"{uuid.uuid4().hex}{SUFFIX}"
        header = _header_bytes(self.txid)
        with self._writing_current(), self._current.open("xb") as handle:
            handle.write(header)
        self._current_count = 0
        self._current_size = len(header)

    @contextmanager
    def _writing_current(self) -> Iterator[None]:
        """Name the unsealed segment on a full disk, and delete it: no checkpoint refers to
        a segment before it is sealed, and what it held is in no other file, so this spill
        fails as corrupt if used again (a restart restores the checkpoint's instead)."""
        assert self._current is not None
        try:
            with naming_full_disk(self._current, self.spill_dir):
                yield
        except DiskFullError:
            self._current.unlink(missing_ok=True)
            raise

    def seal(self) -> None:
        """Write the footer of the current segment, if any; later records start a new one."""
        if self._current is None:
            return
        footer = _FRAME.pack(_END, zlib.crc32(_SEQ.pack(self._current_count)), self._current_count)
        with self._writing_current(), self._current.open("ab") as handle:
            handle.write(footer)
        size = self._current_size + len(footer)
        self._sealed.append(SegmentRef(self._current.name, self._current_count, size))
        self._unsynced.add(self._current.name)
        self._current = None
        self._current_count = self._current_size = 0

    def sync(self) -> None:
        """Seal, then fsync every segment not yet known to be on stable storage."""
        self.seal()
        for name in sorted(self._unsynced):
            path = self.spill_dir / name
            with naming_full_disk(path, self.spill_dir), path.open("rb+") as handle:
                os.fsync(handle.fileno())
        self._unsynced.clear()

    def verify(self) -> None:
        """Seal, then read every segment once, checking it (no record is decoded)."""
        self.seal()
        for ref in self._sealed:
            self._check_size(ref)
            for _ in iter_segment(self.spill_dir / ref.name, self.txid, ref.record_count):
                pass

    def _check_size(self, ref: SegmentRef) -> None:
        path = self.spill_dir / ref.name
        try:
            actual = path.stat().st_size
        except OSError as exc:
            raise _corrupt(path, 0, self.txid, f"cannot stat it ({exc.strerror})") from exc
        if actual != ref.size_bytes:
            what = f"{actual} bytes on disk, {ref.size_bytes} written (truncated or extended)"
            raise _corrupt(path, min(actual, ref.size_bytes), self.txid, what)

    def iter_records(self) -> Iterator[tuple[int, bytes]]:
        """Every ``(seq, payload)`` in order, after verifying all segments first."""
        self.verify()
        for ref in list(self._sealed):
            yield from iter_segment(self.spill_dir / ref.name, self.txid, ref.record_count)

    def iter_changes(self, skipped: Container[int]) -> Iterator[tuple[int, RowChange]]:
        """Every ``(seq, change)`` whose seq is not ``skipped``, in order, after verifying
        all segments first.

        Raises:
            SpillCorruptError: A segment is corrupt, or a record is not a stored change.
            ForbiddenPickleError: A version-1 record names a class no state holds.
        """
        self.verify()
        for ref in list(self._sealed):
            path = self.spill_dir / ref.name
            with _decoding(path, self.txid):
                for seq, payload in iter_segment(path, self.txid, ref.record_count):
                    if seq not in skipped:
                        yield seq, decode_change(self.txid, payload)

    def check_files(self) -> None:
        """Check that every sealed segment exists with the size it was written with."""
        for ref in self._sealed:
            self._check_size(ref)
