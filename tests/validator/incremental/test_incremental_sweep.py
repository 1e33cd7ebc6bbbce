"""The rotating sweep's promise: any ``sweep_runs`` consecutive runs sweep every leaf."""

from __future__ import annotations

import itertools
import math

from hypothesis import given
from hypothesis import strategies as st

from validator.incremental.sweep import Stripes, next_sweep, runs_until_swept, sweep_runs


@given(
    count=st.integers(min_value=1, max_value=5000),
    share=st.floats(min_value=0.001, max_value=1.0),
    start=st.integers(min_value=0, max_value=5000),
)
def test_any_promised_number_of_consecutive_runs_sweeps_every_leaf(
    count: int, share: float, start: int
) -> None:
    cursor = start % count
    runs = sweep_runs(count, share)
    assert runs <= math.ceil(1 / share)  # the promise made to users
    seen: set[int] = set()
    for _ in range(runs):
        sweep = next_sweep(count, share, cursor)
        seen.update(sweep.leaves)
        cursor = sweep.next_cursor
    assert seen == set(range(count))


def test_runs_until_swept_counts_down_to_zero_at_the_end_of_a_cycle() -> None:
    cursor, left = 0, []
    for _ in range(4):
        cursor = next_sweep(16, 0.25, cursor).next_cursor
        left.append(runs_until_swept(16, 0.25, cursor))
    assert left == [3, 2, 1, 0]
    assert sweep_runs(16, 0.25) == 4


@given(
    count=st.integers(min_value=1000, max_value=2_000_000),
    share=st.floats(min_value=0.005, max_value=0.5),
    run=st.integers(min_value=0, max_value=200),
    parts=st.sampled_from([2, 3, 4, 8]),
)
def test_a_runs_sweep_is_shared_evenly_by_contiguous_slices(
    count: int, share: float, run: int, parts: int
) -> None:
    """The source reads in slices of contiguous leaves, one connection each: every slice
    must get its share of a run's sweep, not one slice all of it."""
    stripes = Stripes.of(count, share)
    sweep = next_sweep(count, share, (run % stripes.runs) * stripes.step)
    swept = len(sweep.leaves)
    bounds = [count * i // parts for i in range(parts + 1)]
    for low, high in itertools.pairwise(bounds):
        mine = sum(max(0, min(b, high) - max(a, low)) for a, b in sweep.ranges)
        # Within one stripe's window (plus one leaf of rounding) of an even share.
        assert abs(mine - swept * (high - low) / count) <= stripes.step + 1
