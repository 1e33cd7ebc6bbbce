"""Positions in a source's log (DESIGN.md, "Positions").

A position is a BIGINT ordering key plus the product's own human-readable spelling of it
(``mariadb-bin.000003:4567``, an LSN such as ``0/16B3748``, an SCN). Only the integer
orders and identifies a position; the text is for people reading logs and reports.
"""

from __future__ import annotations

from dataclasses import dataclass

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
