"""Logical types: the product-independent vocabulary both sides of a comparison agree on.

Every column of every product is mapped to one of these before it is hashed (DESIGN.md,
"The hash contract"). A logical type carries only what changes the canonical bytes
(decimal scale, float width, fractional-second precision, CHAR padding); everything else
about a product's native type is a connector's business.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cdc_core.errors import ContractError

MAX_FRACTION_DIGITS = 6  # microseconds: the finest precision the contract keeps


class LogicalType:
    """Base of the logical types; subclasses are frozen dataclasses."""

    name: str = "?"

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class IntegerType(LogicalType):
    """Whole numbers of any size (signed, unsigned, BIGINT UNSIGNED, NUMBER(p,0))."""

    name = "integer"


@dataclass(frozen=True, slots=True)
class DecimalType(LogicalType):
    """Exact decimals; ``precision``/``scale`` are informative, the encoding normalises."""

    precision: int | None = None
    scale: int | None = None
    name = "decimal"

    def __post_init__(self) -> None:
        if (self.precision is None) != (self.scale is None):
            raise ContractError("decimal needs both precision and scale, or neither")
        if self.precision is not None and not 0 <= (self.scale or 0) <= self.precision:
            raise ContractError(f"decimal({self.precision},{self.scale}): scale out of range")

    def __str__(self) -> str:
        if self.precision is None:
            return "decimal"
        return f"decimal({self.precision},{self.scale})"


@dataclass(frozen=True, slots=True)
class FloatType(LogicalType):
    """IEEE binary floating point, 32 or 64 bits wide."""

    bits: int = 64
    name = "float"

    def __post_init__(self) -> None:
        if self.bits not in (32, 64):
            raise ContractError(f"float width must be 32 or 64 bits, not {self.bits}")

    def __str__(self) -> str:
        return f"float{self.bits}"


@dataclass(frozen=True, slots=True)
class StringType(LogicalType):
    """Unicode text; ``padded`` marks fixed-width CHAR columns (see ``trim_char``)."""

    padded: bool = False
    name = "string"

    def __str__(self) -> str:
        return "char" if self.padded else "string"


@dataclass(frozen=True, slots=True)
class BytesType(LogicalType):
    """Raw binary strings (BLOB, BYTEA, RAW, VARBINARY)."""

    name = "bytes"


@dataclass(frozen=True, slots=True)
class BooleanType(LogicalType):
    """True/false (BOOLEAN, BIT(1), TINYINT(1) when configured)."""

    name = "boolean"


@dataclass(frozen=True, slots=True)
class DateType(LogicalType):
    """Calendar dates without time of day."""

    name = "date"


@dataclass(frozen=True, slots=True)
class _FractionalType(LogicalType):
    """A time-of-day or timestamp with ``precision`` fractional-second digits (0..6)."""

    precision: int = MAX_FRACTION_DIGITS

    def __post_init__(self) -> None:
        if not 0 <= self.precision <= MAX_FRACTION_DIGITS:
            raise ContractError(
                f"{self.name}({self.precision}): precision must be 0..{MAX_FRACTION_DIGITS}"
            )

    def __str__(self) -> str:
        return f"{self.name}({self.precision})"


@dataclass(frozen=True, slots=True)
class TimeType(_FractionalType):
    """Time of day, or a signed duration as MySQL's TIME allows (-838:59:59..838:59:59)."""

    name = "time"


@dataclass(frozen=True, slots=True)
class TimeTzType(_FractionalType):
    """A time of day with its UTC offset (PostgreSQL's ``time with time zone``).

    Neither a time of day (the offset counts) nor an instant (it has no date): two values
    are equal when both the wall-clock time and the offset are, as PostgreSQL compares
    them. Readers hand values to Arrow and Spark as ``struct<micros: int64,
    offset_seconds: int32>`` (``TIME_TZ_FIELDS``): the wall clock in microseconds since
    midnight and the offset in seconds east of UTC.
    """

    name = "time_tz"


