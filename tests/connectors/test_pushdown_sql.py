"""The database engine's query assembly, without a server: leaves, ranges and slices."""

from __future__ import annotations

import pytest

from connectors.mariadb.pushdown import MariaDBDigestDialect
from connectors.model import SourceColumn
from connectors.postgres.pushdown import PostgresDigestDialect
from connectors.pushdown import (
    DigestColumn,
    DigestTable,
    HashLeaves,
    NotPushable,
    RangeLeaves,
    check_options,
    digest_sql,
    keyed_sql,
    leaf_ranges,
    range_predicate,
)
from merkle import types as lt
from merkle.options import ComparisonOptions
from validator.engines.sides.database.plan import leaf_slices


def test_range_leaves_cover_every_key_and_open_at_both_ends() -> None:
    leaves = RangeLeaves(low=-10, width=5, depth=2)  # keys -10..9 planned
    assert leaves.count == 4 and leaves.high == 9
    assert leaves.bounds(0, 1) == (None, -5)  # below -10 and NULL keys land in leaf 0
    assert leaves.bounds(1, 3) == (-5, 5)
    assert leaves.bounds(3, 4) == (5, None)  # beyond 9 lands in the last leaf
    assert leaves.bounds(0, 4) == (None, None)


def test_consecutive_leaves_merge_into_one_range() -> None:
    assert leaf_ranges([7, 3, 4, 5, 9, 3]) == [(3, 6), (7, 8), (9, 10)]
    assert leaf_ranges([]) == []


def test_range_predicates_take_nulls_with_the_open_lower_bound() -> None:
    assert range_predicate("`id`", None, 5) == "(`id` < 5 OR `id` IS NULL)"
    assert range_predicate("`id`", 5, None) == "`id` >= 5"
    assert range_predicate("`id`", 5, 9) == "(`id` >= 5 AND `id` < 9)"
    assert range_predicate("`id`", None, None) == ""


@pytest.mark.parametrize(
    ("parallelism", "expected"), [(1, [(0, 8)]), (3, [(0, 2), (2, 5), (5, 8)])]
)
def test_range_leaves_split_into_contiguous_slices(
    parallelism: int, expected: list[tuple[int, int]]
) -> None:
    assert leaf_slices(RangeLeaves(0, 1, 3), parallelism) == expected


def test_hash_leaves_are_read_in_one_slice() -> None:
    assert leaf_slices(HashLeaves(16), 4) == [(0, 1 << 16)]


def test_options_without_an_exact_sql_form_are_refused() -> None:
    for options in (ComparisonOptions(float_digits=6), ComparisonOptions(case_insensitive=True)):
        with pytest.raises(NotPushable):
            check_options(options)
    check_options(ComparisonOptions(trim_char=True, timestamp_precision=3))


def _table(native: str, ltype: lt.LogicalType, key_native: str = "int(11)") -> DigestTable:
    columns = (
        DigestColumn(SourceColumn("id", key_native, lt.IntegerType(), False), lt.IntegerType()),
        DigestColumn(SourceColumn("v", native, ltype), ltype),
    )
    return DigestTable("t", columns, ("id",), ComparisonOptions())


@pytest.mark.parametrize(
    ("native", "ltype"),
    [("longtext", lt.JsonType()), ("double", lt.FloatType(32)), ("varchar(10)", lt.DateType())],
)
def test_a_column_mariadb_cannot_write_exactly_is_refused(
    native: str, ltype: lt.LogicalType
) -> None:
    dialect = MariaDBDigestDialect(lambda name: f"`{name}`")
    with pytest.raises(NotPushable, match="column v"):
        digest_sql(dialect, _table(native, ltype), HashLeaves(4))


def test_postgres_refuses_bpchar_without_a_length_unless_trimmed() -> None:
    dialect = PostgresDigestDialect(lambda name: f'"{name}"')
    padded = lt.StringType(padded=True)
    with pytest.raises(NotPushable, match="bpchar"):
        digest_sql(dialect, _table("bpchar", padded, "integer"), HashLeaves(4))
    trimmed = _table("bpchar", padded, "integer")
    trimmed = DigestTable("t", trimmed.columns, ("id",), ComparisonOptions(trim_char=True))
    assert "rtrim" in digest_sql(dialect, trimmed, HashLeaves(4))


def test_keys_of_mismatched_hash_leaves_are_filtered_by_leaf() -> None:
    dialect = PostgresDigestDialect(lambda name: f'"{name}"')
    table = _table("bigint", lt.IntegerType(), "integer")
    sql = keyed_sql(dialect, table, HashLeaves(8), leaves=[3, 250])
    assert sql.endswith("WHERE leaf IN (3, 250)")
    assert "OFFSET 0" in sql  # each payload computed once, below the framing
