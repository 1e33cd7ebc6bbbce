"""Comparison options: rules that act on canonical bytes identically on both sides."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from cdc_core.errors import ContractError
from merkle.types import MAX_FRACTION_DIGITS, LogicalType, _FractionalType

MAX_FLOAT_DIGITS = 17  # a double never needs more significant digits than this


class TimeRounding(StrEnum):
    """How fractional seconds are reduced to a coarser precision."""

    ROUND = "round"  # half up on the wall clock: .5 goes to the later instant
    TRUNCATE = "truncate"  # toward the earlier instant (floor), also before 1970


@dataclass(frozen=True, slots=True)
class ComparisonOptions:
    """How values are normalised before hashing; the same options go to both sides.

    Attributes:
        trim_char: Drop trailing spaces of CHAR (padded) columns.
        case_insensitive: Compare strings lower-cased.
        empty_string_is_null: Treat '' (and empty bytes) as NULL, as Oracle stores them.
        timestamp_precision: Compare times and timestamps at this many fractional digits
            (never finer than the column's own precision).
        timestamp_rounding: How a finer value is reduced: ``round`` or ``truncate``.
        float_digits: Significant decimal digits floats are rounded to before comparing;
            by default floats compare exactly (32-bit columns at single precision).
    """

    trim_char: bool = False
    case_insensitive: bool = False
    empty_string_is_null: bool = False
    timestamp_precision: int | None = None
    timestamp_rounding: TimeRounding = TimeRounding.ROUND
    float_digits: int | None = None

    def __post_init__(self) -> None:
        precision = self.timestamp_precision
        if precision is not None and not 0 <= precision <= MAX_FRACTION_DIGITS:
            raise ContractError(f"timestamp_precision must be 0..{MAX_FRACTION_DIGITS}")
        if self.float_digits is not None and not 1 <= self.float_digits <= MAX_FLOAT_DIGITS:
            raise ContractError(f"float_digits must be 1..{MAX_FLOAT_DIGITS}")
        object.__setattr__(self, "timestamp_rounding", TimeRounding(self.timestamp_rounding))

    def fraction_digits(self, ltype: LogicalType) -> int:
        """Fractional-second digits kept for a time or timestamp column."""
        own = ltype.precision if isinstance(ltype, _FractionalType) else MAX_FRACTION_DIGITS
        if self.timestamp_precision is None:
            return own
        return min(own, self.timestamp_precision)

    def to_dict(self) -> dict[str, object]:
        """Plain form, as in a config file or a golden vector."""
        return {
            "trim_char": self.trim_char,
            "case_insensitive": self.case_insensitive,
            "empty_string_is_null": self.empty_string_is_null,
            "timestamp_precision": self.timestamp_precision,
            "timestamp_rounding": self.timestamp_rounding.value,
            "float_digits": self.float_digits,
        }
