"""The state directory's value codec: row values as data that cannot execute anything.

Spill segments, the row image store and the checkpoint hold row values (key values, row
images). They used to be pickles, and unpickling runs whatever the bytes name, so anyone
who could write the state directory ran code at the next restart. This codec writes only
data, and reading it builds only the types listed here; anything else is an error that
names the type (``UnknownValueTypeError`` when writing, ``ValueDecodeError`` when reading).

The tagged form (``to_tagged`` / ``from_tagged``) is a tree of JSON's own types:

- ``None``, ``bool``, ``int``, ``float`` (NaN, ±Infinity and -0.0 included) and ``str``
  (lone surrogates included) stand for themselves;
- every other value is a list ``[tag, *payload]`` (so a Python list is tagged too):

  ==========  ================================================  ===========================
  tag         value                                             payload
  ==========  ================================================  ===========================
  ``y``/``Y``  ``bytes`` / ``bytearray``                         hex text
  ``D``       ``Decimal`` (NaN, sNaN, ±Infinity, exponents)     ``str(value)``
  ``d``       ``date``                                          proleptic ordinal
  ``N``       ``datetime`` without a zone                       y, m, d, h, mi, s, us, fold
  ``Z``       ``datetime`` with a zone                          the same, then the zone
  ``t``       ``time`` (with or without a zone)                 h, mi, s, us, fold, zone
  ``e``       ``timedelta``                                     days, seconds, microseconds
  ``u``       ``UUID``                                          hex text
  ``I``       ``Interval``                                      months, days, micros
  ``L``/``T``  ``list`` / ``tuple``                              the items, tagged
  ``S``/``F``  ``set`` / ``frozenset``                           the items, tagged
  ``M``       ``dict``                                          key, value, key, value, ...
  ``A``/``U``  ``ABSENT`` / ``UNAVAILABLE``                      —
  ==========  ================================================  ===========================

  A zone is ``null`` (naive), ``"utc"`` (``datetime.UTC``), ``["o", offset_microseconds,
  name or null]`` (another fixed ``datetime.timezone``) or ``["z", key]`` (a
  ``zoneinfo.ZoneInfo``).

In ``marshal`` data (not JSON, which has no tuples) ``to_marshal_node`` also lets a tuple of
plain values, such as a locator, stand for itself: tagged forms are lists, so this is
unambiguous. Row images take a faster path of their own (``cdc_core.state.image_codec``).
``marshal`` builds
data only, but it can build code objects: the readers here check the type of every object
they get back, so a code object is refused like any unknown type.
"""

from __future__ import annotations

import marshal
import zoneinfo
from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta, timezone, tzinfo
from decimal import Decimal
from typing import Any
from uuid import UUID

from cdc_core.capture.events import ABSENT, UNAVAILABLE, Interval
from cdc_core.errors import ContractError, TerminalError

MARSHAL_VERSION = 4  # stable since Python 3.4; pinned so the formats do not drift
# marshal's types that stand for themselves (bool before int: ``type`` tests are exact).
PLAIN_TYPES: frozenset[type] = frozenset({type(None), bool, int, float, str, bytes})
_SELF: frozenset[type] = frozenset({type(None), bool, int, float, str})  # tagged form's
_INT = frozenset({int})


class UnknownValueTypeError(ContractError):
    """A value of a type the state codec does not know was to be written."""


class ValueDecodeError(TerminalError):
    """Stored bytes are not a value this codec wrote (corrupt, or planted)."""


def _unknown(value: object) -> UnknownValueTypeError:
    kind = type(value)
    return UnknownValueTypeError(
        f"the state codec cannot store a value of type {kind.__module__}.{kind.__qualname__};"
        " add it to cdc_core/state/value_codec.py, or have the connector decode it to a known type"
    )


# -- the tagged form -------------------------------------------------------------------------


