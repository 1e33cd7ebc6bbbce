"""One running process per state directory: an OS file lock held for the life of a run.

Two processes writing one state directory (checkpoint, spill segments, row image store)
would each take the other's checkpoint for their own and corrupt both. ``StateLock`` takes
an exclusive ``flock`` on ``<state_dir>/lock`` without waiting; the holder writes its pid,
host and start time into the file so a refused run can say who holds it.

``flock`` belongs to the open file description, and the kernel drops it when the holder
exits in any way (SIGKILL included), so a crashed run leaves no stale lock behind: the
file's contents may outlive it, but they are only read to word the refusal. Linux
``flock(2)``: "the lock is released either by an explicit LOCK_UN operation on any of these
duplicate file descriptors, or when all such file descriptors have been closed".
"""

from __future__ import annotations

import fcntl
import os
import socket
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

from cdc_core.disk_full import naming_full_disk
from cdc_core.errors import TerminalError
from cdc_core.state.directory import StateDirectory


class StateDirLockedError(TerminalError):
    """Another process holds the state directory (the CLI exits 2 with this message)."""


class StateLock:
    """An exclusive, non-blocking lock of one state directory, as a context manager.

    Args:
        state_dir: The directory to own (created if missing).
        pipeline: The pipeline's name, for the message a refused run gets.
    """

    def __init__(self, state_dir: Path, pipeline: str) -> None:
        self.state_dir = state_dir
        self.pipeline = pipeline
        self._fd: int | None = None

    def __enter__(self) -> StateLock:
        self.acquire()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.release()

    def acquire(self) -> None:
        """Take the lock and record who holds it.

        Raises:
            StateDirLockedError: Another process (or another run in this one) holds it.
            DiskFullError: No space was left to record the holder.
        """
        self.state_dir.mkdir(parents=True, exist_ok=True)
        path = StateDirectory(self.state_dir).lock
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)  # no O_TRUNC: the holder's facts
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            with naming_full_disk(path, self.state_dir):
                os.ftruncate(fd, 0)
                os.write(fd, _holder_text().encode("utf-8"))
        except BlockingIOError:
            os.close(fd)
            raise self._locked(path) from None
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        """Drop the lock (closing the file releases it)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _locked(self, path: Path) -> StateDirLockedError:
        try:
            holder = path.read_text(encoding="utf-8").strip() or "a process that just started"
        except OSError:
            holder = "another process"
        return StateDirLockedError(
            f"state directory {self.state_dir} of pipeline {self.pipeline!r} is in use by"
            f" {holder}; stop that run first (SIGTERM), or give this pipeline its own state_dir"
        )


def holder(state_dir: Path) -> str | None:
    """Who runs the pipeline of ``state_dir`` now (None: no process does), for ``cdc
    status``. It tries a shared lock and drops it at once: a run starting in that instant is
    refused as if another had started with it, and says so."""
    path = StateDirectory(state_dir).lock
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return path.read_text(encoding="utf-8").strip() or "a process that just started"
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _holder_text() -> str:
    started = datetime.now(UTC).isoformat(timespec="seconds")
    return f"pid {os.getpid()} on host {socket.gethostname()}, started {started}"
