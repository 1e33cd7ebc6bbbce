"""Result keys (display text as Spark prints it) back to typed values, and masking."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest

from merkle import types as lt
from merkle.layout import ColumnSpec, RowLayout
from validator.resync.keys import (
    KeyParseError,
    check_key_types,
    display_key,
    masked_key,
    to_typed_key,
)

KEY_TYPES: list[tuple[lt.LogicalType, str, object]] = [
    (lt.IntegerType(), "-42", -42),
    (lt.DecimalType(10, 2), "12.50", decimal.Decimal("12.50")),
    (lt.FloatType(64), "1.0E10", 1e10),
    (lt.StringType(), "o'brien 😀", "o'brien 😀"),
    (lt.StringType(padded=True), "ab  ", "ab  "),
    (lt.UuidType(), "0f8fad5b-d9cb-469f-a165-70867728950e", "0f8fad5b-d9cb-469f-a165-70867728950e"),
    (lt.BooleanType(), "true", True),
    (lt.DateType(), "2025-01-31", dt.date(2025, 1, 31)),
    (lt.TimeType(6), "3723000004", dt.time(1, 2, 3, 4)),
    (lt.TimestampType(6), "2025-01-01 12:00:00.5", dt.datetime(2025, 1, 1, 12, 0, 0, 500000)),
    (lt.TimestampTzType(6), "2025-01-01 12:00:00", dt.datetime(2025, 1, 1, 12, tzinfo=dt.UTC)),
]


def _layout(*types: lt.LogicalType) -> RowLayout:
    """A key of ``types`` and one more column (a key of all columns is a whole-row key)."""
    columns = tuple(ColumnSpec(f"k{i}", t) for i, t in enumerate(types))
    return RowLayout((*columns, ColumnSpec("v", lt.StringType())), tuple(c.name for c in columns))


@pytest.mark.parametrize(("ltype", "text", "value"), KEY_TYPES, ids=[str(t[0]) for t in KEY_TYPES])
def test_each_key_type_reads_back_as_spark_printed_it(
    ltype: lt.LogicalType, text: str, value: object
) -> None:
    assert to_typed_key((text,), _layout(ltype), "c") == (value,)


def test_composite_keys_keep_order_and_nulls() -> None:
    layout = _layout(lt.StringType(), lt.IntegerType())
    assert to_typed_key(("eu", None), layout, "c") == ("eu", None)
    assert display_key(("eu", 7, dt.date(2025, 1, 2))) == ("eu", "7", "2025-01-02")


def test_a_bad_part_names_the_column_never_the_value() -> None:
    with pytest.raises(KeyParseError, match="key column k0 in the result is not a valid") as info:
        to_typed_key(("secret-text",), _layout(lt.IntegerType()), "orders")
    assert "secret-text" not in str(info.value)
    with pytest.raises(KeyParseError, match="has 1 parts, the key has 2 columns"):
        to_typed_key(("1",), _layout(lt.IntegerType(), lt.IntegerType()), "orders")


def test_keys_whose_text_cannot_be_read_back_are_refused() -> None:
    with pytest.raises(KeyParseError, match="key column k0 is bytes"):
        check_key_types(_layout(lt.BytesType()), "blobs")


def test_a_table_without_a_key_is_refused_naming_the_fix() -> None:
    """Equal rows share one whole-row key: repairing them by key cannot tell them apart."""
    whole = RowLayout(
        (ColumnSpec("a", lt.IntegerType()), ColumnSpec("b", lt.StringType())), ("a", "b")
    )
    with pytest.raises(KeyParseError, match=r"has no key.*re-load the table") as info:
        check_key_types(whole, "audit")
    assert info.value.context == {"comparison": "audit"}


def test_sensitive_key_parts_are_masked() -> None:
    assert masked_key(("a@x", "7"), ("email", "id"), frozenset({"email"})) == ("***", "7")
    assert masked_key((None, "7"), ("email", "id"), frozenset({"email"})) == (None, "7")
