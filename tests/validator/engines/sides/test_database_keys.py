"""The database engine's key phase: keys matched by their canonical bytes, and classified."""

from __future__ import annotations

import datetime as dt
import decimal

from validator.engines.sides.keys import KeyEntry, classify, collect_keys, key_text, reported


def entries(*rows: tuple[object, ...]) -> dict[bytes, KeyEntry]:
    return collect_keys(rows, 1, 0)


def test_duplicates_count_and_keep_the_smallest_hash() -> None:
    found = entries((7, "1:7", 3, 99), (7, "1:7", 3, 5), (8, b"1:8", 3, -1))
    assert found[b"1:7"].count == 2 and found[b"1:7"].row_hash == 5
    assert found[b"1:8"].row_hash == 2**64 - 1  # signed hashes are read mod 2**64


def test_every_kind_of_difference_is_classified_and_counted() -> None:
    source = entries((1, "1:1", 0, 10), (2, "1:2", 0, 20), (3, "1:3", 1, 30), (5, "1:5", 2, 50))
    target = entries((1, "1:1", 0, 10), (2, "1:2", 0, 21), (4, "1:4", 1, 40), (5, "1:5", 2, 50))
    target.update(entries((5, "1:5", 2, 50)))
    target[b"1:5"].count = 2
    diff = classify(source, target)
    kinds = {f.key: f.kind for f in diff.findings}
    assert kinds == {
        ("2",): "changed",
        ("3",): "missing_in_target",
        ("4",): "extra_in_target",
        ("5",): "duplicate_key",
    }
    assert diff.by_kind == {
        "changed": 1, "missing_in_target": 1, "extra_in_target": 1, "duplicate_key": 1
    }  # fmt: skip
    assert diff.per_leaf == {0: 1, 1: 2, 2: 1} and diff.total == 4


def test_keys_read_alike_on_both_sides_are_one_key_whatever_their_spelling() -> None:
    """``1.10`` (a DECIMAL(10,2)) and ``1.1`` have the same canonical key bytes."""
    source = entries((decimal.Decimal("1.10"), "3:1.1", 0, 1))
    target = entries((decimal.Decimal("1.1"), "3:1.1", 0, 1))
    assert classify(source, target).findings == []


def test_keys_are_shown_as_the_spark_engine_shows_them() -> None:
    assert key_text(decimal.Decimal("1.10")) == "1.10"
    assert key_text(decimal.Decimal("1E+2")) == "100"
    assert key_text(dt.date(2024, 2, 29)) == "2024-02-29"
    assert key_text(None) is None


def test_reports_are_sorted_by_kind_then_key_and_capped() -> None:
    source = entries(*[(i, f"k{i}", 0, i) for i in range(10)])
    diff = classify(source, {})
    assert [f.key for f in reported(diff, 3)] == [("0",), ("1",), ("2",)]
