"""The transaction buffer's checkpoint state: the open transactions and their spill segments.

``TransactionBuffer.checkpoint_state`` gives a ``BufferState``; the pipeline's checkpoint
holds it as ``to_dict`` gives it (``cdc_core.pipeline.checkpoint``), and ``to_bytes`` writes it on
its own as a checksummed state document (``cdc_core.state.document``). Version 1 pickled it
(magic ``RCBUFST1``): ``from_bytes`` still reads that, with the restricted unpickler only.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cdc_core.buffer.spill import SegmentRef, SpillCorruptError
from cdc_core.capture.position import Position, position_from_dict, position_to_dict
from cdc_core.errors import TerminalError
from cdc_core.state.document import (
    ForbiddenPickleError,
    StateFileCorruptError,
    from_state_document,
    load_legacy_pickle,
    to_state_document,
)
from cdc_core.state.value_codec import ValueDecodeError, from_tagged, to_tagged

_LEGACY_STATE_MAGIC = b"RCBUFST1"  # version 1: a pickle, read once by the migration
STATE_FORMAT = "replcheck.buffer-state"
STATE_VERSION = 2


@dataclass(frozen=True, slots=True)
class TransactionState:
    """One open transaction in a checkpoint: everything it holds is in ``segments``."""

    txid: str
    begin_pos: Position
    begun_at: datetime
    next_seq: int
    change_count: int
    segments: tuple[SegmentRef, ...]
    undone: frozenset[int]
    warned: frozenset[str]

    def __post_init__(self) -> None:
        if sum(ref.record_count for ref in self.segments) - len(self.undone) != self.change_count:
            raise SpillCorruptError(f"checkpoint of transaction {self.txid} does not add up")

    def to_dict(self) -> dict[str, Any]:
        """The open transaction as a checkpoint holds it."""
        return {
            "txid": self.txid,
            "begin_pos": self.begin_pos.to_dict(),
            "begun_at": to_tagged(self.begun_at),
            "next_seq": self.next_seq,
            "change_count": self.change_count,
            "segments": [ref.to_dict() for ref in self.segments],
            "undone": sorted(self.undone),
            "warned": sorted(self.warned),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TransactionState:
        """The inverse of ``to_dict``."""
        begun_at = from_tagged(data["begun_at"])
        if not isinstance(begun_at, datetime):
            raise SpillCorruptError(f"transaction {data['txid']}: begun_at is not a datetime")
        return cls(
            data["txid"],
            Position.from_dict(data["begin_pos"]),
            begun_at,
            data["next_seq"],
            data["change_count"],
            tuple(SegmentRef.from_dict(ref) for ref in data["segments"]),
            frozenset(data["undone"]),
            frozenset(data["warned"]),
        )


@dataclass(frozen=True, slots=True)
class BufferState:
    """A checkpoint of the buffer (see ``TransactionBuffer.checkpoint_state``).

    Args:
        high_water: The position of the last change fed, ``None`` if none was.
        high_water_count: How many changes at exactly ``high_water`` were fed.
        transactions: The open transactions, in begin order.
        obsolete_segments: Segment files no longer needed once this state is durable.
    """

    high_water: Position | None
    high_water_count: int
    transactions: tuple[TransactionState, ...]
    obsolete_segments: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if (self.high_water is None) != (self.high_water_count == 0):
            raise SpillCorruptError("checkpoint: high_water and high_water_count disagree")

    def to_dict(self) -> dict[str, Any]:
        """The buffer's state as a checkpoint holds it."""
        return {
            "high_water": position_to_dict(self.high_water),
            "high_water_count": self.high_water_count,
            "transactions": [txn.to_dict() for txn in self.transactions],
            "obsolete_segments": list(self.obsolete_segments),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BufferState:
        """The inverse of ``to_dict``."""
        return cls(
            position_from_dict(data["high_water"]),
            data["high_water_count"],
            tuple(TransactionState.from_dict(txn) for txn in data["transactions"]),
            tuple(data["obsolete_segments"]),
        )

    def to_bytes(self) -> bytes:
        """The state on its own, as a checksummed state document (``cdc_core.state.document``)."""
        return to_state_document(STATE_FORMAT, STATE_VERSION, self.to_dict())

    @classmethod
    def from_bytes(cls, data: bytes) -> BufferState:
        """The inverse of ``to_bytes``; a version-1 pickle is read by the migration.

        Raises:
            SpillCorruptError: The bytes are not an intact buffer state.
            ForbiddenPickleError: A version-1 pickle names a class no state holds.
        """
        if data.startswith(_LEGACY_STATE_MAGIC):
            return _legacy_state(data)
        try:
            return cls.from_dict(from_state_document(data, STATE_FORMAT, STATE_VERSION))
        except ForbiddenPickleError:
            raise
        except (StateFileCorruptError, ValueDecodeError, TerminalError) as exc:
            raise SpillCorruptError(f"buffer checkpoint is corrupt ({exc}); {_STATE_FIX}") from exc
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise SpillCorruptError(
                f"buffer checkpoint is corrupt: it lacks {exc}; {_STATE_FIX}"
            ) from exc


_STATE_FIX = "restore an older checkpoint"


def _legacy_state(data: bytes) -> BufferState:
    payload = data[12:]
    if zlib.crc32(payload).to_bytes(4, "little") != data[8:12]:
        raise SpillCorruptError(f"buffer checkpoint is corrupt; {_STATE_FIX}")
    try:
        state = load_legacy_pickle(payload)
    except StateFileCorruptError as exc:
        raise SpillCorruptError(f"buffer checkpoint is corrupt ({exc}); {_STATE_FIX}") from exc
    if not isinstance(state, BufferState):
        raise SpillCorruptError("buffer checkpoint holds no BufferState")
    return state
