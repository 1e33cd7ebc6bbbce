"""The rotating sweep: each incremental run re-hashes a share of the leaves from scratch, so
that every leaf is re-verified within ``ceil(1 / share)`` runs.

The leaves are cut into as many stripes as the source reads slices (``leaf_slices``: the
same edges), and a run sweeps the same window of offsets in every stripe: each slice's
connection hashes one contiguous window of its own, and the lake's reader meets one key
range per slice. (One window for all fell to one slice: at 10M rows it hashed 200,000 rows
while the other slice idled, a fifth of an incremental run. Windows striped across the
whole key range shared the work but touched every file of the lake's mirror, so a lake on
an object store was read whole by every run.)

The cursor is the offset within a stripe the next run starts at; a full run sets it to 0.
Run i of a cycle sweeps offsets ``[i * step, (i + 1) * step)`` and the cycle ends when the
cursor passes the widest stripe's end, so any ``sweep_runs`` consecutive runs sweep every
leaf at least once. The stripe count is part of the stored state's fingerprint: a run with
another count makes a full run rather than mix two cycles' cursors.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from connectors.pushdown import LeafScheme
from validator.engines.sides.database.plan import leaf_slices


def source_stripes(scheme: LeafScheme, parallelism: int) -> int:
    """The sweep's stripes: one per slice the source reads ``scheme``'s leaves in."""
    return len(leaf_slices(scheme, parallelism))


@dataclass(frozen=True, slots=True)
class Stripes:
    """``count`` leaves cut into ``parts`` stripes (the widest ``width`` leaves), ``step``
    offsets of each swept a run."""

    count: int
    parts: int
    width: int
    step: int

    @classmethod
    def of(cls, count: int, share: float, parts: int) -> Stripes:
        """``parts`` stripes (fewer when a run's window would be narrower than a leaf): a
        run sweeps about ``share`` of the leaves."""
        parts = max(1, min(parts, math.floor(count * share)))
        width = max(1, math.ceil(count / parts))
        return cls(count, parts, width, max(1, math.ceil(width * share)))

    @property
    def runs(self) -> int:
        """Runs a whole cycle takes."""
        return math.ceil(self.width / self.step) if self.count else 0

    def window(self, first: int, stop: int) -> list[tuple[int, int]]:
        """The leaves ``[a, b)`` at offsets ``[first, stop)`` of every stripe."""
        edges = [self.count * i // self.parts for i in range(self.parts + 1)]
        return [
            (low + first, min(low + stop, high))
            for low, high in itertools.pairwise(edges)
            if low + first < high
        ]


def sweep_runs(count: int, share: float, parts: int) -> int:
    """Runs a whole cycle takes: every leaf is swept within this many runs."""
    return Stripes.of(count, share, parts).runs


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


def next_sweep(count: int, share: float, parts: int, cursor: int) -> Sweep:
    """This run's sweep from ``cursor`` (a cursor beyond a stripe starts again at 0).

    Windows start at multiples of the step: a cursor left by another share is moved back
    to one, so the windows of a cycle still tile the stripes."""
    stripes = Stripes.of(count, share, parts)
    step, width = stripes.step, stripes.width
    first = cursor - cursor % step if 0 <= cursor < width else 0
    stop = min(width, first + step)
    return Sweep(tuple(stripes.window(first, stop)), 0 if stop >= width else stop)


def runs_until_swept(count: int, share: float, parts: int, cursor: int) -> int:
    """Runs until the cycle that reached ``cursor`` has swept every leaf (0: it has)."""
    stripes = Stripes.of(count, share, parts)
    if not 0 < cursor < stripes.width:
        return 0
    return math.ceil((stripes.width - cursor) / stripes.step)
