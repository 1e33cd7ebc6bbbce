"""The one comparison walk every engine runs: leaves, then keys, then columns.

1. **leaves** — both sides' leaf digests; compared on the driver, they give the mismatched
   leaves;
2. **keys** — only in those leaves, the differing keys, counted by kind and by leaf;
3. **columns** — only for the keys a result details (at most ``max_reported_rows``), the
   changed columns.

The walk owns what is alike in every engine: this order, the timing and the progress line
of each phase (one ``PhaseTimer`` per comparison, the engine's own phases before it
included), and the ``ComparisonResult`` built from what the phases found. An engine
supplies only how its two sides compute each phase (``Sides``): in two databases, a
database and a lake (Spark or DuckDB), or both in Spark.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol, TypeVar

from merkle.tree import LeafDigest, diff_leaves
from validator.engines.progress import PhaseTimer
from validator.result import ComparisonResult, Coverage, Difference, Status


@dataclass(frozen=True, slots=True)
class LeafDigests:
    """Both sides' digests of the leaves a run hashed, and the tree they are leaves of.

    Attributes:
        source: The source's digests, by leaf.
        target: The target's digests, by leaf.
        depth: The tree's depth.
        leaves: How many leaves the tree has (the result's ``leaves_compared``).
        rehashed: How many of them this run hashed, when fewer (an incremental run).
    """

    source: Mapping[int, LeafDigest]
    target: Mapping[int, LeafDigest]
    depth: int
    leaves: int
    rehashed: int | None = None

    @property
    def rows(self) -> tuple[int, int]:
        """The rows hashed on each side (source, target)."""
        return _rows(self.source), _rows(self.target)


def _rows(digests: Mapping[int, LeafDigest]) -> int:
    return sum(digest.count for digest in digests.values())


class DifferingKeys(Protocol):
    """The differing keys an engine found in the mismatched leaves, as the walk counts them:
    ``total`` findings, by kind and by leaf (an engine keeps what it needs to detail them)."""

    @property
    def total(self) -> int: ...

    @property
    def by_kind(self) -> Mapping[str, int]: ...

    @property
    def per_leaf(self) -> Mapping[int, int]: ...


KeysT = TypeVar("KeysT", bound=DifferingKeys)


class Sides(Protocol[KeysT]):
    """What an engine supplies to the walk: how its two sides compute each phase."""

    def leaf_digests(self) -> LeafDigests:
        """Both sides' leaf digests (the leaves phase)."""
        ...

    def differing_keys(self, depth: int, mismatched: tuple[int, ...]) -> KeysT:
        """The keys that differ in the ``mismatched`` leaves of the tree of ``depth``."""
        ...

    def differences(self, keys: KeysT) -> list[Difference]:
        """The differences a result details (at most ``max_reported_rows``), with the
        changed columns of the changed keys (the columns phase)."""
        ...


@dataclass(frozen=True, slots=True)
class Compared:
    """What a comparison compared, as its result names it (labels carry no secrets)."""

    name: str
    source: str
    target: str
    source_position: str | None
    target_position: str | None
    engine: str


@dataclass(frozen=True, slots=True)
class Tally:
    """The rows a result counts on each side and what the run covered: the rows hashed,
    unless a run that re-hashed only some leaves counts every leaf's rows."""

    rows: tuple[int, int]
    coverage: Coverage | None = None


def rows_hashed(digests: LeafDigests) -> Tally:
    """The tally of a run that hashed every leaf and keeps no state."""
    return Tally(digests.rows)


def walk(
    sides: Sides[KeysT],
    compared: Compared,
    timer: PhaseTimer,
    tally: Callable[[LeafDigests], Tally] = rows_hashed,
) -> ComparisonResult:
    """Run the phases on ``sides`` (see the module docstring) and build the result;
    ``tally`` runs last, once every phase has succeeded (it may store the run's state)."""
    with timer.phase("leaves"):
        digests = sides.leaf_digests()
        mismatched = diff_leaves(digests.source, digests.target)
    hashed = digests.leaves if digests.rehashed is None else digests.rehashed
    timer.hashed(digests.rows, len(mismatched), hashed)
    with timer.phase("keys"):
        keys = sides.differing_keys(digests.depth, mismatched)
    timer.classified(keys.total, len(mismatched))
    with timer.phase("columns"):
        differences = sides.differences(keys)
    return _result(compared, digests, mismatched, keys, differences, timer, tally(digests))


def _result(
    compared: Compared,
    digests: LeafDigests,
    mismatched: tuple[int, ...],
    keys: DifferingKeys,
    differences: list[Difference],
    timer: PhaseTimer,
    tally: Tally,
) -> ComparisonResult:
    """The one place a comparison's result is built from what its phases found."""
    return ComparisonResult(
        name=compared.name,
        status=Status.DIFFERENCES if keys.total else Status.IN_SYNC,
        source=compared.source,
        target=compared.target,
        source_rows=tally.rows[0],
        target_rows=tally.rows[1],
        source_position=compared.source_position,
        target_position=compared.target_position,
        depth=digests.depth,
        leaves_compared=digests.leaves,
        leaves_mismatched=len(mismatched),
        mismatched_leaves=keys.per_leaf,
        differences=tuple(differences),
        differences_total=keys.total,
        counts_by_kind=keys.by_kind,
        timings=timer.phases,
        engine=compared.engine,
        coverage=tally.coverage,
    )
