"""What a lake reader supplies to the flow that compares a source database with a lake
(``validator.engines.lake_flow``, run by the hybrid and the local engine): the lake read
as of the source's positions (``LakeRead``) and hashed into the source's leaves
(``HashedLake``). Spark implements it (``validator.engines.hybrid.lake``) and DuckDB on
this machine (``validator.engines.local.lake``); both import it from here, not from each
other's engine.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any, Protocol

from connectors.pushdown import LeafScheme
from merkle.tree import LeafDigest
from validator.engines.sides.keys import KeyEntry, KeyFinding
from validator.plan import ComparisonPlan
from validator.positions import SourcePositions

if TYPE_CHECKING:
    from validator.engines.sides.spark.side import Side

# The lake is read by no slice of the source: its key entries carry this slice index.
LAKE_SLICE = -1

LakeRow = tuple[list[bytes | None], list[Any]]
"""A lake row's canonical payloads and values, in layout order."""


class HashedLake(Protocol):
    """The lake's compared rows, hashed into the source's leaves."""

    def digests(self) -> dict[int, LeafDigest]:
        """The lake's leaf digests."""

    def keys(self, leaves: Sequence[int]) -> dict[bytes, KeyEntry]:
        """The lake's keys in ``leaves``, by canonical key bytes (as the source's are)."""

    def rows(self, changed: Sequence[KeyFinding]) -> dict[bytes, LakeRow]:
        """The payloads and values of the lake's rows of ``changed`` keys, by key bytes."""


class LakeRead(Protocol):
    """A lake table as of the agreed positions, not hashed yet."""

    label: str  # the target's display label (no secrets)
    position: str | None  # the position(s) it was read at, for the result
    columns: Sequence[str]  # the lake's column names (expectations name them)
    target: Side | None  # the rows as a Spark frame, for expectations (Spark only)

    def hashed(
        self, scheme: LeafScheme, leaves: Collection[int] | None, stack: ExitStack
    ) -> HashedLake:
        """The compared columns hashed into ``scheme``'s leaves, only the rows of
        ``leaves`` (range leaves) when given; anything cached is released by ``stack``."""


class LakeReader(Protocol):
    """Reads a plan's lake target as of the source's positions (Spark, or DuckDB)."""

    engine: str  # the engine's name in the result
    where: str  # where the work runs, for the progress lines

    def read(self, plan: ComparisonPlan, positions: SourcePositions | None) -> LakeRead:
        """Wait for the lake to reach ``positions``, then read it as of them."""
