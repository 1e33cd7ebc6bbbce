"""Row images as bytes: the value format of the row image store and of spill records.

One image is written for every change, so this is a hot path. ``to_image_values`` gives
``(values, kinds)`` for ``marshal``: ``values`` maps every column to its value when that is
one of ``marshal``'s plain types (``None``, ``bool``, ``int``, ``float``, ``str``,
``bytes``), and otherwise to a primitive stand-in, whose kind ``kinds`` records (``None``
when every value is plain):

=====  ====================================  =====================================
kind   value                                 stand-in
=====  ====================================  =====================================
0      ``Decimal``                           ``str(value)``
1      ``datetime`` without a zone           (y, m, d, h, mi, s, us, fold)
2      ``datetime`` in ``datetime.UTC``      the same
3      ``date``                              proleptic ordinal
4      (format 1 only) anything else         a pickle: read by the migration only
5      anything else                         ``cdc_core.state.value_codec``'s tagged form
=====  ====================================  =====================================

Kinds 0-3 are the common column types, built by their constructors from the stand-in (which
raise on any other type); kind 5 covers every other type the codec knows. Reading checks
that every column without a kind holds a plain value, so an object ``marshal`` can build
but this module never writes (a code object) is refused, never returned.
"""

from __future__ import annotations

import marshal
from collections.abc import Callable, Mapping
from datetime import UTC, date, datetime
from decimal import Decimal
from itertools import chain
from typing import Any

from cdc_core.capture.events import ABSENT, UNAVAILABLE
from cdc_core.errors import ContractError
from cdc_core.state.value_codec import (
    MARSHAL_VERSION,
    PLAIN_TYPES,
    ValueDecodeError,
    from_tagged,
    to_tagged,
)

DECIMAL, NAIVE_DATETIME, UTC_DATETIME, DATE, PICKLED, TAGGED = range(6)
_STR = frozenset({str})
# What a column holds after decoding in the common case: one C check covers the image.
_PLAIN_OR_COMMON = PLAIN_TYPES | {Decimal, datetime, date}
_PLAIN_NAMES = frozenset(kind.__name__ for kind in PLAIN_TYPES)


def _stand_in(value: object) -> tuple[int, object]:
    """The kind and stand-in of a value ``to_image_values`` does not write inline."""
    if type(value) is date:
        assert isinstance(value, date)  # for mypy: `type(...) is` does not narrow
        return DATE, value.toordinal()
    return TAGGED, to_tagged(value)


def to_image_values(
    image: Mapping[str, object], *, full: bool = False
) -> tuple[dict[str, object], dict[str, int] | None]:
    """A row image as ``(values, kinds)`` for ``marshal`` (see the module docstring).

    ``values`` may be ``image`` itself: marshal it before the image changes.

    Args:
        image: The row image.
        full: Refuse ``ABSENT`` and ``UNAVAILABLE`` (a stored image must be full), checked
            in the loop that runs anyway for values that are not plain.

    Raises:
        UnknownValueTypeError: A value has a type the codec does not know.
        ContractError: ``full`` and the image has ``ABSENT`` or ``UNAVAILABLE`` columns.
    """
    if PLAIN_TYPES.issuperset(map(type, image.values())):  # the common case, in C
        return (image if type(image) is dict else dict(image)), None
    values: dict[str, object] = {}
    kinds: dict[str, int] = {}
    value: Any  # its type is tested by identity, which mypy does not narrow
    for column, value in image.items():
        kind = type(value)
        if kind in PLAIN_TYPES:
            values[column] = value
        elif kind is Decimal:  # the commonest stand-ins inline: this runs per column
            kinds[column], values[column] = DECIMAL, str(value)
        elif kind is datetime and (value.tzinfo is None or value.tzinfo is UTC):
            kinds[column] = NAIVE_DATETIME if value.tzinfo is None else UTC_DATETIME
            values[column] = (value.year, value.month, value.day, value.hour, value.minute,
                              value.second, value.microsecond, value.fold)  # fmt: skip
        elif full and (value is ABSENT or value is UNAVAILABLE):
            raise ContractError(f"a stored row image must be full; it has {value!r} columns")
        else:
            kinds[column], values[column] = _stand_in(value)
    return values, kinds


