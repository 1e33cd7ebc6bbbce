"""The pipeline's checkpoint: one file in its state directory, replaced atomically.

It holds what a restart needs: the position the lake has reached, the transaction buffer's
state (open transactions and their spill segments), where to resume reading the log, and
which tables have been loaded by an initial snapshot (and at which position).

Order of a checkpoint (the invariant of ``TransactionBuffer.checkpoint_state``): the sink
has committed every emitted transaction, the row image store is flushed, then this file is
written to a temporary name, fsynced and renamed over the old one. A crash at any point
leaves the old checkpoint or the new one, never a mix.

The file is a state document (``cdc_core.state.document``: JSON with a version and a SHA-256
checksum); each type in it has its own ``to_dict``/``from_dict``. A checkpoint of version 1
(a pickle) is read once with the restricted unpickler and rewritten as version 2.
"""

from __future__ import annotations

import logging
import os
import zlib
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from datetime import datetime
from pathlib import Path
from typing import Any

from cdc_core.buffer.buffer_state import BufferState
from cdc_core.buffer.spill import fsync_directory
from cdc_core.capture.position import Position, position_from_dict, position_to_dict
from cdc_core.ddl.table_refresh import RefreshState
from cdc_core.disk_full import naming_full_disk
from cdc_core.errors import TerminalError
from cdc_core.files import deleted_on_failure
from cdc_core.state.directory import StateDirectory
from cdc_core.state.document import (
    ForbiddenPickleError,
    StateFileCorruptError,
    from_state_document,
    load_legacy_pickle,
    to_state_document,
)

logger = logging.getLogger(__name__)

