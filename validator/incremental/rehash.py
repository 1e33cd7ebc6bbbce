"""Re-hashing only some leaves, on both sides: key-range predicates the source's index and
the lake's Parquet statistics can use.

Under ``RangeLeaves`` a run of consecutive leaves is one key range. The source's slices
group only the rows of their ranges (``connectors.pushdown.range_predicate``); Spark reads
the lake's rows filtered on the same ranges, a filter on the first key column that Spark
pushes below the per-key window of ``lake_state_at`` (a few covering ranges into the
Parquet scan, the exact leaves as a hash-set lookup). Past ``MAX_RANGES`` runs a SQL
predicate costs more than it saves: the slice reads its whole range and keeps the wanted
leaves.
"""

from __future__ import annotations

import operator
from collections.abc import Collection, Sequence
from functools import reduce
from typing import TYPE_CHECKING

from cdc_core.names import backtick_quote
from connectors.pushdown import RangeLeaves, leaf_ranges, range_predicate
from merkle.tree import LeafDigest
from validator.engines.database.slices import MAX_RANGES_PER_QUERY, Slice, digests_of
from validator.engines.hybrid.lake import range_leaf

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

MAX_RANGES = MAX_RANGES_PER_QUERY  # per source slice (SQL)
MAX_PUSHED_RANGES = 32  # key ranges pushed into the lake's Parquet scan


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
    ``leaves``: at most ``MAX_PUSHED_RANGES`` key ranges covering them, which Spark pushes
    into the Parquet scan (row groups outside them are skipped), then the exact leaves as
    one hash-set lookup per row (testing a thousand ranges per row would cost more than
    the hashing it saves). Both filters sit below the per-key window of the lake's state."""
    from pyspark.sql import functions as F

    wanted = sorted(set(leaves))
    if not wanted:
        return frame.where(F.lit(False))
    column = frame[backtick_quote(key)]
    covering = _covering(leaf_ranges(wanted), MAX_PUSHED_RANGES)
    bounded = [_range_column(column, *scheme.bounds(a, b)) for a, b in covering]
    exact = range_leaf(key, scheme).isin(wanted)
    if any(c is None for c in bounded):  # one range is every key
        return frame.where(exact)
    ranges = [c for c in bounded if c is not None]
    return frame.where(reduce(operator.or_, ranges) & exact)


def _covering(runs: Sequence[tuple[int, int]], most: int) -> list[tuple[int, int]]:
    """At most ``most`` runs covering ``runs`` (sorted, disjoint): the widest gaps are kept."""
    if len(runs) <= most:
        return list(runs)
    gaps = sorted(range(1, len(runs)), key=lambda i: runs[i][0] - runs[i - 1][1], reverse=True)
    cuts = sorted(gaps[: most - 1])
    starts = [0, *cuts]
    stops = [*cuts, len(runs)]
    return [(runs[a][0], runs[b - 1][1]) for a, b in zip(starts, stops, strict=True)]