TIME_TZ_FIELDS = ("micros", "offset_seconds")
"""Field names of the Arrow/Spark struct holding a ``time_tz`` value (see ``TimeTzType``)."""


@dataclass(frozen=True, slots=True)
class TimestampType(_FractionalType):
    """Wall-clock date and time without a zone (DATETIME, TIMESTAMP WITHOUT TIME ZONE)."""

    name = "timestamp"


@dataclass(frozen=True, slots=True)
class TimestampTzType(_FractionalType):
    """An instant (TIMESTAMPTZ, MariaDB TIMESTAMP, TIMESTAMP WITH TIME ZONE)."""

    name = "timestamp_tz"


@dataclass(frozen=True, slots=True)
class JsonType(LogicalType):
    """JSON documents, compared by content (key order and number spelling do not count)."""

    name = "json"


@dataclass(frozen=True, slots=True)
class UuidType(LogicalType):
    """128-bit UUIDs, whether stored as text, UUID or BINARY(16)."""

    name = "uuid"


@dataclass(frozen=True, slots=True)
class IntervalType(LogicalType):
    """Durations as (months, microseconds); a day is 24 hours, a month is not 30 days."""

    name = "interval"


@dataclass(frozen=True, slots=True)
class ArrayType(LogicalType):
    """A one-dimensional list of values of one logical type, each possibly NULL.

    Arrow and Spark hold it as a list (``list<element>``, ``array<element>``); PostgreSQL's
    arrays map here when they are one-dimensional with lower bound 1 (``merkle.canonical``).
    """

    element: LogicalType
    name = "array"

    def __post_init__(self) -> None:
        if not isinstance(self.element, LogicalType):
            raise ContractError(f"an array's element must be a logical type, not {self.element!r}")

    def __str__(self) -> str:
        return f"array<{self.element}>"


_SIMPLE: dict[str, LogicalType] = {
    "integer": IntegerType(),
    "decimal": DecimalType(),
    "float": FloatType(64),
    "double": FloatType(64),
    "float64": FloatType(64),
    "float32": FloatType(32),
    "real": FloatType(32),
    "string": StringType(),
    "char": StringType(padded=True),
    "bytes": BytesType(),
    "boolean": BooleanType(),
    "date": DateType(),
    "time": TimeType(),
    "time_tz": TimeTzType(),
    "timestamp": TimestampType(),
    "timestamp_tz": TimestampTzType(),
    "json": JsonType(),
    "uuid": UuidType(),
    "interval": IntervalType(),
}
_PRECISE: dict[str, type[_FractionalType]] = {
    "time": TimeType,
    "time_tz": TimeTzType,
    "timestamp": TimestampType,
    "timestamp_tz": TimestampTzType,
}
_PATTERN = re.compile(r"^\s*([a-z_0-9]+)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?\s*$")


def parse_logical_type(text: str) -> LogicalType:
    """Parse the text form of a logical type, the inverse of ``str(ltype)``.

    Examples: ``integer``, ``decimal(10,2)``, ``float32``, ``char``, ``timestamp_tz(3)``,
    ``array<time_tz(3)>``.
    """
    bare = text.strip().lower()
    if bare.startswith("array<") and bare.endswith(">"):
        return ArrayType(parse_logical_type(bare[len("array<") : -1]))
    match = _PATTERN.match(bare)
    if not match:
        raise ContractError(f"not a logical type: {text!r}")
    name, first, second = match.groups()
    if first is None:
        if name in _SIMPLE:
            return _SIMPLE[name]
    elif name == "decimal" and second is not None:
        return DecimalType(int(first), int(second))
    elif name in _PRECISE and second is None:
        return _PRECISE[name](int(first))
    known = ", ".join([*sorted(_SIMPLE), "array<element>"])
    raise ContractError(f"not a logical type: {text!r} (known: {known})")
