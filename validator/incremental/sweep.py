"""The rotating sweep: each incremental run re-hashes a share of the leaves from scratch, so
that every leaf is re-verified within ``ceil(1 / share)`` runs.

The leaves are cut into ``stripes`` equal stripes, and a run sweeps the same window of
offsets in every stripe: the swept leaves are spread over the whole key range, so the
source's slices (each a contiguous range of leaves on its own connection) share the work
evenly. (One contiguous window fell to one slice: at 10M rows it hashed 200,000 rows while
the other slice idled, a fifth of an incremental run.)

The cursor is the offset within a stripe the next run starts at; a full run sets it to 0.
Run i of a cycle sweeps offsets ``[i * step, (i + 1) * step)`` and the cycle ends when the
cursor passes the stripe's end, so any ``sweep_runs`` consecutive runs sweep every leaf at
least once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MAX_STRIPES = 64  # enough for the slices of any parallelism to share a sweep evenly


@dataclass(frozen=True, slots=True)
class Stripes:
    """``count`` leaves cut into stripes of ``width`` leaves, ``step`` of each swept a run."""

    count: int
    width: int
    step: int

    @classmethod
    def of(cls, count: int, share: float) -> Stripes:
        """As many stripes as keep a run's window at least one leaf wide (at most
        ``MAX_STRIPES``): a run sweeps about ``share`` of the leaves."""
        stripes = max(1, min(MAX_STRIPES, math.floor(count * share)))
        width = max(1, math.ceil(count / stripes))
        return cls(count, width, max(1, math.ceil(width * share)))

    @property
    def runs(self) -> int:
        """Runs a whole cycle takes."""
        return math.ceil(self.width / self.step) if self.count else 0

    def window(self, first: int, stop: int) -> list[tuple[int, int]]:
        """The leaves ``[a, b)`` at offsets ``[first, stop)`` of every stripe."""
        starts = range(0, self.count, self.width)
        return [(s + first, min(s + stop, self.count)) for s in starts if s + first < self.count]


def sweep_runs(count: int, share: float) -> int:
    """Runs a whole cycle takes: every leaf is swept within this many runs."""
    return Stripes.of(count, share).runs


@dataclass(frozen=True, slots=True)
class Sweep:
    """The leaves one run sweeps (``ranges``, each ``[a, b)``), and where the next run
    starts."""

    ranges: tuple[tuple[int, int], ...]
    next_cursor: int

    def __post_init__(self) -> None:
        if self.next_cursor < 0 or any(not 0 <= a <= b for a, b in self.ranges):
            raise ValueError(f"invalid sweep {self.ranges[:3]}... -> {self.next_cursor}")

    @property
    def leaves(self) -> list[int]:
        """The swept leaves."""
        return [leaf for a, b in self.ranges for leaf in range(a, b)]


def next_sweep(count: int, share: float, cursor: int) -> Sweep:
    """This run's sweep from ``cursor`` (a cursor beyond a stripe starts again at 0).

    Windows start at multiples of the step: a cursor left by another share is moved back
    to one, so the windows of a cycle still tile the stripes."""
    stripes = Stripes.of(count, share)
    step, width = stripes.step, stripes.width
    first = cursor - cursor % step if 0 <= cursor < width else 0
    stop = min(width, first + step)
    return Sweep(tuple(stripes.window(first, stop)), 0 if stop >= width else stop)


def runs_until_swept(count: int, share: float, cursor: int) -> int:
    """Runs until the cycle that reached ``cursor`` has swept every leaf (0: it has)."""
    stripes = Stripes.of(count, share)
    if not 0 < cursor < stripes.width:
        return 0
    return math.ceil((stripes.width - cursor) / stripes.step)
