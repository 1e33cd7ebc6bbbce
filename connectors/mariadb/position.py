"""Binlog positions as one ordered BIGINT: ``file number << 32 | offset``.

MariaDB names binlog files ``<basename>.<6-digit number>`` and rotates to the next number,
so the file number orders files and the offset (below 4 GiB: max_binlog_size is at most
1 GiB) orders events inside one. The text form is ``file:offset``.

Every product's ``position.py`` has ``position_of`` (the log's own form -> ``Position``)
and raises ``cdc_core.capture.position.PositionError`` for a malformed one.
"""

from __future__ import annotations

from cdc_core.capture.position import Position, PositionError

_OFFSET_BITS = 32


def to_position(log_file: str, offset: int) -> int:
    """The BIGINT position of ``offset`` in binlog file ``log_file``."""
    _, _, number = log_file.rpartition(".")
    if not number.isdigit() or not 0 <= offset < 1 << _OFFSET_BITS:
        raise PositionError(f"not a binlog position: {log_file}:{offset}")
    return int(number) << _OFFSET_BITS | offset


def to_text(log_file: str, offset: int) -> str:
    """The human-readable form, ``mariadb-bin.000003:4567``."""
    return f"{log_file}:{offset}"


def split_position(position: int, basename: str) -> tuple[str, int]:
    """The (file, offset) of a BIGINT position, given the binlog's base name."""
    number, offset = position >> _OFFSET_BITS, position & ((1 << _OFFSET_BITS) - 1)
    return f"{basename}.{number:06d}", offset


def position_of(log_file: str, offset: int) -> Position:
    """The ``Position`` of ``offset`` in binlog file ``log_file``."""
    return Position(to_position(log_file, offset), to_text(log_file, offset))


def describe_position(value: int, basename: str) -> str:
    """How every replcheck command spells a MariaDB position (``mariadb-bin.000003:4567``),
    given the binlog's base name: the one spelling of this product, for progress lines,
    ``cdc status``, terminal lines and result files alike."""
    return to_text(*split_position(value, basename))
