"""The zero-date policy on single values, without a server: the binlog decoder's bytes,
the driver's texts and column defaults all read a zero date as NULL and refuse every other
date that is not a calendar date (``connectors/mariadb/zero_dates.py``)."""

from __future__ import annotations

import datetime as dt

import pytest

from connectors.base import key_text
from connectors.mariadb.binlog.values import _date, _datetime2
from connectors.mariadb.missing_columns import NOT_CONSTANT, constant_default
from connectors.mariadb.zero_dates import NOT_A_DATE, UnrepresentableDateError, from_text


def _date_bytes(year: int, month: int, day: int) -> bytes:
    """A binlog DATE: ``year << 9 | month << 5 | day`` in 3 little-endian bytes."""
    return (year << 9 | month << 5 | day).to_bytes(3, "little")


def _datetime2_bytes(day: tuple[int, int, int], time: tuple[int, int, int]) -> bytes:
    """A binlog DATETIME2(0) (MySQL ``my_datetime_packed_to_binary``)."""
    year, month, dom = day
    ymd = (year * 13 + month) << 5 | dom
    hms = time[0] << 12 | time[1] << 6 | time[2]
    return ((ymd << 17 | hms) + 0x8000000000).to_bytes(5, "big")


@pytest.mark.parametrize(
    ("parts", "value"),
    [
        ((0, 0, 0), None),
        ((2024, 2, 29), dt.date(2024, 2, 29)),
        ((2024, 0, 15), NOT_A_DATE),
        ((2024, 1, 0), NOT_A_DATE),
        ((0, 1, 15), NOT_A_DATE),
        ((2023, 2, 31), NOT_A_DATE),
    ],
)
def test_a_logged_date_is_a_date_null_or_refused(
    parts: tuple[int, int, int], value: object
) -> None:
    assert _date(_date_bytes(*parts), 0) == (value, 3)


@pytest.mark.parametrize(
    ("day", "time", "value"),
    [
        ((0, 0, 0), (0, 0, 0), None),
        ((2024, 5, 6), (7, 8, 9), dt.datetime(2024, 5, 6, 7, 8, 9)),
        ((2024, 0, 15), (10, 0, 0), NOT_A_DATE),
        ((0, 0, 0), (10, 11, 12), NOT_A_DATE),  # a time on the zero date is not zero
    ],
)
def test_a_logged_datetime_is_a_datetime_null_or_refused(
    day: tuple[int, int, int], time: tuple[int, int, int], value: object
) -> None:
    assert _datetime2(0)(_datetime2_bytes(day, time), 0) == (value, 5)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0000-00-00", None),
        ("0000-00-00 00:00:00.000", None),
        ("2024-00-15", NOT_A_DATE),
        ("0000-00-00 00:00:00.001", NOT_A_DATE),
        ("2023-02-31 01:00:00", NOT_A_DATE),
    ],
)
def test_a_date_the_driver_returns_as_text_is_null_or_refused(text: str, value: object) -> None:
    assert from_text(text) is value


@pytest.mark.parametrize(
    ("default", "column_type", "value"),
    [
        ("'0000-00-00 00:00:00'", "datetime", None),
        ("'0000-00-00 00:00:00.000000'", "timestamp(6)", None),  # zero in every time zone
        ("'2024-00-01'", "date", NOT_A_DATE),
        ("'2024-01-00 10:00:00'", "datetime", NOT_A_DATE),
        ("'1971-01-01 00:00:00'", "timestamp", NOT_CONSTANT),
    ],
)
def test_zero_and_partial_defaults_read_as_the_log_reads_them(
    default: str, column_type: str, value: object
) -> None:
    assert constant_default(default, column_type, generated=False) is value


def test_the_error_names_table_column_and_key_and_nothing_else() -> None:
    key = key_text(["region", "id"], ["eu", 7])
    error = UnrepresentableDateError.of("shop.orders", "shipped", key, "mariadb-bin.000001:4")
    before, after = UnrepresentableDateError.around_key("shop.orders", "shipped")
    assert error.message == f"{before}region=eu, id=7{after}"
    assert error.message.startswith("column shipped of table shop.orders, in the row with key")
    assert "columns.exclude" in error.message  # the fix
    assert error.context == {
        "table": "shop.orders",
        "column": "shipped",
        "key": "region=eu, id=7",
        "position": "mariadb-bin.000001:4",
    }
    assert key_text(["id"], [None]) == "id=NULL"
