"""The rotating sweep: each incremental run re-hashes a contiguous share of the leaves from
scratch, so that every leaf is re-verified within ``ceil(1 / share)`` runs.

The cursor is the first leaf the next run sweeps; a full run sets it to 0. Run i of a cycle
sweeps ``[i * per_run, (i + 1) * per_run)`` and the cycle ends when the cursor passes the
last leaf, so any ``sweep_runs`` consecutive runs sweep every leaf at least once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


def per_run(count: int, share: float) -> int:
    """Leaves one run sweeps (at least one)."""
    return max(1, math.ceil(count * share))


def sweep_runs(count: int, share: float) -> int:
    """Runs a whole cycle takes: every leaf is swept within this many runs."""
    return math.ceil(count / per_run(count, share)) if count else 0


@dataclass(frozen=True, slots=True)
class Sweep:
    """The leaves ``[first, stop)`` one run sweeps, and where the next run starts."""

    first: int
    stop: int
    next_cursor: int

    def __post_init__(self) -> None:
        if not 0 <= self.first <= self.stop or self.next_cursor < 0:
            raise ValueError(f"invalid sweep [{self.first}, {self.stop}) -> {self.next_cursor}")

    @property
    def leaves(self) -> range:
        """The swept leaves."""
        return range(self.first, self.stop)


def next_sweep(count: int, share: float, cursor: int) -> Sweep:
    """This run's sweep from ``cursor`` (a cursor beyond the leaves starts again at 0).

    Windows start at multiples of ``per_run``: a cursor left by another share is moved
    back to one, so the windows of a cycle still tile the leaves."""
    step = per_run(count, share)
    first = cursor - cursor % step if 0 <= cursor < count else 0
    stop = min(count, first + step)
    return Sweep(first, stop, 0 if stop >= count else stop)


def runs_until_swept(count: int, share: float, cursor: int) -> int:
    """Runs until the cycle that reached ``cursor`` has swept every leaf (0: it has)."""
    if not 0 < cursor < count:
        return 0
    return math.ceil((count - cursor) / per_run(count, share))