def _of_stand_in(kind: object, data: Any, pickled: Callable[[bytes], object] | None) -> object:
    if kind == DECIMAL and type(data) is str:
        return Decimal(data)
    if kind in (NAIVE_DATETIME, UTC_DATETIME) and type(data) is tuple:
        year, month, day, hour, minute, second, micro, fold = data
        zone = UTC if kind == UTC_DATETIME else None
        return datetime(year, month, day, hour, minute, second, micro, zone, fold=fold)
    if kind == DATE and type(data) is int:
        return date.fromordinal(data)
    if kind == TAGGED:
        return from_tagged(data)
    if kind == PICKLED and pickled is not None and type(data) is bytes:
        return pickled(data)
    raise ValueDecodeError(f"a stored row image has a column of unknown kind {kind!r}")


def from_image_values(
    values: Any, kinds: Any, pickled: Callable[[bytes], object] | None = None
) -> dict[str, object]:
    """The inverse of ``to_image_values``, checking every type ``marshal`` gave back.

    Args:
        values: The stored values and stand-ins.
        kinds: The stand-ins' kinds (``None``: every value is plain).
        pickled: How to read kind 4, format 1's pickles (``None``: refused).

    Raises:
        ValueDecodeError: The data is not a stored row image.
    """
    if type(values) is not dict:
        raise ValueDecodeError("not a stored row image")
    if kinds is not None:
        if type(kinds) is not dict:
            raise ValueDecodeError("a stored row image's kinds are not a dict")
        _decode_stand_ins(values, kinds, pickled)
    # One C pass over the column names and the values covers the common case.
    if not _PLAIN_OR_COMMON.issuperset(chain(map(type, values), map(type, values.values()))):
        _check_plain(values, kinds or {})  # a rarer type: check exactly, column by column
    return values


def _decode_stand_ins(
    values: dict[str, object], kinds: dict[Any, Any], pickled: Callable[[bytes], object] | None
) -> None:
    try:
        for column, kind in kinds.items():
            data = values[column]
            if kind == DECIMAL and type(data) is str:  # the commonest kinds, inline
                values[column] = Decimal(data)
            elif kind in (UTC_DATETIME, NAIVE_DATETIME) and type(data) is tuple:
                year, month, day, hour, minute, second, micro, fold = data
                zone = UTC if kind == UTC_DATETIME else None
                values[column] = datetime(
                    year, month, day, hour, minute, second, micro, zone, fold=fold
                )
            else:
                values[column] = _of_stand_in(kind, data, pickled)
    except (TypeError, ValueError, ArithmeticError, LookupError) as exc:
        raise ValueDecodeError(f"a stored row image has a malformed value ({exc})") from exc


def _check_plain(values: dict[str, object], kinds: Mapping[str, object]) -> None:
    """Every column is named by a str and every one without a kind holds a plain value (not,
    say, a code object)."""
    if not _STR.issuperset(map(type, values)):
        raise ValueDecodeError("a stored row image has a column not named by a str")
    found = {type(v).__name__ for c, v in values.items() if c not in kinds} - _PLAIN_NAMES
    if found:
        raise ValueDecodeError(f"a stored row image holds a {', '.join(sorted(found))}")


def to_image_bytes(image: Mapping[str, object], *, full: bool = False) -> bytes:
    """Serialise a row image losslessly (``full`` as for ``to_image_values``)."""
    return marshal.dumps(to_image_values(image, full=full), MARSHAL_VERSION)


def from_image_bytes(
    data: bytes, pickled: Callable[[bytes], object] | None = None
) -> dict[str, object]:
    """The inverse of ``to_image_bytes`` (``pickled`` as for ``from_image_values``).

    Raises:
        ValueDecodeError: The bytes are not a stored row image.
    """
    try:
        values, kinds = marshal.loads(data)
    except (EOFError, ValueError, TypeError) as exc:  # truncated, or not a pair
        raise ValueDecodeError(f"not a stored row image ({exc})") from exc
    return from_image_values(values, kinds, pickled)
