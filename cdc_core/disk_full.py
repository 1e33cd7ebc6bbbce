"""A full disk, wherever replcheck writes: recognised in every form it takes, and named.

A full disk (``ENOSPC``) reaches replcheck in several forms:

- Python's own writes (checkpoint, progress file, spill segments): an ``OSError`` whose
  ``errno`` says so;
- delta-rs (the lake's changelog and mirror tables): a ``DeltaError``, or an ``OSError``
  without ``errno``, whose text ends in "No space left on device (os error 28)", often after
  a Rust panic in one of its threads ("Already shut down", object_store's buffered writer),
  which the Rust runtime prints itself; a panic on the calling thread is pyo3's
  ``PanicException``, which derives from ``BaseException`` alone;
- LMDB (the row image store): a commit that could write only part of its pages is reported
  as ``EIO`` ("Input/output error"; lmdb ``mdb.c``, ``mdb_page_flush``), so there the file
  system is asked whether it is out of space.

``is_disk_full`` is the one place that recognises them; ``naming_full_disk`` turns one
raised while writing a file or a Delta table into ``DiskFullError`` naming it and the fix.
No writer leaves anything half-written that is read later: a Delta commit is atomic (a data
file a failed commit wrote is in no version of the table), LMDB writes its meta page after
the data pages, the checkpoint and the progress file are replaced by a rename, and a spill
segment is referred to only once sealed.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cdc_core.errors import DiskFullError, ReplcheckError

RESUME = "run `replcheck cdc run` again; it resumes from the last checkpoint"
_FULL_TEXTS = ("No space left on device", "(os error 28)")
_IO_FAILURE_TEXTS = ("Input/output error", "(os error 5)")
# Free bytes below which an I/O error counts as a full disk: LMDB writes a commit's pages 64
# at a time (MDB_COMMIT_PAGES), so a write cut short by a full disk leaves under 256 KiB.
NEARLY_FULL_BYTES = 1 << 20


def is_disk_full(exc: BaseException, under: Path | None = None) -> bool:
    """Whether ``exc``, or an exception it was raised from, is a full disk.

    Args:
        exc: Any exception, a Rust panic included.
        under: Where the failed write was: an I/O error (``EIO``) or a Rust panic counts as
            a full disk when the file system there has (nearly) no space left.
    """
    for link in _chain(exc):
        if isinstance(link, OSError) and link.errno == errno.ENOSPC:
            return True
        text = str(link)
        if any(marker in text for marker in _FULL_TEXTS):
            return True
        failed_io = any(marker in text for marker in _IO_FAILURE_TEXTS)
        failed_io = failed_io or type(link).__name__ == "PanicException"
        if failed_io and under is not None and out_of_space(under):
            return True
    return False


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and the exceptions it was raised from or while handling, newest first."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        yield link
        link = link.__cause__ or link.__context__


def out_of_space(under: Path, needed: int = NEARLY_FULL_BYTES) -> bool:
    """Whether the file system holding ``under`` has less than ``needed`` bytes free (for
    this user: root may write into the blocks reserved for it)."""
    existing = next((p for p in (under, *under.parents) if p.exists()), Path("/"))
    try:
        stats = os.statvfs(existing)
    except OSError:
        return False
    blocks = stats.f_bfree if os.geteuid() == 0 else stats.f_bavail
    return blocks * stats.f_frsize < needed


def disk_full_error(path: Path, under: Path, then: str = RESUME) -> DiskFullError:
    """The error for a write of ``path`` that found the file system of ``under`` full."""
    return DiskFullError(
        f"no space left on device writing {path}: free space on the file system holding"
        f" {under} (not by deleting replcheck's files there: it needs them all) and {then}",
        {"path": str(path)},
    )


def raise_if_disk_full(exc: BaseException, path: Path, under: Path, then: str = RESUME) -> None:
    """Raise ``DiskFullError`` from ``exc`` if it is a full disk (``is_disk_full``); else
    return, for the ``except`` block calling it to re-raise ``exc``. An error replcheck
    raised on purpose (an inner write's ``DiskFullError`` among them) is left as it is."""
    if not isinstance(exc, ReplcheckError) and is_disk_full(exc, under):
        raise disk_full_error(path, under, then) from exc


@contextmanager
def naming_full_disk(path: Path, under: Path, then: str = RESUME) -> Iterator[None]:
    """Turn a full disk met inside the block into ``DiskFullError`` naming ``path``.

    Args:
        path: The file or Delta table being written.
        under: The directory the user knows it by (the lake, the state directory).
        then: What to do once space is freed.
    """
    try:
        yield
    except BaseException as exc:  # a Rust panic is no Exception
        raise_if_disk_full(exc, path, under, then)
        raise
