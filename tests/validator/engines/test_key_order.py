"""Differing keys are reported in the natural order of their typed values (issue 38, item 6):
numbers numerically (1, 2, 10, 100, not 1, 10, 100, 2 as text sorts them), a composite key
column by column, NULL first; every engine picks and orders the detailed keys alike."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

from merkle.layout import ColumnSpec, RowLayout
from merkle.types import IntegerType, StringType
from validator.engines.sides.keys import KeyEntry, classify, reported
from validator.engines.spark.compare import _detail, _KeyedDiff
from validator.result import key_order
from validator.settings import CompareSettings


def test_numbers_sort_numerically_and_null_first() -> None:
    keys = [(10,), (2,), (None,), (100,), (decimal.Decimal("1.5"),), (-3,), (1,)]
    assert sorted(keys, key=key_order) == [
        (None,), (-3,), (1,), (decimal.Decimal("1.5"),), (2,), (10,), (100,)
    ]  # fmt: skip


def test_a_composite_key_sorts_column_by_column() -> None:
    keys = [("b", 2), ("a", 10), ("b", 10), ("a", 9), ("a", None)]
    assert sorted(keys, key=key_order) == [("a", None), ("a", 9), ("a", 10), ("b", 2), ("b", 10)]


def test_text_dates_and_times_keep_their_own_order() -> None:
    """Text sorts as text (a text "10" before "9"); dates and times in time order."""
    assert sorted([("9",), ("10",)], key=key_order) == [("10",), ("9",)]
    days = [(dt.date(2024, 10, 1),), (dt.date(2024, 9, 30),)]
    assert sorted(days, key=key_order) == list(reversed(days))
    stamps = [(dt.datetime(2024, 1, 1, 10),), (dt.datetime(2024, 1, 1, 9, 59),)]
    assert sorted(stamps, key=key_order) == list(reversed(stamps))


def test_a_nan_key_sorts_without_an_error() -> None:
    keys = [(decimal.Decimal("NaN"),), (2,), (float("nan"),), (1,)]
    assert [k for k in sorted(keys, key=key_order)][:2] == [(1,), (2,)]


def _entries(*keys: Any) -> dict[bytes, KeyEntry]:
    return {str(k).encode(): KeyEntry((k,), 1, 0, 0, 0) for k in keys}


def test_the_database_engines_report_integer_keys_in_numeric_order() -> None:
    """The database, local and hybrid engines (``reported``): 1, 2, 10, 100."""
    diff = classify(_entries(100, 2, 1, 10, 20), {})
    assert [f.key for f in reported(diff, 4)] == [("1",), ("2",), ("10",), ("20",)]


def test_the_spark_engine_reports_integer_keys_in_numeric_order() -> None:
    """The Spark engine collects each key's typed value beside its text and sorts by it."""
    layout = RowLayout((ColumnSpec("id", IntegerType()), ColumnSpec("v", StringType())), ("id",))
    rows = [
        {"id": str(k), "_key_order_0": k, "kind": "missing_in_target", "s_count": 1,
         "t_count": None, "_leaf": 0}
        for k in (100, 2, 1, 10, 20)
    ]  # fmt: skip
    keyed = _KeyedDiff(rows, len(rows), {"missing_in_target": len(rows)}, {0: len(rows)})
    found = _detail(keyed, [], layout, CompareSettings(max_reported_rows=4))
    assert [d.key for d in found] == [("1",), ("2",), ("10",), ("20",)]
