"""Where replcheck writes files: checked before a run starts, written atomically.

Every output is written to a temporary file in its own directory and renamed over its final
name: a reader never sees half a file, and a symlink planted at the final name is replaced,
never followed (``os.replace`` renames over the link itself). Appended logs (the run
history, the re-sync audit) open with ``O_NOFOLLOW`` for the same reason.

The checks run before any long phase, so a bad ``--out`` costs a second, not a validation.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cdc_core.disk_full import raise_if_disk_full
from cdc_core.errors import ConfigError


def check_output_dir(path: Path, option: str) -> None:
    """Make sure ``path`` is, or can become, a directory replcheck can write into (creating
    nothing: a run refused later for another reason leaves no trace).

    Raises:
        ConfigError: It is a file, a dangling link, under a file, or not writable.
        DiskFullError: Its file system has no space left.
    """
    if path.is_symlink() and not path.exists():
        raise ConfigError(f"{option} {path} is a link to nowhere; remove it or name a directory")
    existing = next(p for p in (path, *path.absolute().parents) if p.exists())
    if not existing.is_dir():
        where = "is a file" if existing == path else f"is under the file {existing}"
        raise ConfigError(f"{option} {path} {where}, not a directory; name a directory")
    try:
        with tempfile.NamedTemporaryFile(dir=existing, prefix=".replcheck-probe-"):
            pass
    except OSError as exc:
        raise_if_disk_full(exc, path, existing, "run the command again")
        raise ConfigError(
            f"{option} {path}: cannot write in {existing} ({exc.strerror or exc});"
            " name a writable directory"
        ) from exc


def check_output_file(path: Path, option: str) -> None:
    """Make sure a file can be written at ``path`` (its directory checked as above).

    Raises:
        ConfigError: ``path`` is a directory, or its directory cannot be written.
    """
    if path.is_dir() and not path.is_symlink():
        raise ConfigError(f"{option} {path} is a directory; name a file")
    check_output_dir(path.parent, f"the directory of {option}")


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file renamed over it (never through a link)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with deleted_on_failure(Path(temporary)):
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(temporary, path)


@contextmanager
def deleted_on_failure(temporary: Path) -> Iterator[None]:
    """Delete the file ``temporary`` if the block writing it fails: cut short, nothing will
    read it, and on a full disk it holds space the user is freeing."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def open_for_append(path: Path, readable: bool = False) -> int:
    """A file descriptor appending to ``path`` (and reading it, if ``readable``), refusing a
    symlink at that name.

    Raises:
        ConfigError: ``path`` is a symlink (or cannot be opened).
    """
    flags = (
        (os.O_RDWR if readable else os.O_WRONLY)
        | os.O_APPEND
        | os.O_CREAT
        | os.O_NOFOLLOW
        | os.O_CLOEXEC
    )
    try:
        return os.open(path, flags, 0o644)
    except OSError as exc:
        raise ConfigError(
            f"cannot append to {path} ({exc.strerror or exc}); it must be a regular file,"
            " not a link"
        ) from exc
