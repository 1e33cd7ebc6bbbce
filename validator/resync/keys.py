"""Keys of a result, turned back into typed values a database or the lake can look up.

A result carries each differing key as display text per key column: what Spark's
``CAST(key AS STRING)`` printed for the value as the comparison read
it (``validator.engines.spark.compare``).
A re-sync needs the values themselves, so each part is parsed by its key column's logical
type. Spark prints timestamps in the session's time zone, which replcheck pins to UTC
(``validator.engines.sides.spark.session``); times arrive as microseconds since midnight, as
the readers hand them to Spark. Key columns of other types (bytes, JSON, intervals) cannot be parsed
back from their text: such a comparison cannot be re-synced by key.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable, Sequence
from typing import Any

from cdc_core.errors import TerminalError
from merkle import types as lt
from merkle.layout import RowLayout
from validator.result import MASK, TOKEN_PREFIX, Key

TypedKey = tuple[object, ...]


class KeyParseError(TerminalError):
    """A key part in a result cannot be read back as its column's type."""


def _time(text: str) -> dt.time | dt.timedelta:
    micros = int(text)
    if 0 <= micros < 86_400_000_000:
        seconds, micro = divmod(micros, 1_000_000)
        return dt.time(seconds // 3600, seconds // 60 % 60, seconds % 60, micro)
    return dt.timedelta(microseconds=micros)  # MySQL TIME is a duration beyond a day


def _timestamp(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.strip())


def _timestamp_tz(text: str) -> dt.datetime:
    moment = _timestamp(text)
    # Without an offset the text is in Spark's session zone, which replcheck keeps at UTC.
    return moment.replace(tzinfo=dt.UTC) if moment.tzinfo is None else moment.astimezone(dt.UTC)


def _boolean(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in ("true", "false", "1", "0"):
        raise ValueError(f"not a boolean: {lowered[:10]}")
    return lowered in ("true", "1")


_PARSERS: dict[type, Callable[[str], Any]] = {
    lt.IntegerType: int,
    lt.DecimalType: decimal.Decimal,
    lt.FloatType: float,
    lt.StringType: str,
    lt.UuidType: str,
    lt.BooleanType: _boolean,
    lt.DateType: dt.date.fromisoformat,
    lt.TimeType: _time,
    lt.TimestampType: _timestamp,
    lt.TimestampTzType: _timestamp_tz,
}


def check_key_types(layout: RowLayout, comparison: str) -> None:
    """Raise ``KeyParseError`` when a key column's type cannot be read back from text, or
    the key is the whole row (a table without a key: equal rows are one key)."""
    if layout.whole_row_key:
        raise KeyParseError(
            f"comparison {comparison}: the table has no key, so it is compared as whole rows"
            " and equal rows share one key, which a re-sync by key cannot repair one by one;"
            " re-load the table (remove its lake table and restart the pipeline) or give it a"
            " primary key",
            {"comparison": comparison},
        )
    for column in layout.key_columns:
        if type(column.ltype) not in _PARSERS:
            raise KeyParseError(
                f"comparison {comparison}: key column {column.name} is {column.ltype}, whose"
                " display text cannot be turned back into a value; re-sync such a table by"
                " re-loading it (remove its lake table and restart the pipeline)",
                {"comparison": comparison, "column": column.name},
            )


def to_typed_key(key: Key, layout: RowLayout, comparison: str) -> TypedKey:
    """One result key as typed values, in key-column order.

    Raises:
        KeyParseError: A part does not parse as its column's type (names the column, never
            the value, which may be sensitive).
    """
    check_key_types(layout, comparison)
    columns = layout.key_columns
    if len(key) != len(columns):
        raise KeyParseError(
            f"comparison {comparison}: a key in the result has {len(key)} parts, the key"
            f" has {len(columns)} columns ({', '.join(layout.key)}): is it the right result?",
            {"comparison": comparison},
        )
    pairs = zip(key, columns, strict=True)
    return tuple(_parse(part, column, comparison) for part, column in pairs)


def parse_part(text: str, ltype: lt.LogicalType) -> object:
    """The value a key part's display text stands for.

    Raises:
        KeyError: The type cannot be read back from text.
        ValueError, ArithmeticError: The text is not a value of the type.
    """
    return _PARSERS[type(ltype)](text)


def _parse(part: str | None, column: Any, comparison: str) -> object:
    if part is None:
        return None
    try:
        return parse_part(part, column.ltype)
    except (ValueError, ArithmeticError) as exc:
        raise KeyParseError(
            f"comparison {comparison}: a value of key column {column.name} in the result is"
            f" not a valid {column.ltype}: is it the result of this comparison?",
            {"comparison": comparison, "column": column.name},
        ) from exc


def display_key(key: TypedKey) -> Key:
    """A typed key as display text (ISO forms for times), None for NULL parts."""
    return tuple(None if part is None else _display(part) for part in key)


def _display(part: object) -> str:
    if isinstance(part, dt.datetime | dt.date | dt.time):
        return part.isoformat()
    return str(part)


def masked_key(key: Key, key_columns: Sequence[str], sensitive: frozenset[str]) -> Key:
    """``key`` with the parts of sensitive key columns replaced by ``MASK`` (a part that is
    already a token, as results show them, stays: it tells rows apart)."""
    return tuple(
        MASK
        if name in sensitive and part is not None and not part.startswith(TOKEN_PREFIX)
        else part
        for part, name in zip(key, key_columns, strict=True)
    )
