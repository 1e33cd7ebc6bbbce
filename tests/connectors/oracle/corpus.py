"""Decoding of the tagged JSON values the Oracle test data files use for typed values."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from cdc_core.capture.events import ABSENT, UNAVAILABLE
from merkle.canonical import Interval


def typed(value: Any) -> object:
    """A JSON value of a data file as the Python value it stands for.

    Plain JSON strings, integers and null are themselves; objects are tagged:
    ``$dec`` Decimal, ``$float`` float, ``$ts`` naive datetime, ``$tstz`` aware datetime,
    ``$hex`` bytes, ``$ym`` an Interval of months, ``$ds`` [days, seconds, micros]
    timedelta, ``$absent`` ABSENT, ``$unavailable`` UNAVAILABLE.
    """
    if not isinstance(value, dict):
        return value
    ((tag, payload),) = value.items()
    decoders: dict[str, Callable[[Any], object]] = {
        "$dec": Decimal,
        "$float": float,
        "$ts": dt.datetime.fromisoformat,
        "$tstz": dt.datetime.fromisoformat,
        "$hex": bytes.fromhex,
        "$ym": lambda months: Interval(months=months),
        "$ds": lambda parts: dt.timedelta(days=parts[0], seconds=parts[1], microseconds=parts[2]),
        "$absent": lambda _: ABSENT,
        "$unavailable": lambda _: UNAVAILABLE,
    }
    return decoders[tag](payload)


def image(
    values: dict[str, Any] | None, columns: list[str], default: object
) -> dict[str, object] | None:
    """A full row image: ``default`` for every column ``values`` does not list."""
    if values is None:
        return None
    return {column: default for column in columns} | {k: typed(v) for k, v in values.items()}
