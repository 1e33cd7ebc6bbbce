"""Small inline-SVG trend lines of differences per comparison over past runs.

History entries are run summaries ``{"finished": ISO 8601, "comparisons": {name: total}}``,
oldest first; storing them is the history module's job, this one only draws them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

WIDTH = 160
HEIGHT = 32
PAD = 3


@dataclass(frozen=True, slots=True)
class Trend:
    """A polyline of one comparison's ``differences_total`` over runs, the current run last.

    Attributes:
        points: SVG ``points`` attribute, in a ``WIDTH`` x ``HEIGHT`` box.
        values: (finished, differences) per run, oldest first.
    """

    points: str
    values: tuple[tuple[str, int], ...]

    @property
    def viewbox(self) -> str:
        """The SVG ``viewBox`` the points are drawn in."""
        return f"0 0 {WIDTH} {HEIGHT}"

    @property
    def last(self) -> tuple[float, float]:
        """Coordinates of the newest point (drawn as a dot)."""
        x, y = self.points.rsplit(" ", 1)[-1].split(",")
        return float(x), float(y)


def build_trend(
    name: str, current: tuple[str, int], history: Sequence[dict[str, Any]]
) -> Trend | None:
    """The trend of comparison ``name``, or None when fewer than two runs know it.

    Args:
        name: Comparison name.
        current: (finished, differences_total) of the run being reported.
        history: Past run summaries, oldest first; runs without ``name`` are skipped.
    """
    values = [
        (str(run["finished"]), int(run["comparisons"][name]))
        for run in history
        if name in run.get("comparisons", {})
    ]
    values.append(current)
    if len(values) < 2:
        return None
    return Trend(points=_points([count for _, count in values]), values=tuple(values))


def _points(counts: list[int]) -> str:
    highest = max(counts) or 1
    step = (WIDTH - 2 * PAD) / (len(counts) - 1)
    height = HEIGHT - 2 * PAD
    return " ".join(
        f"{PAD + i * step:.1f},{PAD + height * (1 - count / highest):.1f}"
        for i, count in enumerate(counts)
    )
