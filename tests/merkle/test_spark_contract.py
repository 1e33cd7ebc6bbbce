"""The Spark-native implementation agrees with the golden vectors and with pure Python."""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from merkle.golden import expected_outcomes, load_vectors, spark_outcomes
from merkle.layout import RowLayout
from merkle.tree import build_tree, diff_trees, leaf_digests_of_rows
from tests.merkle.row_strategies import layouts_with_rows

pytestmark = pytest.mark.spark


def test_spark_reproduces_every_golden_vector(spark: Any) -> None:
    vectors = load_vectors()
    expected = expected_outcomes(vectors)
    produced = spark_outcomes(spark, vectors)
    mismatches = {
        i: (produced.get(i), want) for i, want in expected.items() if produced.get(i) != want
    }
    assert mismatches == {}


@settings(
    # Raise REPLCHECK_SPARK_EXAMPLES for a longer hunt; each example is one Spark job.
    max_examples=int(os.environ.get("REPLCHECK_SPARK_EXAMPLES", "25")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=layouts_with_rows(), depth=st.integers(min_value=0, max_value=6))
def test_spark_leaf_digests_equal_python_on_random_rows(
    spark: Any, data: tuple[RowLayout, list[tuple[Any, ...]], Any], depth: int
) -> None:
    from merkle.spark import leaf_digests

    layout, rows, schema = data
    expected = leaf_digests_of_rows(rows, layout, depth)
    produced = leaf_digests(spark.createDataFrame(rows, schema), layout, depth)
    assert produced == expected
    assert diff_trees(build_tree(produced, depth), build_tree(expected, depth)).in_sync


def test_spark_ignores_columns_outside_the_layout(spark: Any) -> None:
    from merkle.spark import leaf_digests
    from merkle.types import IntegerType, StringType

    full = RowLayout.of(
        [("id", IntegerType()), ("name", StringType()), ("loaded_at", StringType())], ["id"]
    )
    layout = full.excluding(["loaded_at"])
    schema = "id bigint, name string, loaded_at string"
    first = spark.createDataFrame([(1, "a", "monday"), (2, "b", "monday")], schema)
    second = spark.createDataFrame([(1, "a", "tuesday"), (2, "b", None)], schema)
    expected = leaf_digests_of_rows([(1, "a"), (2, "b")], layout, 1)
    assert leaf_digests(first, layout, 1) == leaf_digests(second, layout, 1) == expected
    assert leaf_digests(first, full, 1) != leaf_digests(second, full, 1)


def test_spark_md5_hashes_equal_python(spark: Any) -> None:
    """The MD5 flavour of keys and rows (what databases compute) as Python computes it,
    over enough rows that both 32-bit halves take values with their top bit set."""
    from merkle.hashing import RowHasher, md5_hash64
    from merkle.spark import KEY_HASH, ROW_HASH, with_md5_hashes
    from merkle.types import IntegerType, StringType

    layout = RowLayout.of([("id", IntegerType()), ("name", StringType())], ["id"])
    rows = [(i, None if i % 7 == 0 else f"n{i}") for i in range(-50, 150)]
    frame = with_md5_hashes(spark.createDataFrame(rows, "id bigint, name string"), layout)
    produced = {r["id"]: (r[KEY_HASH], r[ROW_HASH]) for r in frame.collect()}
    hasher = RowHasher(layout)
    expected = {
        row[0]: (md5_hash64(hasher.key_bytes(row)), md5_hash64(hasher.row_bytes(row)))
        for row in rows
    }
    assert produced == expected
    assert {h < 0 for pair in produced.values() for h in pair} == {True, False}
