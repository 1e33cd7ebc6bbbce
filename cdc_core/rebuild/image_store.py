"""The row image store of the full-width rebuild (DESIGN.md, "Data flow").

``RowImageStore`` keeps, per source table and row locator (primary key values or a physical
row id such as an Oracle ROWID), the full row image as of each change that touched it. It
appends versions instead of replacing them, so re-reading an earlier part of the log, or
rewinding to an earlier position on purpose, still finds the image as of that position.

A version is keyed by ``(table, locator, position, seq)``: the transaction's ``commit_pos``
and the change's ``seq`` inside it, which together order every change in commit order (the
order the lake uses, ``_commit_pos`` then ``_seq``). An image of ``None`` is a tombstone
(deleted row). Truncates are table-level markers at ``(table, position, seq)`` that hide every
older version of the table, so a truncate costs one write however large the table is.

The backend is LMDB (the ``lmdb`` package), chosen by ``bench/bench_image_store.py`` over
SQLite and RocksDB: it was the only candidate above 100k random lookups/s. Versions live in
one ordered key space, ``len(table) table len(locator) locator position seq`` (lengths and
numbers big-endian), so a row's versions are adjacent and sorted by position, and "latest
version at or before a point" is one ``set_range`` seek and at most one step back. The
locator part is ``to_locator_bytes``; values are ``to_image_bytes`` (or a tombstone byte).

Crash safety: every write goes into one LMDB write transaction that only ``flush`` commits
(LMDB syncs the data and then the meta page on commit, so a flush is durable when it
returns). LMDB never overwrites live pages (copy-on-write B+tree): a crash between flushes
loses the uncommitted transaction, and the next open sees exactly the state of the last
flush -- the old state or the new one, never a mix, with no recovery step. The pipeline
therefore calls ``flush`` *before* it records a checkpoint; after a restart it re-reads the
log from the checkpoint's restart position, and re-applying a change writes the same
version key again (idempotent), so a store that is ahead of the checkpoint is fine.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import logging
from collections.abc import Hashable, Iterator, Mapping
from contextlib import AbstractContextManager
from datetime import date, datetime, time
from decimal import Decimal
from pathlib import Path
from uuid import UUID

from cdc_core.capture.position import MAX_POSITION, Position
from cdc_core.disk_full import naming_full_disk, raise_if_disk_full
from cdc_core.errors import ContractError, TerminalError
from cdc_core.state import image_codec
from cdc_core.state.document import ForbiddenPickleError, StateFileCorruptError, load_legacy_pickle
from cdc_core.state.image_codec import to_image_bytes
from cdc_core.state.lmdb_file import check_data_file, check_lock_file
from cdc_core.state.value_codec import ValueDecodeError

logger = logging.getLogger(__name__)

_MAX_SEQ = 2**63 - 1
_LONG_LOCATOR = 256  # bytes: longer locators are hashed (LMDB keys hold at most 511)
_FORMAT_VERSION = 2  # 1: rare values pickled; still read (see from_image_bytes)
_READS_FORMATS = (1, 2)
_TOMBSTONE = b"\x00"  # a version's value: this byte for a deleted row, else _IMAGE + image
_IMAGE = b"\x01"
_VERSION_SUFFIX = 16  # big-endian position (8 bytes) and seq (8 bytes) end every version key


class BelowRetentionError(TerminalError):
    """A lookup asked for a position older than the store's retention position."""


class ImageStoreCorruptError(StateFileCorruptError):
    """The store's data file is cut short or is not an LMDB file (refused before mapping).

    ``store`` in its context is the store's directory, ``path`` its data file.
    """


# -- locator keys ---------------------------------------------------------------------------


def to_locator_bytes(locator: Hashable) -> bytes:
    """Serialise a locator so that locators equal in Python give equal bytes (and NaNs,
    which Python never finds equal, one value, as the databases compare them).

    A locator is a string (a ROWID) or a tuple of scalars (key values). Every element is a
    type tag, a 4-byte big-endian length and a payload, so no encoding is a prefix of another
    and ``("a|b", "c")`` differs from ``("a", "b|c")``. Numbers are normalised the way Python
    compares them: ``1``, ``1.0`` and ``Decimal("1.00")`` are one locator; ``True`` is not.

    Raises:
        ContractError: The locator, or one of its elements, has an unsupported type.
    """
    if isinstance(locator, str):
        return b"S" + locator.encode("utf-8", "surrogatepass")
    if isinstance(locator, tuple):
        return b"T" + b"".join(_element_bytes(value) for value in locator)
    raise ContractError(f"a row locator must be a str or a tuple, not {type(locator).__name__}")


