"""A source database against a lake: the flow the hybrid and the local engine share.

When the target is a lake and the source's connector writes the hash contract in SQL
(``connectors.pushdown``), the source's rows are not shipped anywhere: the source computes
its own leaf digests, and a lake reader hashes the lake with the same MD5 flavour into the
same leaves. Two lake readers implement ``LakeReader``: Spark (``validator.engines.hybrid``:
the hybrid engine) and DuckDB on this machine (``validator.engines.local``: the local engine).
Phases, as in the database engine (``validator.engines.database.engine``), the source side
run by its server:

1. **leaves** — the source's slices (each on its own connection, in its own consistent
   snapshot at its own position, or all in one shared snapshot) send ``(leaf, count, sum
   of MD5 row hashes)``, while the lake reader reads the lake as of those positions, hashes
   its compared columns into the same leaves and sends the lake's digests;
2. both sides' leaf digests, compared on the driver, give the mismatched leaves;
3. **keys** — only for those leaves, each source slice sends ``(key, key bytes, leaf, row
   hash)`` (an index range scan under range leaves) while the lake reader sends the same
   from the lake's hashed rows; keys are classified on the driver;
4. **columns** — the changed keys' source rows are read again, each in its slice's
   snapshot, while the lake reader reads theirs, and compared with the lake's canonical
   payloads.

An incremental run (``validator.incremental``) re-hashes only some leaves: the source's
slices group only their key ranges, the lake reader hashes only the rows of those leaves.
Only leaf digests, the keys and hashes of the rows in mismatched leaves and the changed
rows leave the source database.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from contextlib import ExitStack, nullcontext
from functools import partial
from typing import TYPE_CHECKING, Any

from connectors.pushdown import LeafScheme, RangeLeaves
from merkle.layout import RowLayout
from validator.engines.lake_reader import HashedLake, LakeRead, LakeReader
from validator.engines.progress import PhaseTimer
from validator.engines.sides.database.plan import DatabaseSide, choose_leaves, leaf_slices
from validator.engines.sides.database.slices import (
    Slice,
    digests_of,
    keys_of,
    open_slices,
    positions_of,
    run_parallel,
    side_rows,
)
from validator.engines.sides.keys import (
    ColumnDiffer,
    KeyedDiff,
    KeyFinding,
    classify,
    detailed,
)
from validator.engines.walk import Compared, LeafDigests, Tally, walk
from validator.expectations import check_columns
from validator.incremental.rehash import source_digests
from validator.incremental.run import Increment
from validator.plan import ComparisonPlan
from validator.positions import SourcePositions
from validator.result import ColumnChange, ComparisonResult, Difference, Key
from validator.settings import CompareSettings

if TYPE_CHECKING:
    from validator.engines.sides.spark.side import Side


def _with_lake(
    slices: Sequence[Slice], work: Callable[[Slice], dict[Any, Any]], lake: Callable[[], Any]
) -> tuple[dict[Any, Any], Any]:
    """``work`` on every source slice and ``lake`` on the lake, all at once: the source's
    results merged (its slices are disjoint), and the lake's."""
    tasks: list[Callable[[], Any]] = [partial(work, part) for part in slices]
    results = run_parallel([*tasks, lake])
    merged: dict[Any, Any] = {}
    for found in results[:-1]:
        merged.update(found)
    return merged, results[-1]


def compare_with_lake(
    plan: ComparisonPlan, source: DatabaseSide, reader: LakeReader
) -> tuple[ComparisonResult, Side | None]:
    """Compare the database ``source`` with the plan's lake target (see the module
    docstring); the result, and the lake as a Spark frame when Spark read it."""
    settings, layout = plan.settings, plan.reflected.reconciled.layout
    timer = PhaseTimer(plan.comparison.name, f"source in its database, {reader.where}")
    keeps = plan.incremental
    increment = Increment(plan, choose_leaves((source,), layout, settings.depth, keeps))
    scheme = increment.scheme  # a stored state's leaves, when it is reused
    with ExitStack() as stack:
        exact = plan.reflected.at_log_position
        snapshot = stack.enter_context(source.connector.shared_snapshot(exact))
        timer.snapshot(snapshot)
        intervals = leaf_slices(scheme, plan.parallelism)
        slices = open_slices(stack, source, scheme, intervals, snapshot)
        positions = positions_of(slices, scheme)
        with timer.phase("lake"):  # waits for the lake to reach the source's positions
            target = reader.read(plan, positions)
        check_columns(plan.comparison.expectations, target.columns, target.label)
        with timer.phase("changes") if increment.active else nullcontext():
            rehash = increment.leaves_to_rehash(positions)
        leaves = rehash if isinstance(scheme, RangeLeaves) else None
        sides = _SourceAndLake(slices, target, scheme, leaves, layout, settings, stack)
        position = positions.describe() if positions else None
        labels = (source.label, target.label, position, target.position)
        compared = Compared(plan.comparison.name, *labels, engine=reader.engine)
        result = walk(sides, compared, timer, partial(_tally, increment, positions))
    return result, target.target


