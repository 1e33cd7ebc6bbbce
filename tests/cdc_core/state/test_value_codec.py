"""The state codec round-trips every row value exactly and builds nothing else."""

from __future__ import annotations

import marshal
import zoneinfo
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from fractions import Fraction
from uuid import UUID

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cdc_core.capture.events import ABSENT, UNAVAILABLE, Interval
from cdc_core.state.image_codec import from_image_bytes, to_image_bytes
from cdc_core.state.value_codec import (
    UnknownValueTypeError,
    ValueDecodeError,
    from_value_bytes,
    to_value_bytes,
)

ZONES = [zoneinfo.ZoneInfo(k) for k in ("Europe/Berlin", "America/St_Johns", "Asia/Kathmandu")]
zones = st.one_of(
    st.none(),
    st.just(UTC),
    st.builds(timezone, st.timedeltas(timedelta(hours=-23), timedelta(hours=23))),
    st.builds(
        timezone, st.timedeltas(timedelta(hours=-23), timedelta(hours=23)), st.text(max_size=5)
    ),
    st.sampled_from(ZONES),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**200), max_value=2**200),
    st.floats(allow_nan=True, allow_infinity=True),
    st.just(-0.0),
    st.text(alphabet=st.characters(codec=None)),  # lone surrogates included
    st.binary(),
    st.binary().map(bytearray),
    st.decimals(allow_nan=True, allow_infinity=True),
    st.sampled_from([Decimal("sNaN"), Decimal("-NaN"), Decimal("1E+400"), Decimal("-0.000")]),
    st.dates(),
    st.datetimes(timezones=zones, allow_imaginary=True),
    st.times(timezones=zones),
    st.timedeltas(),
    st.uuids(),
    st.builds(Interval, st.integers(), st.integers(), st.integers()),
    st.sampled_from([ABSENT, UNAVAILABLE]),
)
hashable = st.one_of(
    st.integers(), st.text(), st.binary(), st.dates(), st.decimals(allow_nan=False)
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner),
        st.lists(inner).map(tuple),
        st.dictionaries(hashable, inner),
        st.dictionaries(st.text(), inner),
        st.frozensets(hashable),
        st.sets(hashable),
    ),
    max_leaves=12,
)


def _same(left: object, right: object) -> bool:
    """Equal, of the same type, down to NaN payloads, -0.0, zones and decimal exponents."""
    if type(left) is not type(right):
        return False
    if isinstance(left, list | tuple):
        assert isinstance(right, list | tuple)
        return len(left) == len(right) and all(map(_same, left, right))
    if isinstance(left, dict):
        assert isinstance(right, dict)
        pairs = zip(left.items(), right.items(), strict=False)
        return len(left) == len(right) and all(_same(a, b) for a, b in pairs)
    if isinstance(left, set | frozenset):
        return sorted(map(repr, left)) == sorted(map(repr, right))  # type: ignore[arg-type]
    if isinstance(left, float):
        return repr(left) == repr(right)
    if isinstance(left, datetime | time) and left.tzinfo is not None:
        assert isinstance(right, datetime | time)
        zone, back = left.tzinfo, right.tzinfo
        same_zone = zone is back or (repr(zone) == repr(back) and type(zone) is type(back))
        return same_zone and repr(left) == repr(right)
    return left is right or repr(left) == repr(right)


@given(values)
def test_every_value_round_trips_exactly(value: object) -> None:
    assert _same(from_value_bytes(to_value_bytes(value)), value)


@given(st.dictionaries(st.text(), values, max_size=8))
def test_every_row_image_round_trips_exactly(image: dict[str, object]) -> None:
    assert _same(from_image_bytes(to_image_bytes(image)), image)


def test_sentinels_and_utc_come_back_as_the_same_objects() -> None:
    assert from_value_bytes(to_value_bytes(ABSENT)) is ABSENT
    assert from_value_bytes(to_value_bytes(UNAVAILABLE)) is UNAVAILABLE
    back = from_value_bytes(to_value_bytes(datetime(2024, 1, 1, tzinfo=UTC)))
    assert isinstance(back, datetime) and back.tzinfo is UTC


@pytest.mark.parametrize(
    ("value", "named"),
    [(Fraction(1, 3), "fractions.Fraction"), (object(), "builtins.object"), ([1, 1j], "complex")],
)
def test_an_unknown_type_is_an_error_naming_it(value: object, named: str) -> None:
    with pytest.raises(UnknownValueTypeError, match=named):
        to_value_bytes(value)


def test_a_tzinfo_other_than_timezone_and_zoneinfo_is_refused() -> None:
    class Custom(timezone.__base__):  # type: ignore[misc, name-defined]
        def utcoffset(self, _: object) -> timedelta:
            return timedelta(0)

    with pytest.raises(UnknownValueTypeError, match="Custom"):
        to_value_bytes(datetime(2024, 1, 1, tzinfo=Custom()))


def test_a_code_object_marshal_builds_is_refused_never_returned() -> None:
    code = compile("import os", "<planted>", "exec")
    for data in (
        marshal.dumps(code),
        marshal.dumps(["L", code]),
        marshal.dumps(({"a": code}, None)),
        marshal.dumps(({code: 1}, None)),
        marshal.dumps(({"a": ["T", code]}, {"a": 5})),
        marshal.dumps(({"a": 1, "b": code}, {"a": 3})),
    ):
        with pytest.raises(ValueDecodeError):
            from_value_bytes(data)
        with pytest.raises(ValueDecodeError):
            from_image_bytes(data)


@pytest.mark.parametrize(
    "node",
    [["Q"], ["D", 5], ["N", 2020, 1, 1], ["Z", 2020, 1, 1, 0, 0, 0, 0, 0, ["z", "../../etc"]],
     ["d", True], [], ["M", 1], ["S", ["L"]], {"a": 1}],
)  # fmt: skip
def test_a_malformed_stored_value_is_a_decode_error(node: object) -> None:
    with pytest.raises(ValueDecodeError):
        from_value_bytes(marshal.dumps(node))


def test_truncated_bytes_are_a_decode_error() -> None:
    data = to_value_bytes([Decimal("1.5"), date(2024, 1, 1), "x" * 50])
    with pytest.raises(ValueDecodeError):
        from_value_bytes(data[:-10])


def test_a_stand_in_in_a_column_without_a_kind_is_refused() -> None:
    with pytest.raises(ValueDecodeError, match="holds a list"):
        from_image_bytes(marshal.dumps(({"a": ["D", "1"]}, None)))
    with pytest.raises(ValueDecodeError, match="holds a tuple"):
        from_image_bytes(marshal.dumps(({"a": (2024, 1, 1, 0, 0, 0, 0, 0), "b": 1}, {"b": 3})))
    with pytest.raises(ValueDecodeError, match="unknown kind 4"):  # a pickle: format 1 only
        from_image_bytes(marshal.dumps(({"a": b"\x80"}, {"a": 4})))
    assert from_image_bytes(marshal.dumps(({"a": ["D", "1"]}, {"a": 5}))) == {"a": Decimal(1)}
    assert from_image_bytes(to_image_bytes({"a": UUID(int=5)})) == {"a": UUID(int=5)}
