"""Geometry of the Merkle-leaf heat map: which cells to colour, and how strongly.

A comparison with depth ``d`` has ``2**d`` leaves (hash buckets of the key). Up to
``MAX_CELLS`` leaves get one cell each; beyond that, consecutive leaves share a cell so the
picture (and the report) stays small. Leaves are hash buckets, so neighbouring cells mean
nothing: the map answers "is the drift in a few leaves or everywhere?".

Cells are drawn as one SVG path per colour level, runs of neighbouring cells merged, so a
fully drifted 64 x 64 map costs tens of kilobytes, not megabytes.

A cell is at most ``MAX_CELL_PX`` pixels square: a small tree (one leaf, four leaves) is a
small grid of small squares, not one square the width of the map; only a grid of at least
``GRID_PX / MAX_CELL_PX`` columns fills the ``GRID_PX`` width.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass

MAX_CELLS = 4096
GRID_PX = 256  # widest map, in CSS pixels
MAX_CELL_PX = 16  # largest cell, in CSS pixels
LEVELS = 5
TOP_LEAVES = 10

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Level:
    """One colour of the legend: cells whose differing-row counts fall in ``low..high``."""

    level: int
    low: int
    high: int
    cells: int
    path: str


@dataclass(frozen=True, slots=True)
class HeatMap:
    """A grid of ``columns x rows`` cells over ``leaves`` leaves.

    Attributes:
        leaves: ``2**depth``.
        leaves_per_cell: Leaves aggregated into one cell (a power of two).
        columns: Cells per row.
        rows: Rows of cells.
        counts: Cell index -> differing rows in its leaves (cells with none are absent).
        levels: Colour levels actually used, lowest first.
        busiest: Up to ``TOP_LEAVES`` (leaf, differing rows), most first.
    """

    leaves: int
    leaves_per_cell: int
    columns: int
    rows: int
    counts: Mapping[int, int]
    levels: tuple[Level, ...]
    busiest: tuple[tuple[int, int], ...]

    def __post_init__(self) -> None:
        if self.columns * self.rows * self.leaves_per_cell != self.leaves:
            raise ValueError("heat map grid does not cover the leaves exactly")

    @property
    def cells(self) -> int:
        """Number of cells in the grid."""
        return self.columns * self.rows

    @property
    def cell_px(self) -> int:
        """Side of one cell in CSS pixels: ``GRID_PX`` shared by the columns, at most
        ``MAX_CELL_PX``."""
        return max(1, min(MAX_CELL_PX, GRID_PX // self.columns))


def build_heatmap(depth: int, mismatched_leaves: Mapping[str, int]) -> HeatMap:
    """The heat map of one comparison.

    Args:
        depth: The comparison's tree depth (``2**depth`` leaves).
        mismatched_leaves: Leaf number as text -> differing rows, as in ``result.json``.
    """
    leaves = 1 << depth
    cells = min(leaves, MAX_CELLS)
    per_cell = leaves // cells
    columns = 1 << math.ceil(math.log2(cells) / 2)
    marked = _leaves_in_range(mismatched_leaves, leaves)
    counts: dict[int, int] = {}
    for leaf, rows in marked:
        counts[leaf // per_cell] = counts.get(leaf // per_cell, 0) + rows
    busiest = sorted(marked, key=lambda item: (-item[1], item[0]))
    return HeatMap(
        leaves=leaves,
        leaves_per_cell=per_cell,
        columns=columns,
        rows=cells // columns,
        counts=counts,
        levels=_levels(counts, columns),
        busiest=tuple(busiest[:TOP_LEAVES]),
    )


def _leaves_in_range(mismatched_leaves: Mapping[str, int], leaves: int) -> list[tuple[int, int]]:
    marked = [(int(leaf), rows) for leaf, rows in mismatched_leaves.items() if rows > 0]
    outside = [leaf for leaf, _ in marked if leaf >= leaves]
    if outside:
        # A leaf beyond 2**depth means the result is inconsistent; draw what fits.
        log.warning(
            "%d mismatched leaves are beyond the %d leaves of the tree", len(outside), leaves
        )
    return [(leaf, rows) for leaf, rows in marked if leaf < leaves]


def level_of(count: int, highest: int) -> int:
    """Colour level 1..LEVELS of a cell, on a log scale up to the busiest cell.

    The busiest cell always gets the darkest colour, so even a single differing row stands
    out on a large grid; the legend gives the actual counts per level.
    """
    if highest <= 1:
        return LEVELS
    return 1 + min(LEVELS - 1, int((LEVELS - 1) * math.log(count) / math.log(highest)))


def _levels(counts: Mapping[int, int], columns: int) -> tuple[Level, ...]:
    highest = max(counts.values(), default=0)
    grouped: dict[int, list[int]] = {}
    for cell in sorted(counts):
        grouped.setdefault(level_of(counts[cell], highest), []).append(cell)
    return tuple(
        Level(
            level=level,
            low=min(counts[c] for c in cells),
            high=max(counts[c] for c in cells),
            cells=len(cells),
            path=_path(cells, columns),
        )
        for level, cells in sorted(grouped.items())
    )


def _path(cells: list[int], columns: int) -> str:
    """SVG path data covering ``cells`` (sorted), one rectangle per horizontal run."""
    parts: list[str] = []
    start = previous = cells[0]
    for cell in [*cells[1:], -1]:
        same_row = cell // columns == previous // columns
        if cell == previous + 1 and same_row:
            previous = cell
            continue
        width = previous - start + 1
        parts.append(f"M{start % columns} {start // columns}h{width}v1h-{width}z")
        start = previous = cell
    return "".join(parts)
