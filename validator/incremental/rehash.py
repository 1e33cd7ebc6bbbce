"""Re-hashing only some leaves, on both sides: key-range predicates the source's index and
the lake's Parquet statistics can use.

Under ``RangeLeaves`` a run of consecutive leaves is one key range. The source's slices
group only the rows of their ranges (``connectors.pushdown.range_predicate``); Spark reads
the lake's rows filtered on the same ranges, a filter on the first key column that Spark
pushes below the per-key window of ``lake_state_at`` into the Parquet scan. Past
``MAX_RANGES`` runs (``MAX_LAKE_RANGES`` in Spark) a predicate costs more than it saves:
the side reads its whole range and keeps the wanted leaves.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from cdc_core.names import backtick_quote
from connectors.pushdown import RangeLeaves, leaf_ranges, range_predicate
from merkle.spark import LEAF
from merkle.tree import LeafDigest
from validator.engines.database.slices import MAX_RANGES_PER_QUERY, Slice, digests_of

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

MAX_RANGES = MAX_RANGES_PER_QUERY  # per source slice (SQL)
MAX_LAKE_RANGES = 4 * MAX_RANGES  # in one Spark filter (a balanced tree of ORs)


def source_digests(part: Slice, leaves: Collection[int]) -> dict[int, LeafDigest]:
    """The digests of those of ``leaves`` the slice owns (one GROUP BY over their ranges)."""
    assert isinstance(part.scheme, RangeLeaves)  # incremental runs use range leaves only
    mine = sorted(leaf for leaf in leaves if part.owns(leaf))
    if not mine:
        return {}
    runs = leaf_ranges(mine)
    if len(runs) > MAX_RANGES:
        wanted = set(mine)
        return {leaf: d for leaf, d in digests_of(part).items() if leaf in wanted}
    column = part.side.dialect.quote(part.side.table.key[0])
    ranges = [range_predicate(column, *part.scheme.bounds(a, b)) for a, b in runs]
    where = "" if "" in ranges else " OR ".join(f"({r})" for r in ranges)
    return digests_of(part, where)


def _range_column(key: Column, low: int | None, high: int | None) -> Column | None:
    """``key`` in ``[low, high)``; an open low bound also takes NULLs (as range_predicate)."""
    if low is None:
        return None if high is None else (key < high) | key.isNull()
    if high is None:
        return key >= low
    return (key >= low) & (key < high)


def lake_in_leaves(
    frame: DataFrame, key: str, scheme: RangeLeaves, leaves: Collection[int]
) -> DataFrame:
    """The rows of ``frame`` (before hashing) whose first key column ``key`` falls in
    ``leaves``; beyond ``MAX_LAKE_RANGES`` runs, rows are kept by leaf after hashing instead
    (``keep_leaves``)."""
    from pyspark.sql import functions as F

    runs = leaf_ranges(list(leaves))
    if not runs:
        return frame.where(F.lit(False))
    if len(runs) > MAX_LAKE_RANGES:
        return frame
    column = frame[backtick_quote(key)]
    bounded = [_range_column(column, *scheme.bounds(a, b)) for a, b in runs]
    conditions = [c for c in bounded if c is not None]
    if len(conditions) < len(bounded):  # one run is every key
        return frame
    return frame.where(_any_of(conditions))


def _any_of(conditions: Sequence[Column]) -> Column:
    """The OR of ``conditions`` as a balanced tree: a chain of a thousand ORs is a plan as
    deep, which Spark's optimizer walks recursively."""
    if len(conditions) == 1:
        return conditions[0]
    middle = len(conditions) // 2
    return _any_of(conditions[:middle]) | _any_of(conditions[middle:])


def keep_leaves(hashed: DataFrame, leaves: Collection[int]) -> DataFrame:
    """Rows of a hashed frame in ``leaves`` (exact, whatever ``lake_in_leaves`` kept)."""
    from pyspark.sql import functions as F

    if len(leaf_ranges(list(leaves))) <= MAX_LAKE_RANGES:
        return hashed
    return hashed.where(F.col(LEAF).isin(sorted(leaves)))
