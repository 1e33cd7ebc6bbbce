"""One side of a comparison as Spark reads it: its rows, a label and a position. The Spark
engine compares two such sides; the hybrid engine reads a lake's side through Spark
(``target.py`` here builds a target's side).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark import StorageLevel
    from pyspark.sql import DataFrame

    from cdc_core.lake.mirror_state import KeyRange


@dataclass(frozen=True, slots=True)
class Side:
    """One side of a comparison: its rows, a display label (no secrets) and its position;
    ``rereadable`` when reading the rows again costs no more than a cache would (a plain
    scan of immutable files), so a phase may read them again rather than cache them;
    ``narrowed`` (a lake's side) reads at least the rows of some key ranges of the first
    key column, from only the files that may hold them."""

    frame: DataFrame
    label: str
    position: str | None = None
    rereadable: bool = False
    narrowed: Callable[[Sequence[KeyRange]], DataFrame] | None = None


def cache_level() -> StorageLevel:
    """Where hashed sides are kept between phases: on local disk, not in the heap. Two
    cached 10M-row sides ran a 2 GB local session out of heap even as MEMORY_AND_DISK;
    DISK_ONLY, read back through the page cache, finished, and faster (bench/RESULTS.md)."""
    from pyspark import StorageLevel

    return StorageLevel.DISK_ONLY