_LEGACY_MAGIC = b"RCCKPT01"  # version 1: a pickle, read once by the migration
FORMAT = "replcheck.checkpoint"
VERSION = 2
_FIX = (
    "restore it from a backup, or remove the state directory and the pipeline's lake tables"
    " to start over with a new initial snapshot"
)


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
        keys: Per table, the key its lake tables are keyed by (set when they are loaded;
            the source may have another key by the time the log reaches its DDL).
        last_commit: When the source committed the newest transaction the target holds
            (None: none written yet, or written before this was recorded); ``cdc status``.
        source: The server whose log the positions are of (``LogReader.source_identity``;
            None: not told, or recorded before this was): a restart on another is refused.
        resume_token: What the log reader needs beside a position to resume there on
            another server (``resume_token``: MySQL's GTID set), and the position it is of
            (valid only while that is still where the pipeline resumes).
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
    keys: dict[str, tuple[str, ...]] = field(default_factory=dict)
    last_commit: datetime | None = None
    source: str | None = None
    resume_token: tuple[Position, str] | None = None

    def to_dict(self) -> dict[str, Any]:
        """The checkpoint as its state document's body."""
        return {
            "pipeline": self.pipeline,
            "lake_position": position_to_dict(self.lake_position),
            "resume_at": position_to_dict(self.resume_at),
            "buffer": None if self.buffer is None else self.buffer.to_dict(),
            "loaded": _positions_to_dict(self.loaded),
            "loading": _positions_to_dict(self.loading),
            "refreshes": [refresh.to_dict() for refresh in self.refreshes],
            "ddl_seen": _positions_to_dict(self.ddl_seen),
            "stale": {table: [list(w) for w in windows] for table, windows in self.stale.items()},
            "shapes": dict(self.shapes),
            "keys": {table: list(key) for table, key in self.keys.items()},
            "last_commit": None if self.last_commit is None else self.last_commit.isoformat(),
            "source": self.source,
            "resume_token": _token_to_dict(self.resume_token),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Checkpoint:
        """The inverse of ``to_dict``."""
        buffer = data["buffer"]
        stale = data["stale"]
        return cls(
            data["pipeline"],
            position_from_dict(data["lake_position"]),
            position_from_dict(data["resume_at"]),
            None if buffer is None else BufferState.from_dict(buffer),
            _positions_from_dict(data["loaded"]),
            _positions_from_dict(data["loading"]),
            tuple(RefreshState.from_dict(refresh) for refresh in data["refreshes"]),
            _positions_from_dict(data["ddl_seen"]),
            {table: tuple((lo, hi) for lo, hi in windows) for table, windows in stale.items()},
            {str(table): str(shape) for table, shape in data["shapes"].items()},
            # Checkpoints written before keys were recorded have none.
            {str(table): tuple(map(str, key)) for table, key in data.get("keys", {}).items()},
            _time_or_none(data.get("last_commit")),  # checkpoints before it have none
            data.get("source"),  # checkpoints before it have none
            _token_from_dict(data.get("resume_token")),  # nor this
        )

    def to_bytes(self) -> bytes:
        """Serialise as a state document (JSON with a version and a checksum)."""
        return to_state_document(FORMAT, VERSION, self.to_dict())

    @classmethod
    def from_bytes(cls, data: bytes, path: Path) -> Checkpoint:
        """The inverse of ``to_bytes``; a version-1 pickle is read by the migration.

        Raises:
            CheckpointCorruptError: The bytes are not an intact checkpoint.
            ForbiddenPickleError: A version-1 pickle names a class no state holds.
        """
        if data.startswith(_LEGACY_MAGIC):
            return _from_legacy(data, path)
        try:
            return cls.from_dict(from_state_document(data, FORMAT, VERSION))
        except ForbiddenPickleError:
            raise
        except StateFileCorruptError as exc:
            raise _corrupt(path, str(exc)) from exc
        except (TerminalError, KeyError, TypeError, ValueError, AttributeError) as exc:
            raise _corrupt(path, f"a field is missing or wrong ({exc!r})") from exc


def _time_or_none(text: object) -> datetime | None:
    if text is None:
        return None
    if not isinstance(text, str):
        raise TypeError(f"last_commit must be an ISO 8601 time, not {text!r}")
    return datetime.fromisoformat(text)


def _positions_to_dict(positions: Mapping[str, Position]) -> dict[str, Any]:
    return {table: position.to_dict() for table, position in positions.items()}


def _positions_from_dict(data: Mapping[str, Any]) -> dict[str, Position]:
    return {table: Position.from_dict(position) for table, position in data.items()}


def _corrupt(path: Path, what: str) -> CheckpointCorruptError:
    return CheckpointCorruptError(
        f"the checkpoint {path} is corrupt or truncated; {_FIX} ({what})", {"path": str(path)}
    )


def _from_legacy(data: bytes, path: Path) -> Checkpoint:
    """A version-1 checkpoint: CRC-32 checked, then unpickled with only the allowed classes."""
    payload = data[12:]
    if zlib.crc32(payload).to_bytes(4, "little") != data[8:12]:
        raise _corrupt(path, "its checksum does not match its contents")
    try:
        checkpoint = load_legacy_pickle(payload)
    except ForbiddenPickleError as exc:
        raise ForbiddenPickleError(f"the checkpoint {path}: {exc.message}", exc.context) from exc
    except StateFileCorruptError as exc:
        raise _corrupt(path, str(exc)) from exc
    if not isinstance(checkpoint, Checkpoint):
        raise _corrupt(path, "it holds no pipeline checkpoint")
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
    path = StateDirectory(state_dir).checkpoint
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    checkpoint = Checkpoint.from_bytes(data, path)
    if data.startswith(_LEGACY_MAGIC):
        write_checkpoint(state_dir, checkpoint)
        logger.warning(
            "checkpoint %s: migrated from a version-1 pickle to version %d", path, VERSION
        )
    return checkpoint


def write_checkpoint(state_dir: Path, checkpoint: Checkpoint) -> None:
    """Replace the checkpoint atomically and durably.

    Raises:
        DiskFullError: No space was left; the previous checkpoint is kept as it was.
    """
    files = StateDirectory(state_dir)
    path, temporary = files.checkpoint, files.checkpoint_temporary
    with naming_full_disk(path, state_dir):
        state_dir.mkdir(parents=True, exist_ok=True)
        with deleted_on_failure(temporary), temporary.open("wb") as handle:
            handle.write(checkpoint.to_bytes())
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
        fsync_directory(state_dir)


def _token_to_dict(token: tuple[Position, str] | None) -> dict[str, Any] | None:
    return None if token is None else {"at": position_to_dict(token[0]), "token": token[1]}


def _token_from_dict(data: Mapping[str, Any] | None) -> tuple[Position, str] | None:
    if data is None:
        return None
    at = position_from_dict(data["at"])
    return None if at is None else (at, str(data["token"]))
