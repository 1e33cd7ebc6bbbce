"""Capture positions: a product's capture sequence, as an integer and its text.

A trigger-captured transaction's ``commit_pos`` is its capture sequence value in commit order
(``connectors.trigger_capture.dialect``); the text spells it ``capture:<value>`` so a position
read in a log or a report says which kind of source it belongs to.
"""

from __future__ import annotations

from cdc_core.capture.position import Position, PositionError

PREFIX = "capture:"


def capture_position(value: int) -> Position:
    """The position of capture sequence value ``value``."""
    return Position(value, f"{PREFIX}{value}")


def parse_capture_position(text: str) -> Position:
    """The inverse of ``capture_position(...).text``.

    Raises:
        PositionError: ``text`` is not ``capture:<non-negative integer>``.
    """
    digits = text.removeprefix(PREFIX)
    if not text.startswith(PREFIX) or not digits.isdigit():
        raise PositionError(f"{text!r} is not a capture position (capture:<integer>)")
    return capture_position(int(digits))
