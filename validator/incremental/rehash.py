"""Re-hashing only some leaves, on both sides: key-range predicates the source's index and
the lake's Parquet statistics can use.

Under ``RangeLeaves`` a run of consecutive leaves is one key range. The source's slices
group only the rows of their ranges (``connectors.pushdown.range_predicate``); the lake's
reader (Spark: ``validator.engines.hybrid.lake.lake_in_leaves``; DuckDB:
``validator.engines.local.lake.leaves_filter_sql``) filters the lake's rows on the same
ranges, on the first key column, below the per-key window of a replayed changelog (a few
covering ranges, ``covering_runs``, into the Parquet scan, the exact leaves as a lookup).
A slice reads scattered leaves by a few queries of many ranges each (an index range scan
per run of leaves), and leaves that are most of its range in one pass.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from cdc_core.lake.mirror_state import KeyRange
from connectors.pushdown import RangeLeaves, leaf_ranges
from merkle.tree import LeafDigest
from validator.engines.sides.database.slices import Slice, digests_of, leaf_range_wheres

MAX_PUSHED_RANGES = 32  # key ranges pushed into the lake's Parquet scan


def source_digests(part: Slice, leaves: Collection[int]) -> dict[int, LeafDigest]:
    """The digests of those of ``leaves`` the slice owns (a GROUP BY over their ranges)."""
    assert isinstance(part.scheme, RangeLeaves)  # incremental runs use range leaves only
    mine = sorted(leaf for leaf in leaves if part.owns(leaf))
    if not mine:
        return {}
    wheres = leaf_range_wheres(part, mine)
    if wheres is None:
        wanted = set(mine)
        return {leaf: d for leaf, d in digests_of(part).items() if leaf in wanted}
    digests: dict[int, LeafDigest] = {}
    for where in wheres:
        digests.update(digests_of(part, where))
    return digests


def covering_runs(runs: Sequence[tuple[int, int]], most: int) -> list[tuple[int, int]]:
    """At most ``most`` runs covering ``runs`` (sorted, disjoint): the widest gaps are kept."""
    if len(runs) <= most:
        return list(runs)
    gaps = sorted(range(1, len(runs)), key=lambda i: runs[i][0] - runs[i - 1][1], reverse=True)
    cuts = sorted(gaps[: most - 1])
    starts = [0, *cuts]
    stops = [*cuts, len(runs)]
    return [(runs[a][0], runs[b - 1][1]) for a, b in zip(starts, stops, strict=True)]


def key_ranges(scheme: RangeLeaves, leaves: Collection[int]) -> list[KeyRange]:
    """The first key column's ranges ``[low, high)`` of ``leaves``, one a run of consecutive
    leaves: the mirror files a lake reader keeps are those meeting them."""
    return [scheme.bounds(a, b) for a, b in leaf_ranges(sorted(leaves))]
