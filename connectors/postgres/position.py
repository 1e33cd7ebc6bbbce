"""PostgreSQL positions: log sequence numbers (LSNs).

An LSN is a 64-bit byte offset in the write-ahead log. PostgreSQL prints it as two
upper-case hexadecimal halves without zero padding, ``16/B374D848`` (the ``pg_lsn`` type,
https://www.postgresql.org/docs/current/datatype-pg-lsn.html); its integer value orders
positions, and a transaction's ``commit_pos`` is the end LSN of its commit record
(DESIGN.md, "Positions").
"""

from __future__ import annotations

import re

from cdc_core.capture.position import Position, PositionError

_LSN = re.compile(r"^\s*([0-9A-Fa-f]{1,8})/([0-9A-Fa-f]{1,8})\s*$")
_HALF = 32
ALIGN = 8  # WAL records are MAXALIGNed: every real LSN the stream reports is a multiple


def lsn_to_int(text: str) -> int:
    """The integer value of an LSN written as PostgreSQL prints it (``16/B374D848``)."""
    match = _LSN.match(text)
    if match is None:
        raise PositionError(f"not a PostgreSQL LSN: {text!r} (expected e.g. 16/B374D848)")
    high, low = (int(half, 16) for half in match.groups())
    return high << _HALF | low


def lsn_to_text(value: int) -> str:
    """An LSN's integer value spelled as PostgreSQL prints a ``pg_lsn``."""
    if not 0 <= value < 2**64:
        raise PositionError(f"an LSN is an unsigned 64-bit number, not {value}")
    return f"{value >> _HALF:X}/{value & (2**_HALF - 1):X}"


def position_of(text: str) -> Position:
    """The ``Position`` of an LSN printed by PostgreSQL (the text kept as the server wrote
    it, normalised to upper case)."""
    value = lsn_to_int(text)
    return Position(value, lsn_to_text(value))


def describe_position(value: int) -> str:
    """How every replcheck command spells a PostgreSQL position: an LSN (``0/241EEC8``), or
    a boundary LSN plus a step (``0/241EEC8+1``) for the changes the log reader numbers
    between two WAL records (``log_reader._Positions``). The one spelling of this product:
    progress lines, ``cdc status``, terminal lines and result files all use it."""
    step = value % ALIGN
    text = lsn_to_text(value - step)
    return f"{text}+{step}" if step else text