def _zone(zone: tzinfo | None) -> list[object] | str | None:
    if zone is None:
        return None
    if zone is UTC:
        return "utc"  # the commonest zone by far (timestamptz, commit times): no list
    if type(zone) is timezone:
        # The constructor's own arguments: a name only when one was given (pickle's way).
        offset, *name = zone.__getinitargs__()  # type: ignore[attr-defined]
        return ["o", offset // timedelta(microseconds=1), name[0] if name else None]
    if type(zone) is zoneinfo.ZoneInfo and zone.key is not None:
        return ["z", zone.key]
    raise _unknown(zone)


def _datetime(value: datetime) -> list[object]:
    fields = [value.year, value.month, value.day, value.hour, value.minute, value.second,
              value.microsecond, value.fold]  # fmt: skip
    if value.tzinfo is None:
        return ["N", *fields]
    return ["Z", *fields, _zone(value.tzinfo)]


def _time(value: time) -> list[object]:
    return ["t", value.hour, value.minute, value.second, value.microsecond, value.fold,
            _zone(value.tzinfo)]  # fmt: skip


def _dict(value: dict[object, object]) -> list[object]:
    out: list[object] = ["M"]
    for key, item in value.items():
        out += (to_tagged(key), to_tagged(item))
    return out


_ENCODERS: dict[type, Callable[[Any], list[object]]] = {
    bytes: lambda v: ["y", v.hex()],
    bytearray: lambda v: ["Y", v.hex()],
    Decimal: lambda v: ["D", str(v)],
    date: lambda v: ["d", v.toordinal()],
    datetime: _datetime,
    time: _time,
    timedelta: lambda v: ["e", v.days, v.seconds, v.microseconds],
    UUID: lambda v: ["u", v.hex],
    Interval: lambda v: ["I", v.months, v.days, v.micros],
    list: lambda v: ["L", *map(to_tagged, v)],
    tuple: lambda v: ["T", *map(to_tagged, v)],
    set: lambda v: ["S", *map(to_tagged, v)],
    frozenset: lambda v: ["F", *map(to_tagged, v)],
    dict: _dict,
    type(ABSENT): lambda _: ["A"],
    type(UNAVAILABLE): lambda _: ["U"],
}


def to_tagged(value: object) -> object:
    """The tagged form of a value (see the module docstring).

    Raises:
        UnknownValueTypeError: The value, or an item inside it, has a type not listed.
    """
    kind = type(value)
    if kind in _SELF:
        return value
    encoder = _ENCODERS.get(kind)
    if encoder is None:
        raise _unknown(value)
    return encoder(value)


def _of_zone(node: object) -> tzinfo | None:
    if node is None:
        return None
    if node == "utc":
        return UTC
    match node:
        case ["o", int(micros), str() | None as name]:
            offset = timedelta(microseconds=micros)
            return timezone(offset) if name is None else timezone(offset, name)
        case ["z", str(key)]:
            return zoneinfo.ZoneInfo(key)
    raise ValueDecodeError(f"not a stored time zone: {_shown(node)}")


def _of_datetime(node: list[Any]) -> datetime:
    aware = node[0] == "Z"
    if len(node) != (10 if aware else 9):
        raise ValueDecodeError(f"not a stored datetime: {_shown(node)}")
    year, month, day, hour, minute, second, micro, fold = _ints(node[1:9])
    zone = _of_zone(node[9]) if aware else None
    return datetime(year, month, day, hour, minute, second, micro, zone, fold=fold)


def _of_time(node: list[Any]) -> time:
    if len(node) != 7:
        raise ValueDecodeError(f"not a stored time: {_shown(node)}")
    hour, minute, second, micro, fold = _ints(node[1:6])
    return time(hour, minute, second, micro, _of_zone(node[6]), fold=fold)


def _of_dict(node: list[Any]) -> dict[object, object]:
    items = [from_tagged(item) for item in node[1:]]
    if len(items) % 2:
        raise ValueDecodeError("a stored dict has a key without a value")
    return dict(zip(items[::2], items[1::2], strict=True))


def _ints(items: list[Any]) -> list[int]:
    if not _INT.issuperset(map(type, items)):
        raise ValueDecodeError(f"expected integers, found {_shown(items)}")
    return items


def _text(node: list[Any]) -> str:
    if len(node) != 2 or type(node[1]) is not str:
        raise ValueDecodeError(f"expected a tag and a text, found {_shown(node)}")
    return str(node[1])


def _shown(node: object) -> str:
    text = repr(node)  # state files hold row values: show only the start, for diagnosis
    return text if len(text) <= 60 else text[:57] + "..."


_DECODERS: dict[str, Callable[[list[Any]], object]] = {
    "y": lambda n: bytes.fromhex(_text(n)),
    "Y": lambda n: bytearray.fromhex(_text(n)),
    "D": lambda n: Decimal(_text(n)),
    "d": lambda n: date.fromordinal(*_ints(n[1:])),
    "N": _of_datetime,
    "Z": _of_datetime,
    "t": _of_time,
    "e": lambda n: timedelta(*_ints(n[1:])),
    "u": lambda n: UUID(hex=_text(n)),
    "I": lambda n: Interval(*_ints(n[1:])),
    "L": lambda n: [from_tagged(item) for item in n[1:]],
    "T": lambda n: tuple(from_tagged(item) for item in n[1:]),
    "S": lambda n: {from_tagged(item) for item in n[1:]},
    "F": lambda n: frozenset(from_tagged(item) for item in n[1:]),
    "M": _of_dict,
    "A": lambda _: ABSENT,
    "U": lambda _: UNAVAILABLE,
}


def from_tagged(node: object) -> object:
    """The value of a tagged form; builds only the types ``to_tagged`` writes.

    Raises:
        ValueDecodeError: ``node`` is not a tagged form (a wrong tag, a wrong payload, or
            an object of another type, such as a code object ``marshal`` built).
    """
    kind = type(node)
    if kind in _SELF:
        return node
    if kind is not list or not node or type(node[0]) is not str:  # type: ignore[index]
        raise ValueDecodeError(f"not a stored value: {type(node).__name__} {_shown(node)}")
    assert isinstance(node, list)  # for mypy: `kind is` does not narrow
    decoder = _DECODERS.get(node[0])
    if decoder is None:
        raise ValueDecodeError(f"unknown value tag {node[0]!r}")
    try:
        return decoder(node)
    except (ValueError, TypeError, ArithmeticError, LookupError, RecursionError) as exc:
        raise ValueDecodeError(f"not a stored value: {_shown(node)} ({exc})") from exc


# -- bytes --------------------------------------------------------------------------------------


def to_value_bytes(value: object) -> bytes:
    """Any value the codec knows, as bytes (``marshal`` of its tagged form)."""
    return marshal.dumps(to_tagged(value), MARSHAL_VERSION)  # type: ignore[arg-type]


def from_value_bytes(data: bytes) -> object:
    """The inverse of ``to_value_bytes``.

    Raises:
        ValueDecodeError: The bytes are not a stored value.
    """
    return from_tagged(loads_marshal(data))


def loads_marshal(data: bytes) -> Any:
    """``marshal.loads``, with its errors (truncated or foreign bytes) as ``ValueDecodeError``.

    The result is unchecked data: the caller checks every type it uses.
    """
    try:
        return marshal.loads(data)
    except (EOFError, ValueError, TypeError) as exc:
        raise ValueDecodeError(f"not stored data ({exc})") from exc


def to_marshal_node(value: object) -> object:
    """``to_tagged`` for ``marshal`` data, where a tuple of plain values (a locator, a key)
    stands for itself: tagged forms are lists, so it is unambiguous (not for JSON)."""
    kind = type(value)
    if kind in PLAIN_TYPES:
        return value
    if isinstance(value, tuple) and kind is tuple and PLAIN_TYPES.issuperset(map(type, value)):
        return value
    return to_tagged(value)


def from_marshal_node(node: object) -> object:
    """The inverse of ``to_marshal_node``, checking the types ``marshal`` gave back.

    Raises:
        ValueDecodeError: ``node`` is not a stored value.
    """
    kind = type(node)
    if kind is tuple:
        assert isinstance(node, tuple)  # for mypy: `kind is` does not narrow
        if PLAIN_TYPES.issuperset(map(type, node)):
            return node
        raise ValueDecodeError(f"a stored tuple holds a non-plain item: {_shown(node)}")
    if kind is bytes:
        return node
    return from_tagged(node)
