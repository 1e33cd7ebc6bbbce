"""Oracle positions: the SCN (system change number) is the log position (DESIGN.md)."""

from __future__ import annotations

from cdc_core.capture.position import Position


def position_of(scn: int) -> Position:
    """The position of SCN ``scn``; its text is the decimal SCN, as Oracle prints it."""
    return Position(scn, str(scn))
