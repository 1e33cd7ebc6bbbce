"""The comparison engine finds exactly the injected differences (recall and precision 1)."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import pytest

from merkle.layout import ColumnSpec, RowLayout
from merkle.types import DecimalType, IntegerType, StringType, TimestampType
from validator.engines.sides.spark.side import Side
from validator.engines.spark.compare import CompareSettings, compare_sides
from validator.result import MASK, Changed, DuplicateKey, ExtraInTarget, MissingInTarget, Status

pytestmark = pytest.mark.spark

SCHEMA = "id bigint, name string, amount decimal(10,2), email string, updated timestamp_ntz"
LAYOUT = RowLayout(
    (
        ColumnSpec("id", IntegerType()),
        ColumnSpec("name", StringType()),
        ColumnSpec("amount", DecimalType(10, 2)),
        ColumnSpec("email", StringType(), sensitive=True),
        ColumnSpec("updated", TimestampType()),
    ),
    key=("id",),
)
BASE = dt.datetime(2024, 1, 1, 12, 0, 0)


def source_rows(count: int = 2000) -> list[tuple[Any, ...]]:
    return [
        (
            i,
            f"name-{i}",
            decimal.Decimal(i) / 100,
            f"user{i}@example.com",
            BASE + dt.timedelta(seconds=i),
        )
        for i in range(count)
    ]


def drifted(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    by_id = {row[0]: list(row) for row in rows}
    for missing in (5, 700, 1999):
        del by_id[missing]
    by_id[42][1] = "renamed"
    by_id[43][2] = decimal.Decimal("999.99")
    by_id[44][3] = "changed@example.com"
    by_id[45][4] = by_id[45][4] + dt.timedelta(microseconds=1)
    target = [tuple(row) for row in by_id.values()]
    target += [(5000, "extra", decimal.Decimal("1.00"), None, BASE), (5001, None, None, None, None)]
    target.append((100, "dup", decimal.Decimal("1.00"), None, BASE))  # second row for id 100
    return target


def run(spark: Any, source: list[Any], target: list[Any], **settings: Any) -> Any:
    sides = [
        Side(spark.createDataFrame(rows, SCHEMA), label)
        for rows, label in ((source, "src.orders"), (target, "lake.orders"))
    ]
    return compare_sides("orders", sides[0], sides[1], LAYOUT, CompareSettings(**settings))


def test_identical_sides_are_in_sync(spark: Any) -> None:
    rows = source_rows(500)
    result = run(spark, rows, list(reversed(rows)))
    assert result.status is Status.IN_SYNC
    assert result.differences == () and result.leaves_mismatched == 0
    assert result.source_rows == result.target_rows == 500


def test_every_injected_difference_and_nothing_else(spark: Any) -> None:
    rows = source_rows()
    result = run(spark, rows, drifted(rows), rows_per_leaf=100)
    assert result.status is Status.DIFFERENCES
    assert result.depth == 5  # 2,000 rows at about 100 per leaf
    found = {(type(d).__name__, d.key) for d in result.differences}
    assert found == {
        ("MissingInTarget", ("5",)),
        ("MissingInTarget", ("700",)),
        ("MissingInTarget", ("1999",)),
        ("ExtraInTarget", ("5000",)),
        ("ExtraInTarget", ("5001",)),
        ("Changed", ("42",)),
        ("Changed", ("43",)),
        ("Changed", ("44",)),
        ("Changed", ("45",)),
        ("DuplicateKey", ("100",)),
    }
    assert result.counts_by_kind == {
        "missing_in_target": 3,
        "extra_in_target": 2,
        "changed": 4,
        "duplicate_key": 1,
    }
    assert sum(result.mismatched_leaves.values()) == result.differences_total == 10
    assert result.leaves_mismatched == len(result.mismatched_leaves) <= 10


def test_changed_columns_are_named_and_sensitive_values_masked(spark: Any) -> None:
    rows = source_rows()
    result = run(spark, rows, drifted(rows))
    changed = {d.key[0]: d.columns for d in result.differences if isinstance(d, Changed)}
    assert [(c.column, c.source, c.target) for c in changed["42"]] == [
        ("name", "name-42", "renamed")
    ]
    assert [(c.column, c.source, c.target) for c in changed["43"]] == [("amount", "0.43", "999.99")]
    assert [(c.column, c.source, c.target) for c in changed["44"]] == [("email", MASK, MASK)]
    assert [c.column for c in changed["45"]] == ["updated"]
    duplicate = next(d for d in result.differences if isinstance(d, DuplicateKey))
    assert (duplicate.side, duplicate.count) == ("target", 2)
    assert "user44@example.com" not in repr(result) and "changed@example.com" not in repr(result)


def test_report_size_is_capped_but_everything_is_counted(spark: Any) -> None:
    rows = source_rows()
    result = run(spark, rows, drifted(rows), max_reported_rows=4)
    assert len(result.differences) == 4
    assert result.differences_total == 10
    assert result.differences_omitted == 6


def test_composite_and_string_keys(spark: Any) -> None:
    layout = RowLayout.of(
        [("region", StringType()), ("order_no", IntegerType()), ("total", DecimalType(8, 2))],
        key=["region", "order_no"],
    )
    schema = "region string, order_no bigint, total decimal(8,2)"
    source = [(r, n, decimal.Decimal(n)) for r in ("eu", "us", "é|x") for n in range(300)]
    target = [row for row in source if row != ("us", 7, decimal.Decimal(7))]
    target = [(r, n, decimal.Decimal(1) if (r, n) == ("é|x", 3) else t) for r, n, t in target]
    target.append(("eu|", 1, decimal.Decimal(1)))
    sides = [
        Side(spark.createDataFrame(rows, schema), label)
        for rows, label in ((source, "a"), (target, "b"))
    ]
    result = compare_sides("regional", sides[0], sides[1], layout, CompareSettings(depth=3))
    found = {(type(d).__name__, d.key) for d in result.differences}
    assert found == {
        ("MissingInTarget", ("us", "7")),
        ("Changed", ("é|x", "3")),
        ("ExtraInTarget", ("eu|", "1")),
    }
    assert isinstance(result.differences[0], Changed | ExtraInTarget | MissingInTarget)


def test_a_key_duplicated_on_both_sides_counts_once_per_side(spark: Any) -> None:
    rows = source_rows(50)
    source = [*rows, rows[10]]
    target = [*rows, rows[10], rows[10]]
    result = run(spark, source, target)
    duplicates = [d for d in result.differences if isinstance(d, DuplicateKey)]
    assert {(d.side, d.count) for d in duplicates} == {("source", 2), ("target", 3)}
    assert result.counts_by_kind == {"duplicate_key": 2}
    assert result.differences_total == len(result.differences) == 2
    assert result.differences_omitted == 0
