"""Re-hashing only some leaves, on both sides: key-range predicates the source's index and
the lake's Parquet statistics can use.

Under ``RangeLeaves`` a run of consecutive leaves is one key range. The source's slices
group only the rows of their ranges (``connectors.pushdown.range_predicate``); the lake's
reader (Spark: ``validator.engines.hybrid.lake.lake_in_leaves``; DuckDB:
``validator.engines.local.lake.leaves_filter_sql``) filters the lake's rows on the same
ranges, on the first key column, below the per-key window of a replayed changelog (a few
covering ranges, ``covering_runs``, into the Parquet scan, the exact leaves as a lookup).
Past ``MAX_RANGES`` runs a SQL predicate costs more than it saves: the slice reads its whole
range and keeps the wanted leaves.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from connectors.pushdown import RangeLeaves, leaf_ranges, range_predicate
from merkle.tree import LeafDigest
from validator.engines.database.slices import MAX_RANGES_PER_QUERY, Slice, digests_of

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


def covering_runs(runs: Sequence[tuple[int, int]], most: int) -> list[tuple[int, int]]:
    """At most ``most`` runs covering ``runs`` (sorted, disjoint): the widest gaps are kept."""
    if len(runs) <= most:
        return list(runs)
    gaps = sorted(range(1, len(runs)), key=lambda i: runs[i][0] - runs[i - 1][1], reverse=True)
    cuts = sorted(gaps[: most - 1])
    starts = [0, *cuts]
    stops = [*cuts, len(runs)]
    return [(runs[a][0], runs[b - 1][1]) for a, b in zip(starts, stops, strict=True)]
