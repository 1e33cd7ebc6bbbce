"""The rotating sweep's promise: any ``sweep_runs`` consecutive runs sweep every leaf."""

from __future__ import annotations

import math

from hypothesis import assume, given
from hypothesis import strategies as st

from connectors.pushdown import RangeLeaves
from validator.engines.sides.database.plan import leaf_slices
from validator.incremental.sweep import (
    Stripes,
    next_sweep,
    runs_until_swept,
    source_stripes,
    sweep_runs,
)


@given(
    count=st.integers(min_value=1, max_value=5000),
    share=st.floats(min_value=0.001, max_value=1.0),
    start=st.integers(min_value=0, max_value=5000),
    parts=st.integers(min_value=1, max_value=9),
)
def test_any_promised_number_of_consecutive_runs_sweeps_every_leaf(
    count: int, share: float, start: int, parts: int
) -> None:
    cursor = start % count
    runs = sweep_runs(count, share, parts)
    assert runs <= math.ceil(1 / share)  # the promise made to users
    seen: set[int] = set()
    for _ in range(runs):
        sweep = next_sweep(count, share, parts, cursor)
        seen.update(sweep.leaves)
        cursor = sweep.next_cursor
    assert seen == set(range(count))


def test_runs_until_swept_counts_down_to_zero_at_the_end_of_a_cycle() -> None:
    cursor, left = 0, []
    for _ in range(4):
        cursor = next_sweep(16, 0.25, 2, cursor).next_cursor
        left.append(runs_until_swept(16, 0.25, 2, cursor))
    assert left == [3, 2, 1, 0]
    assert sweep_runs(16, 0.25, 2) == 4


@given(
    count=st.integers(min_value=1000, max_value=2_000_000),
    share=st.floats(min_value=0.005, max_value=0.5),
    run=st.integers(min_value=0, max_value=200),
    parallelism=st.sampled_from([1, 2, 3, 4, 8]),
)
def test_each_source_slice_sweeps_one_contiguous_window_of_its_own(
    count: int, share: float, run: int, parallelism: int
) -> None:
    """The source reads in slices of contiguous leaves, one connection each: every slice
    gets its share of a run's sweep as one key range, and the lake's reader meets one key
    range per slice (so it can skip the mirror's other files)."""
    scheme = RangeLeaves(0, 1, math.ceil(math.log2(count)))
    assume(scheme.count * share >= parallelism)  # else fewer stripes: windows under a leaf
    parts = source_stripes(scheme, parallelism)
    slices = leaf_slices(scheme, parallelism)
    assert parts == len(slices)
    stripes = Stripes.of(scheme.count, share, parts)
    sweep = next_sweep(scheme.count, share, parts, (run % stripes.runs) * stripes.step)
    for first, stop in slices:  # one range inside each slice (a narrow sweep: some slices)
        mine = [(a, b) for a, b in sweep.ranges if a < stop and first < b]
        assert len(mine) <= 1
        assert all(first <= a < b <= stop and b - a <= stripes.step for a, b in mine)
    # An even share each, within one leaf of rounding, unless the stripe's end cuts it.
    widths = [b - a for a, b in sweep.ranges]
    assert max(widths) - min(widths) <= 1 or sweep.next_cursor == 0