def _element_bytes(value: object) -> bytes:
    # Fast paths for the commonest key types; _tagged gives the same bytes for them.
    if type(value) is int:
        payload = str(value).encode()
        return b"i" + len(payload).to_bytes(4, "big") + payload
    if type(value) is str:
        payload = value.encode("utf-8", "surrogatepass")
        return b"s" + len(payload).to_bytes(4, "big") + payload
    tag, payload = _tagged(value)
    return tag + len(payload).to_bytes(4, "big") + payload


def _tagged(value: object) -> tuple[bytes, bytes]:
    if value is None:
        return b"n", b""
    if isinstance(value, bool):  # before int: bool is an int subclass
        return b"b", b"1" if value else b"0"
    if isinstance(value, (int, float, Decimal)):
        return _number(value)
    if isinstance(value, str):
        return b"s", value.encode("utf-8", "surrogatepass")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return b"y", bytes(value)
    if isinstance(value, (datetime, date, time)):  # datetime first: it is a date subclass
        return (b"t" if isinstance(value, datetime) else b"a"), value.isoformat().encode()
    if isinstance(value, UUID):
        return b"u", value.bytes
    raise ContractError(f"a row locator element cannot be a {type(value).__name__}")


def _number(value: int | float | Decimal) -> tuple[bytes, bytes]:
    if isinstance(value, int):
        return b"i", str(value).encode()
    exact = Decimal(value)  # exact for floats, so 0.1 == Decimal(0.1) as in Python
    if exact.is_nan() or exact.is_infinite():
        # A table without a key is located by all its values, NaN and infinities too; the
        # databases compare NaN equal to NaN (``cdc_core.rebuild.copies``), so all NaNs are one.
        return b"f", (b"nan" if exact.is_nan() else b"-inf" if exact < 0 else b"inf")
    if exact == exact.to_integral_value():
        return b"i", str(int(exact)).encode()
    return b"d", str(exact.normalize()).encode()


# -- row image values -------------------------------------------------------------------------

# Format 2 stores images as ``cdc_core.state.image_codec.to_image_bytes``. Format 1 was the same
# except that rare values were pickled (kind 4): its versions are still read, the pickles
# with the restricted unpickler only, until retention drops them.
_STORE_FIX = "delete the store directory (state_dir/images) and re-snapshot the tables"
# A store cut short lost images the pipeline still needs: only a new snapshot rebuilds them.
_REBUILD_FIX = (
    "rebuild the store from a new snapshot of the pipeline's tables: remove the state"
    " directory and the pipeline's lake tables, then run `cdc run` again to load them anew"
)


def from_image_bytes(data: bytes) -> dict[str, object]:
    """The inverse of ``to_image_bytes``; also reads the row images of format 1.

    Raises:
        ValueDecodeError: The bytes are not a stored row image.
        ForbiddenPickleError: A format-1 image pickles a class no state holds.
    """
    return image_codec.from_image_bytes(data, load_legacy_pickle)


# -- the store --------------------------------------------------------------------------------


def _row_prefix(table: str, locator: Hashable) -> bytes:
    """The key prefix of one row's versions: length-prefixed table, then locator bytes.

    LMDB keys hold at most 511 bytes, and the locator of a table without a key is all its
    values: a long one is stood for by its SHA-256 (tagged ``#``, which no locator's own
    bytes start with). Nothing reads a locator back from a key."""
    loc = to_locator_bytes(locator)
    if len(loc) > _LONG_LOCATOR:
        loc = b"#" + hashlib.sha256(loc).digest()
    return _table_prefix(table) + len(loc).to_bytes(4, "big") + loc


@functools.lru_cache(maxsize=4096)
def _table_prefix(table: str) -> bytes:
    name = table.encode("utf-8", "surrogatepass")
    return len(name).to_bytes(2, "big") + name


def _table_of(key: bytes) -> str:
    return key[2 : 2 + int.from_bytes(key[:2], "big")].decode("utf-8", "surrogatepass")


def _point(position: int, seq: int) -> bytes:
    return position.to_bytes(8, "big") + seq.to_bytes(8, "big")


def _point_of(key: bytes) -> tuple[int, int]:
    return int.from_bytes(key[-16:-8], "big"), int.from_bytes(key[-8:], "big")


