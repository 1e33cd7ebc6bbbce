"""Binlog positions as one ordered BIGINT: ``epoch << 56 | file number << 32 | offset``.

MariaDB and MySQL name binlog files ``<basename>.<6-digit number>`` and rotate to the next
number, so the file number (below 2**24) orders files and the offset (below 4 GiB:
max_binlog_size is at most 1 GiB) orders events inside one. The text form is
``file:offset``.

A position is of one server's binlog. The epoch counts the failovers a pipeline followed
(``connectors/mariadb/failover.py``): the new server's files and offsets are its own, maybe
lower, so its positions are ordered after every position of the servers before it by a
higher epoch, spelled ``file:offset@epoch`` (epoch 0, the first server's, is not spelled).

Every product's ``position.py`` has ``position_of`` (the log's own form -> ``Position``)
and raises ``cdc_core.capture.position.PositionError`` for a malformed one.
"""

from __future__ import annotations

from dataclasses import dataclass

from cdc_core.capture.position import Position, PositionError

_OFFSET_BITS, _FILE_BITS = 32, 24
_EPOCH_SHIFT = _OFFSET_BITS + _FILE_BITS
MAX_EPOCH = 127  # positions stay below 2**63


def to_position(log_file: str, offset: int, epoch: int = 0) -> int:
    """The BIGINT position of ``offset`` in binlog file ``log_file`` (of the ``epoch``-th
    server a pipeline followed)."""
    _, _, number = log_file.rpartition(".")
    if (
        not number.isdigit()
        or int(number) >= 1 << _FILE_BITS
        or not 0 <= offset < 1 << _OFFSET_BITS
        or not 0 <= epoch <= MAX_EPOCH
    ):
        raise PositionError(f"not a binlog position: {to_text(log_file, offset, epoch)}")
    return epoch << _EPOCH_SHIFT | int(number) << _OFFSET_BITS | offset


def to_text(log_file: str, offset: int, epoch: int = 0) -> str:
    """The human-readable form, ``mariadb-bin.000003:4567`` (``...:4567@1`` after a
    failover)."""
    return f"{log_file}:{offset}" + (f"@{epoch}" if epoch else "")


def epoch_of(position: int) -> int:
    """The epoch of a BIGINT position: how many failovers lie before it."""
    return position >> _EPOCH_SHIFT


def epoch_start(epoch: int) -> Position:
    """The first position of an epoch, before any of its server's events."""
    return Position(epoch << _EPOCH_SHIFT, f"failover {epoch}")


def split_position(position: int, basename: str) -> tuple[str, int]:
    """The (file, offset) of a BIGINT position, given the binlog's base name."""
    number = (position >> _OFFSET_BITS) & ((1 << _FILE_BITS) - 1)
    offset = position & ((1 << _OFFSET_BITS) - 1)
    return f"{basename}.{number:06d}", offset


def position_of(log_file: str, offset: int, epoch: int = 0) -> Position:
    """The ``Position`` of ``offset`` in binlog file ``log_file``."""
    return Position(to_position(log_file, offset, epoch), to_text(log_file, offset, epoch))


def describe_position(value: int, basename: str) -> str:
    """How every replcheck command spells a MariaDB position (``mariadb-bin.000003:4567``),
    given the binlog's base name: the one spelling of this product, for progress lines,
    ``cdc status``, terminal lines and result files alike."""
    return to_text(*split_position(value, basename), epoch_of(value))


@dataclass
class Epoch:
    """The epoch of the server a pipeline reads now, shared by its log reader (which
    learns it from the position it resumes at, or raises it when it follows a failover)
    and its snapshot reader (whose snapshots must be ordered among the log's positions)."""

    value: int = 0
