"""The pipeline's checkpoint: one file in its state directory, replaced atomically.

It holds what a restart needs: the position the lake has reached, the transaction buffer's
state (open transactions and their spill segments), where to resume reading the log, and
which tables have been loaded by an initial snapshot (and at which position).

Order of a checkpoint (the invariant of ``TransactionBuffer.checkpoint_state``): the sink
has committed every emitted transaction, the row image store is flushed, then this file is
written to a temporary name, fsynced and renamed over the old one. A crash at any point
leaves the old checkpoint or the new one, never a mix.
"""

from __future__ import annotations

import os
import pickle
import zlib
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any

from cdc_core.buffer import BufferState
from cdc_core.errors import TerminalError
from cdc_core.position import Position
from cdc_core.spill import fsync_directory
from cdc_core.table_refresh import RefreshState

_MAGIC = b"RCCKPT01"
FILE_NAME = "checkpoint"


class CheckpointCorruptError(TerminalError):
    """The checkpoint file cannot be read back intact."""


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A durable point the pipeline restarts from.

    Args:
        pipeline: The pipeline's name (a state directory belongs to one pipeline).
        lake_position: Every transaction committed at or before it is in the lake.
        resume_at: Where to re-read the log from (``None``: from ``lake_position``).
        buffer: The transaction buffer's state (``None``: nothing fed yet).
        loaded: Per captured table, the position of its initial snapshot.
        loading: Per table whose initial snapshot was begun but not finished, its position.
        refreshes: Table refreshes under way, in the order they run.
        ddl_seen: Per table, the position of the newest DDL acted on (a re-read of the log
            after a restart must not act on it twice).
        stale: Per table, windows of positions a finished refresh left inexact.
        shapes: Per table of a log without DDL (``OmitsDdl``), its shape last seen.
    """

    pipeline: str
    lake_position: Position | None
    resume_at: Position | None
    buffer: BufferState | None
    loaded: dict[str, Position] = field(default_factory=dict)
    loading: dict[str, Position] = field(default_factory=dict)
    refreshes: tuple[RefreshState, ...] = ()
    ddl_seen: dict[str, Position] = field(default_factory=dict)
    stale: dict[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    shapes: dict[str, str] = field(default_factory=dict)

    def to_bytes(self) -> bytes:
        """Serialise, with a checksum."""
        payload = pickle.dumps(self, pickle.HIGHEST_PROTOCOL)
        return _MAGIC + zlib.crc32(payload).to_bytes(4, "little") + payload

    @classmethod
    def from_bytes(cls, data: bytes, path: Path) -> Checkpoint:
        """The inverse of ``to_bytes``.

        Raises:
            CheckpointCorruptError: The bytes are not an intact checkpoint.
        """
        head, crc, payload = data[:8], data[8:12], data[12:]
        if head != _MAGIC or zlib.crc32(payload).to_bytes(4, "little") != crc:
            raise CheckpointCorruptError(
                f"the checkpoint {path} is corrupt or truncated; restore it from a backup, or"
                " remove the state directory and the pipeline's lake tables to start over"
                " with a new initial snapshot",
                {"path": str(path)},
            )
        checkpoint = pickle.loads(payload)
        if not isinstance(checkpoint, cls):
            raise CheckpointCorruptError(f"{path} holds no pipeline checkpoint")
        return _with_defaults(checkpoint)


def _with_defaults(checkpoint: Checkpoint) -> Checkpoint:
    """A checkpoint written before a field was added has no value for it: its default."""
    for spec in fields(checkpoint):
        if not hasattr(checkpoint, spec.name):
            factory: Any = spec.default_factory
            default = spec.default if spec.default is not MISSING else factory()
            object.__setattr__(checkpoint, spec.name, default)
    return checkpoint


def read_checkpoint(state_dir: Path) -> Checkpoint | None:
    """The latest checkpoint in ``state_dir`` (None: the pipeline never checkpointed)."""
    path = state_dir / FILE_NAME
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return Checkpoint.from_bytes(data, path)


def write_checkpoint(state_dir: Path, checkpoint: Checkpoint) -> None:
    """Replace the checkpoint atomically and durably."""
    state_dir.mkdir(parents=True, exist_ok=True)
    temporary = state_dir / f".{FILE_NAME}.tmp"
    with temporary.open("wb") as handle:
        handle.write(checkpoint.to_bytes())
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, state_dir / FILE_NAME)
    fsync_directory(state_dir)
