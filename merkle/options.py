"""Comparison options: rules that act on canonical bytes identically on both sides."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from cdc_core.errors import ContractError
from merkle.types import MAX_FRACTION_DIGITS, LogicalType, _FractionalType

MAX_FLOAT_DIGITS = 17  # a double never needs more significant digits than this


class TimeRounding(StrEnum):
    """How fractional seconds are reduced to a coarser precision.

    ``round`` and ``truncate`` act on the wall clock and give the same result whatever the
    epoch is counted from. The ``half_away_from_*`` rules round the signed count from an
    epoch to the nearest unit, an exact half away from that epoch, so before the epoch a
    half goes to the *earlier* instant; times of day count from midnight under every rule.
    Which product uses which rule was measured (``connectors/<product>/types.py``).
    """

    ROUND = "round"  # half up on the wall clock: .5 goes to the later instant
    TRUNCATE = "truncate"  # toward the earlier instant (floor), also before 1970
    HALF_AWAY_FROM_1970 = "half_away_from_1970"  # DuckDB: epoch micros, half away from 0
    HALF_AWAY_FROM_2000 = "half_away_from_2000"  # PostgreSQL: micros since 2000-01-01

    @classmethod
    def parse(cls, text: str) -> TimeRounding:
        """The rule called ``text``; a ContractError naming the known rules otherwise."""
        try:
            return cls(text)
        except ValueError:
            known = ", ".join(rule.value for rule in cls)
            raise ContractError(
                f"timestamp_rounding {text!r} is not a rounding rule; use one of: {known}"
            ) from None


DEFAULT_ROUNDING = TimeRounding.ROUND
"""The rule when neither the configuration nor a product that rounded names one."""


@dataclass(frozen=True, slots=True)
class ComparisonOptions:
    """How values are normalised before hashing; the same options go to both sides.

    Attributes:
        trim_char: Drop trailing spaces of CHAR (padded) columns.
        case_insensitive: Compare strings lower-cased.
        empty_string_is_null: Treat '' (and empty bytes) as NULL, as Oracle stores them.
        timestamp_precision: Compare times and timestamps at this many fractional digits
            (never finer than the column's own precision).
        timestamp_rounding: How a finer value is reduced (a ``TimeRounding``); None means
            not chosen: the validator picks the rule of the product that stored the lower
            precision, else ``round`` (``rounding`` is the rule in effect).
        float_digits: Significant decimal digits floats are rounded to before comparing;
            by default floats compare exactly (32-bit columns at single precision).
    """

    trim_char: bool = False
    case_insensitive: bool = False
    empty_string_is_null: bool = False
    timestamp_precision: int | None = None
    timestamp_rounding: TimeRounding | None = None
    float_digits: int | None = None

    def __post_init__(self) -> None:
        precision = self.timestamp_precision
        if precision is not None and not 0 <= precision <= MAX_FRACTION_DIGITS:
            raise ContractError(f"timestamp_precision must be 0..{MAX_FRACTION_DIGITS}")
        if self.float_digits is not None and not 1 <= self.float_digits <= MAX_FLOAT_DIGITS:
            raise ContractError(f"float_digits must be 1..{MAX_FLOAT_DIGITS}")
        if self.timestamp_rounding is not None:
            rule = TimeRounding.parse(self.timestamp_rounding)
            object.__setattr__(self, "timestamp_rounding", rule)

    @property
    def rounding(self) -> TimeRounding:
        """The rounding rule in effect (``round`` when none was chosen)."""
        return self.timestamp_rounding or DEFAULT_ROUNDING

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
            "timestamp_rounding": self.rounding.value,
            "float_digits": self.float_digits,
        }
