"""The queries a slice reads scattered range leaves with: each wide run of leaves alone (a
server tests every row against its query's whole OR list), the narrow ones grouped."""

from __future__ import annotations

import re
from types import SimpleNamespace

from connectors.pushdown import RangeLeaves
from validator.engines.sides.database.slices import (
    RANGES_PER_QUERY,
    WIDE_RUN,
    Slice,
    leaf_range_wheres,
)


def _slice(first: int, stop: int) -> Slice:
    side = SimpleNamespace(
        dialect=SimpleNamespace(quote=lambda name: f"`{name}`"),
        table=SimpleNamespace(key=["id"]),
    )
    return Slice(0, side, None, first, stop, RangeLeaves(0, 10, 12))  # type: ignore[arg-type]


def _ranges(where: str) -> list[tuple[int, int]]:
    found = re.findall(r"`id` >= (\d+) AND `id` < (\d+)", where)
    return [(int(a), int(b)) for a, b in found]


def test_wide_runs_are_queried_alone_and_narrow_ones_in_groups() -> None:
    narrow = [3 * i for i in range(1, 2 * RANGES_PER_QUERY + 2)]  # single leaves, apart
    wide = list(range(1000, 1000 + WIDE_RUN)) + list(range(2000, 2000 + 5 * WIDE_RUN))
    wheres = leaf_range_wheres(_slice(0, 4096), sorted(narrow + wide))
    assert wheres is not None
    queries = [_ranges(w) for w in wheres]
    alone = [q for q in queries if len(q) == 1 and q[0][1] - q[0][0] >= 10 * WIDE_RUN]
    assert sorted(q[0] for q in alone) == [
        (10_000, 10_000 + 10 * WIDE_RUN),
        (20_000, 20_000 + 50 * WIDE_RUN),
    ]
    grouped = [q for q in queries if q not in alone]
    assert all(len(q) <= RANGES_PER_QUERY for q in grouped)
    assert sorted(r for q in grouped for r in q) == [(10 * leaf, 10 * leaf + 10) for leaf in narrow]


def test_leaves_that_are_most_of_the_slice_are_read_in_one_pass() -> None:
    assert leaf_range_wheres(_slice(0, 100), list(range(60))) is None
