"""Positions in a source's log (DESIGN.md, "Positions").

A position is a BIGINT ordering key plus the product's own human-readable spelling of it
(``mariadb-bin.000003:4567``, an LSN such as ``0/16B3748``, an SCN). Only the integer
orders and identifies a position; the text is for people reading logs and reports.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cdc_core.errors import ContractError, TerminalError

MAX_POSITION = 2**63 - 1  # the largest value a signed BIGINT column can store


class PositionError(TerminalError):
    """A log position that is not one in its product's form (each ``position.py`` raises it)."""


@dataclass(frozen=True, slots=True, eq=False)
class Position:
    """A point in one source's log.

    Args:
        value: The ordering key, ``0 <= value <= 2**63 - 1`` so it fits a BIGINT column.
        text: The product's spelling of the same position, for humans.
    """

    value: int
    text: str

    def __post_init__(self) -> None:
        if isinstance(self.value, bool) or not isinstance(self.value, int):
            raise ContractError(f"a position value must be an int, not {type(self.value)}")
        if not 0 <= self.value <= MAX_POSITION:
            raise ContractError(f"position value {self.value} is outside 0..2**63-1")

    def to_dict(self) -> dict[str, Any]:
        """The position as a state document holds it."""
        return {"value": self.value, "text": self.text}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Position:
        """The inverse of ``to_dict`` (a wrong field raises ``ContractError``)."""
        if not isinstance(data.get("text"), str):
            raise ContractError(f"a position's text must be a str, not {data.get('text')!r}")
        return cls(data["value"], data["text"])

    @classmethod
    def of(cls, value: int) -> Position:
        """A position whose text is its decimal value (tests, products without a spelling)."""
        return cls(value, str(value))

    # Equality and ordering use the value only: two spellings of one point are one position.
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Position):
            return NotImplemented
        return self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __lt__(self, other: Position) -> bool:
        return self.value < other.value

    def __le__(self, other: Position) -> bool:
        return self.value <= other.value

    def __gt__(self, other: Position) -> bool:
        return self.value > other.value

    def __ge__(self, other: Position) -> bool:
        return self.value >= other.value

    def __str__(self) -> str:
        return self.text


def position_to_dict(position: Position | None) -> dict[str, Any] | None:
    """``Position.to_dict``, passing ``None`` through."""
    return None if position is None else position.to_dict()


def position_from_dict(data: Mapping[str, Any] | None) -> Position | None:
    """``Position.from_dict``, passing ``None`` through."""
    return None if data is None else Position.from_dict(data)
