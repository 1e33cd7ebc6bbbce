"""The rotating sweep's promise: any ``sweep_runs`` consecutive runs sweep every leaf."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from validator.incremental.sweep import next_sweep, runs_until_swept, sweep_runs


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