def _tally(increment: Increment, positions: SourcePositions | None, digests: LeafDigests) -> Tally:
    """Store the run's state when it keeps one; then every leaf's rows are counted, the
    reused leaves' from the stored digests."""
    stored = increment.merged((digests.source, digests.target))
    coverage = increment.finish(stored, positions)
    rows = digests.rows if stored is None else (stored[0].rows(), stored[1].rows())
    return Tally(rows, coverage)


class _SourceAndLake:
    """The walk's sides (``validator.engines.walk.Sides``): the source's slices and the
    hashed lake, each phase run by every slice and the lake at once. The lake is hashed in
    the leaves phase (DuckDB materialises a replay there; Spark, lazily) and kept for the
    later phases. ``leaves``: only these are re-hashed (an incremental run's range leaves)."""

    def __init__(
        self,
        slices: Sequence[Slice],
        target: LakeRead,
        scheme: LeafScheme,
        leaves: Collection[int] | None,
        layout: RowLayout,
        settings: CompareSettings,
        stack: ExitStack,
    ) -> None:
        self.slices, self.target, self.scheme, self.leaves = slices, target, scheme, leaves
        self.layout, self.settings, self.stack = layout, settings, stack
        self.lake: HashedLake | None = None

    def leaf_digests(self) -> LeafDigests:
        work: Callable[[Slice], dict[Any, Any]] = digests_of
        if self.leaves is not None:
            work = partial(source_digests, leaves=self.leaves)
        self.lake = self.target.hashed(self.scheme, self.leaves, self.stack)
        source, lake = _with_lake(self.slices, work, self.lake.digests)
        rehashed = None if self.leaves is None else len(self.leaves)
        return LeafDigests(source, lake, self.scheme.depth, self.scheme.count, rehashed)

    def differing_keys(self, depth: int, mismatched: tuple[int, ...]) -> KeyedDiff:
        assert self.lake is not None  # hashed in the leaves phase
        work = partial(keys_of, mismatched=mismatched)
        keyed = _with_lake(self.slices, work, partial(self.lake.keys, mismatched))
        return classify(*keyed, whole_row=self.layout.whole_row_key)

    def differences(self, keys: KeyedDiff) -> list[Difference]:
        assert self.lake is not None  # hashed in the leaves phase
        columns = partial(_changed_columns, self.slices, self.lake, self.layout, self.settings)
        return detailed(keys, self.settings.max_reported_rows, columns)


def _changed_columns(
    slices: Sequence[Slice],
    lake: HashedLake,
    layout: RowLayout,
    settings: CompareSettings,
    changed: list[KeyFinding],
) -> dict[Key, tuple[ColumnChange, ...]]:
    """Changed columns of the reported changed keys: the source's rows read in their
    slices' snapshots, the lake's payloads and values from its hashed rows (both at once)."""
    reads: list[Callable[[], Any]] = [
        partial(side_rows, slices, changed, 0, layout),
        partial(lake.rows, changed),
    ]
    source, found = run_parallel(reads)
    differ = ColumnDiffer(layout, settings.sensitive)
    result: dict[Key, tuple[ColumnChange, ...]] = {}
    for finding in changed:
        row, target = source.get(finding.key), found.get(finding.key_bytes)
        if row is not None and target is not None:
            payloads, values = target
            result[finding.key] = tuple(differ.changes_to_payloads(row, payloads, values))
    return result
