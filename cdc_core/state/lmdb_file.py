"""Checking an LMDB data file before LMDB maps it (issue 37, item 3).

LMDB reads its pages through a memory map of ``data.mdb`` and trusts the file: a page the
B-tree points to beyond the end of a file cut short is a SIGBUS, which kills the process
with no message, and an empty file is taken for a new, empty environment. Both meta pages
(pages 0 and 1) survive most truncations, and the newer one (the larger transaction id)
says how many pages the last commit used (``mm_last_pg``), so the file must hold at least
``(mm_last_pg + 1) * page size`` bytes. Layout of ``MDB_meta`` after the 16-byte page
header, 64-bit builds (lmdb ``mdb.c``, ``struct MDB_meta`` and ``struct MDB_db``; the page
size is kept in the free DB's ``md_pad``): magic u32 at 16, version u32 at 20, page size
u32 at 40, ``mm_last_pg`` u64 at 136, ``mm_txnid`` u64 at 144, in the machine's byte order.
A file of full length whose pages were damaged is not caught here.

LMDB writes its lock file, ``lock.mdb``, through a shared memory map too: on a full disk, a
page of it with no disk block yet (a new file, or a sparse one) is a SIGBUS when first
written, so ``check_lock_file`` refuses to open a store then, as a full disk.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import BinaryIO, NamedTuple

from cdc_core.disk_full import disk_full_error, out_of_space
from cdc_core.state.document import StateFileCorruptError

_MAGIC = 0xBEEFC0DE  # MDB_MAGIC
_DATA_VERSION = 1  # MDB_DATA_VERSION
_HEAD = struct.Struct("=II")  # mm_magic, mm_version at offset 16
_PAGE_SIZE = struct.Struct("=I")  # mm_dbs[FREE_DBI].md_pad at offset 40
_TAIL = struct.Struct("=QQ")  # mm_last_pg, mm_txnid at offset 136
_META_END = 152  # bytes of a meta page read here
_LOCK_FILE_ROOM = 64 << 10  # bytes: the lock file of 126 readers (LMDB's default) is 8 KiB


class _Meta(NamedTuple):
    page_size: int
    last_page: int
    txnid: int


def check_data_file(path: Path) -> None:
    """Refuse an existing ``data.mdb`` that is shorter than its last commit needs.

    Raises:
        StateFileCorruptError: With what is wrong; the caller adds the file and the fix.
    """
    if not path.exists():
        return  # a new store: LMDB creates the file and writes its meta pages
    with path.open("rb") as file:
        size = path.stat().st_size
        first = _meta_at(file, 0, size)
        second = _meta_at(file, first.page_size, size)
    newest = max(first, second, key=lambda meta: meta.txnid)
    needed = (newest.last_page + 1) * first.page_size
    if size < needed:
        raise StateFileCorruptError(
            f"it is cut short: {size} bytes, but its last commit needs {needed}"
        )


def _meta_at(file: BinaryIO, offset: int, size: int) -> _Meta:
    """The meta page at ``offset``; refused if the file ends before it or it is not one."""
    if size < offset + _META_END:
        raise StateFileCorruptError(f"it is cut short: {size} bytes, less than its two meta pages")
    file.seek(offset)
    page = file.read(_META_END)
    magic, version = _HEAD.unpack_from(page, 16)
    if magic != _MAGIC or version != _DATA_VERSION:
        raise StateFileCorruptError(f"the page at byte {offset} is not an LMDB meta page")
    (page_size,) = _PAGE_SIZE.unpack_from(page, 40)
    if page_size < _META_END or page_size & (page_size - 1):
        raise StateFileCorruptError(f"the meta page at byte {offset} has page size {page_size}")
    last_page, txnid = _TAIL.unpack_from(page, 136)
    return _Meta(page_size, last_page, txnid)


def check_lock_file(path: Path) -> None:
    """Refuse to let LMDB create or fill in the lock file ``path`` on a full disk.

    Raises:
        DiskFullError: The file system holding it is (nearly) out of space, and the file
            has pages with no disk block.
    """
    try:
        stats = path.stat()
    except FileNotFoundError:
        allocated = False
    else:
        allocated = stats.st_blocks * 512 >= stats.st_size
    if not allocated and out_of_space(path.parent, _LOCK_FILE_ROOM):
        raise disk_full_error(path, path.parent)
