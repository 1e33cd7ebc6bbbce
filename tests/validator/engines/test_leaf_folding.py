"""Leaf digests folded up from a finer depth equal those computed at the depth itself, and
a tree deeper than the fine depth still finds exactly the injected difference."""

from __future__ import annotations

import random
from typing import Any

import pytest

from merkle.layout import ColumnSpec, RowLayout
from merkle.tree import build_leaf_digests
from merkle.types import IntegerType, StringType
from validator.engines.sides.spark.side import Side
from validator.engines.spark.compare import FINE_DEPTH, CompareSettings, compare_sides, fold_digests
from validator.result import Changed, Status

LAYOUT = RowLayout((ColumnSpec("id", IntegerType()), ColumnSpec("name", StringType())), key=("id",))


def random_hashes(count: int, seed: int) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    return [(rng.getrandbits(64), rng.getrandbits(64)) for _ in range(count)]


@pytest.mark.parametrize("depth", [0, 1, 5, 11, FINE_DEPTH])
def test_folded_digests_equal_digests_at_the_depth(depth: int) -> None:
    hashes = random_hashes(5000, seed=depth)
    fine = build_leaf_digests(hashes, FINE_DEPTH)
    assert fold_digests(fine, FINE_DEPTH, depth) == build_leaf_digests(hashes, depth)


def test_folding_wraps_hash_sums_at_64_bits() -> None:
    top = (1 << 64) - 1
    hashes = [(0, top), (1, top), (2, 5)]  # all in leaf 0 at any depth below 62
    folded = fold_digests(build_leaf_digests(hashes, FINE_DEPTH), FINE_DEPTH, 0)
    assert folded[0].count == 3
    assert folded[0].hash_sum == (2 * top + 5) % (1 << 64)


@pytest.mark.spark
def test_a_tree_deeper_than_the_fine_depth_finds_the_change(spark: Any) -> None:
    rows = [(i, f"name-{i}") for i in range(9000)]
    changed = [(i, "renamed" if i == 4321 else name) for i, name in rows]
    sides = [
        Side(spark.createDataFrame(data, "id bigint, name string"), label)
        for data, label in ((rows, "src"), (changed, "dst"))
    ]
    # One row a leaf: 9,000 rows need depth 14, beyond the fine depth of the first pass.
    result = compare_sides("t", sides[0], sides[1], LAYOUT, CompareSettings(rows_per_leaf=1))
    assert result.depth == 14 > FINE_DEPTH
    assert result.status is Status.DIFFERENCES
    assert result.source_rows == result.target_rows == 9000
    assert result.leaves_mismatched == 1
    assert [type(d) for d in result.differences] == [Changed]
    assert result.differences[0].key == ("4321",)