class RowImageStore:
    """Full row images per (table, locator), one version per change, on disk (LMDB).

    Args:
        path: The store's directory; created if missing. It belongs to one pipeline.
        map_gb: The most the store may grow to (LMDB reserves the address space, not disk).

    Writes are visible to lookups at once but durable only after ``flush`` (see the module
    docstring for the crash-safety argument). One process may open a path at a time.
    """

    def __init__(self, path: Path, *, map_gb: int = 256) -> None:
        import lmdb  # a declared dependency, imported here so the module loads without it

        self.path = path
        self._data = path / "data.mdb"
        with self._writing():
            path.mkdir(parents=True, exist_ok=True)
            _check_data_file(path)
            check_lock_file(path / "lock.mdb")
            # readahead off: lookups are random, so reading ahead only evicts useful pages.
            self._env = lmdb.open(str(path), map_size=map_gb << 30, max_dbs=3, readahead=False)
            self._versions = self._env.open_db(b"versions")
            self._truncates = self._env.open_db(b"truncations")
            self._meta = self._env.open_db(b"meta")
        self._txn = self._env.begin(write=True)
        self._cursor = self._txn.cursor(self._versions)
        self._check_format()
        self._truncations = self._load_truncations()
        self._floor = self._meta_int(b"retention_floor")

    def _writing(self) -> AbstractContextManager[None]:
        """A full disk met inside names the store's data file (``cdc_core.disk_full``)."""
        return naming_full_disk(self._data, self.path)

    def _check_format(self) -> None:
        version = self._meta_int(b"format_version")
        if version is None:
            self._txn.put(b"format_version", _FORMAT_VERSION.to_bytes(8, "big"), db=self._meta)
        elif version in _READS_FORMATS and version != _FORMAT_VERSION:
            # Format 2 writes only what this release reads: an older one must refuse it.
            self._txn.put(b"format_version", _FORMAT_VERSION.to_bytes(8, "big"), db=self._meta)
        elif version != _FORMAT_VERSION:
            self._txn.abort()
            self._env.close()
            raise TerminalError(
                f"row image store {self.path} has format {version}, expected {_FORMAT_VERSION};"
                " delete it and re-snapshot the tables",
            )

    def _meta_int(self, name: bytes) -> int | None:
        value = self._txn.get(name, db=self._meta)
        return None if value is None else int.from_bytes(value, "big")

    def _load_truncations(self) -> dict[str, list[tuple[int, int]]]:
        marks: dict[str, list[tuple[int, int]]] = {}
        for key in self._txn.cursor(self._truncates).iternext(keys=True, values=False):
            marks.setdefault(_table_of(key), []).append(_point_of(key))
        return marks

    @property
    def retention_position(self) -> Position | None:
        """The latest position passed to ``retain_from``; lookups before it are refused."""
        return None if self._floor is None else Position.of(self._floor)

    def put(
        self,
        table: str,
        locator: Hashable,
        position: Position,
        image: Mapping[str, object] | None,
        seq: int,
    ) -> None:
        """Record the full image of a row as of change ``seq`` of the transaction at ``position``.

        Writing the same ``(table, locator, position, seq)`` again replaces that version, so
        re-reading the log is idempotent.

        Args:
            table: The source table.
            locator: The row's key values or row id (see ``to_locator_bytes``).
            position: The transaction's ``commit_pos``.
            image: The full row, or ``None`` for a tombstone (the row was deleted).
            seq: The change's order inside its transaction.

        Raises:
            ContractError: ``seq`` is negative, or the image has ``ABSENT`` or
                ``UNAVAILABLE`` columns.
        """
        if not 0 <= seq <= _MAX_SEQ:  # inline rather than _check_seq: puts are the hot path
            raise ContractError(f"seq must be in 0..2**63-1, not {seq}")
        value = _TOMBSTONE if image is None else _IMAGE + to_image_bytes(image, full=True)
        key = (
            _row_prefix(table, locator) + position.value.to_bytes(8, "big") + seq.to_bytes(8, "big")
        )
        try:  # not ``_writing()``: puts are the hot path, and a try costs nothing until it fails
            self._txn.put(key, value, db=self._versions)
        except Exception as exc:  # LMDB writes pages out when a transaction holds too many
            raise_if_disk_full(exc, self._data, self.path)
            raise

    def truncate(self, table: str, position: Position, seq: int) -> None:
        """Record that ``table`` was truncated by change ``seq`` of the transaction at ``position``.

        Every version of the table older than ``(position, seq)`` is hidden from lookups at or
        after it; lookups before it still see them.
        """
        _check_seq(seq)
        mark = (position.value, seq)
        marks = self._truncations.setdefault(table, [])
        index = bisect.bisect_left(marks, mark)
        if index < len(marks) and marks[index] == mark:
            return  # a re-read truncate: already recorded
        with self._writing():
            self._txn.put(_table_prefix(table) + _point(*mark), b"", db=self._truncates)
        marks.insert(index, mark)

    def get(
        self,
        table: str,
        locator: Hashable,
        at: Position | None = None,
        *,
        seq: int | None = None,
    ) -> dict[str, object] | None:
        """The row's latest full image at or before a point in the log.

        Args:
            table: The source table.
            locator: The row's key values or row id.
            at: Only versions with position <= ``at`` count; ``None`` means the latest.
            seq: With ``at``, only versions at ``at`` with seq <= ``seq`` count (pass
                ``change.seq - 1`` to get the image just before a change); ``None`` means all.

        Returns:
            A fresh dict, or ``None`` when the row is unknown, deleted or truncated then.

        Raises:
            BelowRetentionError: ``at`` is before the retention position.
        """
        point = self._lookup_point(at, seq)
        if point is None:
            return None
        prefix = _row_prefix(table, locator)
        found = self._latest_at_or_before(prefix + _point(*point))
        if found is None or found[0][:-_VERSION_SUFFIX] != prefix or found[1] == _TOMBSTONE:
            return None
        if table in self._truncations and self._truncated_after(table, _point_of(found[0]), point):
            return None
        return self._image_of(found[1], table)

    def stale_rows(
        self, table: str, before: Position, seq: int
    ) -> list[tuple[bytes, dict[str, object]]]:
        """Rows of ``table`` whose newest version is a live image older than ``before`` at
        ``seq``.

        A table refresh rewrites every row the source still has at positions at or after
        ``before``, after the changes at ``before`` itself (its rows' seqs start at
        ``seq``); a row left older was not in the source's snapshot, nor changed by the log
        since: the source no longer has it. (Rows an initial load wrote at the position a
        refresh counts from are older too: seed 420.) Returns (the row's key prefix, its
        image).
        """
        prefix = _table_prefix(table)
        newest: dict[bytes, tuple[bytes, bytes]] = {}
        cursor = self._txn.cursor(self._versions)
        if cursor.set_range(prefix):
            for key, value in cursor.iternext():
                if not key.startswith(prefix):
                    break
                newest[key[:-_VERSION_SUFFIX]] = (key, value)
        return [
            (row, self._image_of(value, table))
            for row, (key, value) in newest.items()
            if value != _TOMBSTONE
            and _point_of(key) < (before.value, seq)
            and not self._truncated_after(table, _point_of(key), (MAX_POSITION, _MAX_SEQ))
        ]

    def _image_of(self, value: bytes, table: str) -> dict[str, object]:
        """The image a stored version holds; one that does not decode names the store."""
        try:
            return image_codec.from_image_bytes(value[1:], load_legacy_pickle)
        except ForbiddenPickleError as exc:
            message = f"row image store {self.path}, table {table}: {exc.message}; {_STORE_FIX}"
            raise ForbiddenPickleError(message, exc.context) from exc
        except (ValueDecodeError, StateFileCorruptError) as exc:
            raise TerminalError(
                f"row image store {self.path} holds a version of table {table} that is not a"
                f" stored row image ({exc}); {_STORE_FIX}",
                {"store": str(self.path), "table": table},
            ) from exc

    def bury(self, row: bytes, position: Position, seq: int) -> None:
        """Record a tombstone for a row known by its key prefix (from ``stale_rows``)."""
        _check_seq(seq)
        with self._writing():
            self._txn.put(row + _point(position.value, seq), _TOMBSTONE, db=self._versions)

    def _latest_at_or_before(self, key: bytes) -> tuple[bytes, bytes] | None:
        cursor = self._cursor
        # Seek just past ``key`` (no key equals key + NUL: all keys of a row have one length)
        # and step back once: one seek and one step, whether or not ``key`` itself exists.
        found = cursor.prev() if cursor.set_range(key + b"\x00") else cursor.last()
        if not found:
            return None
        item: tuple[bytes, bytes] = cursor.item()
        return item

    def _lookup_point(self, at: Position | None, seq: int | None) -> tuple[int, int] | None:
        """The (position, seq) a lookup may see up to; ``None`` if nothing can be that old."""
        if at is None:
            return MAX_POSITION, _MAX_SEQ
        if self._floor is not None and at.value < self._floor:
            raise BelowRetentionError(
                f"row images before position {at} were removed by retention",
                {"position": at.text, "retention_position": self._floor},
            )
        if seq is None:
            return at.value, _MAX_SEQ
        if seq >= 0:
            return at.value, seq
        return None if at.value == 0 else (at.value - 1, _MAX_SEQ)  # before seq 0 of ``at``

    def _truncated_after(self, table: str, version: tuple[int, int], key: tuple[int, int]) -> bool:
        """True if a truncate of ``table`` lies after ``version`` and at or before ``key``."""
        marks = self._truncations.get(table)
        if not marks:
            return False
        index = bisect.bisect_right(marks, key)
        return index > 0 and marks[index - 1] > version

    def retain_from(self, position: Position) -> None:
        """Remove versions no lookup at or after ``position`` can need.

        For each row, the newest version before ``position`` is kept (it is the row's image
        at ``position``) and older ones are dropped; so is that newest one if it is a
        tombstone or hidden by a truncate before ``position``, and so are the truncate
        markers before it. Call it with a position at or before the oldest restart position
        of any checkpoint the pipeline may still restore; lookups before it then raise
        ``BelowRetentionError``. It reads every key of the store once.
        """
        if self._floor is not None and position.value <= self._floor:
            return
        cut = position.value
        doomed = list(self._iter_unneeded(cut))
        with self._writing():
            for key in doomed:
                self._txn.delete(key, db=self._versions)
            for table, marks in self._truncations.items():
                for mark in [m for m in marks if m[0] < cut]:
                    self._txn.delete(_table_prefix(table) + _point(*mark), db=self._truncates)
            self._txn.put(b"retention_floor", cut.to_bytes(8, "big"), db=self._meta)
        self._floor = cut
        self._truncations = self._load_truncations()
        self._cursor = self._txn.cursor(self._versions)
        logger.info(
            "row image store %s: removed %s versions before %s", self.path, len(doomed), position
        )

    def _iter_unneeded(self, cut: int) -> Iterator[bytes]:
        """Keys of versions below ``cut`` that no lookup at or after ``cut`` can reach."""
        kept: tuple[bytes, bytes] | None = None  # newest version below the cut of this row
        for key, value in self._txn.cursor(self._versions).iternext():
            if kept is not None and kept[0][:-_VERSION_SUFFIX] != key[:-_VERSION_SUFFIX]:
                yield from self._unneeded_newest(kept, cut)
                kept = None
            if _point_of(key)[0] < cut:
                if kept is not None:
                    yield kept[0]  # superseded by a newer version below the cut
                kept = (key, value)
        if kept is not None:
            yield from self._unneeded_newest(kept, cut)

    def _unneeded_newest(self, kept: tuple[bytes, bytes], cut: int) -> Iterator[bytes]:
        key, value = kept
        point = (cut - 1, _MAX_SEQ)
        if value == _TOMBSTONE or self._truncated_after(_table_of(key), _point_of(key), point):
            yield key

    def version_count(self) -> int:
        """How many row versions the store holds (for monitoring and tests)."""
        count: int = self._txn.stat(self._versions)["entries"]
        return count

    def flush(self) -> None:
        """Commit every write since the last flush, durably (call it before a checkpoint).

        Raises:
            DiskFullError: No space was left; the store holds the last flush's state, as
                after a crash (LMDB writes its meta page last).
        """
        with self._writing():
            self._txn.commit()
        self._txn = self._env.begin(write=True)
        self._cursor = self._txn.cursor(self._versions)

    def close(self) -> None:
        """Flush and close the store."""
        try:
            with self._writing():
                self._txn.commit()
        finally:
            self._env.close()

    def __enter__(self) -> RowImageStore:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc_info: object) -> None:
        """Close; after an error without committing, as a crash would (a commit on a full
        disk would fail again and hide that error): the writes since the last flush belong
        to transactions no checkpoint holds yet, and a restart writes them again."""
        if exc_type is None:
            self.close()
            return
        self._txn.abort()
        self._env.close()


def _check_data_file(path: Path) -> None:
    """Refuse a data file LMDB would fault on (SIGBUS) or take for a new, empty store."""
    data = path / "data.mdb"
    try:
        check_data_file(data)
    except StateFileCorruptError as exc:
        raise ImageStoreCorruptError(
            f"row image store file {data} is corrupt ({exc}): its row images are lost;"
            f" {_REBUILD_FIX}",
            {"path": str(data)},
        ) from exc


def _check_seq(seq: int) -> None:
    if not 0 <= seq <= _MAX_SEQ:
        raise ContractError(f"seq must be in 0..2**63-1, not {seq}")
