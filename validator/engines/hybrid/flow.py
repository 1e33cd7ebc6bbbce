"""A source database against a lake: the flow the hybrid and the local engine share.

When the target is a lake and the source's connector writes the hash contract in SQL
(``connectors.pushdown``), the source's rows are not shipped anywhere: the source computes
its own leaf digests, and a lake reader hashes the lake with the same MD5 flavour into the
same leaves. Two lake readers implement ``LakeReader``: Spark (``lake.py`` here: the hybrid
engine) and DuckDB on this machine (``validator.engines.local``: the local engine).
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
from typing import TYPE_CHECKING, Any, Protocol

from connectors.pushdown import LeafScheme, RangeLeaves
from merkle.layout import RowLayout
from merkle.tree import LeafDigest, diff_leaves
from validator.engines.database.keys import (
    ColumnDiffer,
    KeyEntry,
    KeyFinding,
    classify,
    reported,
    to_differences,
)
from validator.engines.database.plan import DatabaseSide, choose_leaves, leaf_slices
from validator.engines.database.slices import (
    Slice,
    digests_of,
    keys_of,
    open_slices,
    positions_of,
    run_parallel,
    side_rows,
)
from validator.engines.progress import PhaseTimer
from validator.expectations import check_columns
from validator.incremental.rehash import source_digests
from validator.incremental.run import Increment
from validator.plan import ComparisonPlan
from validator.positions import SourcePositions
from validator.result import ColumnChange, ComparisonResult, Difference, Key, Status
from validator.settings import CompareSettings

if TYPE_CHECKING:
    from validator.engines.spark.compare import Side

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
    keeps = settings.incremental.keeps_state
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
        work: Callable[[Slice], dict[Any, Any]] = digests_of
        leaves: Collection[int] | None = None
        if rehash is not None and isinstance(scheme, RangeLeaves):
            leaves = rehash
            work = partial(source_digests, leaves=rehash)
        with timer.phase("leaves"):  # with a replay DuckDB materialises (Spark: lazily)
            lake = target.hashed(scheme, leaves, stack)
            fresh = _with_lake(slices, work, lake.digests)
            mismatched = diff_leaves(*fresh)  # only the fresh digests: see Increment
        hashed = [sum(d.count for d in side.values()) for side in fresh]
        timer.hashed(hashed, len(mismatched), scheme.count if leaves is None else len(leaves))
        with timer.phase("keys"):
            keyed = _with_lake(
                slices, partial(keys_of, mismatched=mismatched), partial(lake.keys, mismatched)
            )
            diff = classify(*keyed, whole_row=layout.whole_row_key)
        timer.classified(diff.total, len(mismatched))
        findings = reported(diff, settings.max_reported_rows)
        with timer.phase("columns"):
            columns = _changed_columns(slices, lake, layout, findings, settings)
    differences: list[Difference] = []
    for finding in findings:
        differences.extend(to_differences(finding, columns))
    stored = increment.merged(fresh)  # every leaf's digests, when the state is kept
    coverage = increment.finish(stored, positions)
    counts = hashed if stored is None else [side.rows() for side in stored]
    result = ComparisonResult(
        name=plan.comparison.name,
        status=Status.DIFFERENCES if diff.total else Status.IN_SYNC,
        source=source.label,
        target=target.label,
        source_rows=counts[0],
        target_rows=counts[1],
        source_position=positions.describe() if positions else None,
        target_position=target.position,
        depth=scheme.depth,
        leaves_compared=scheme.count,
        leaves_mismatched=len(mismatched),
        mismatched_leaves=diff.per_leaf,
        differences=tuple(differences),
        differences_total=diff.total,
        counts_by_kind=diff.by_kind,
        timings=timer.phases,
        engine=reader.engine,
        coverage=coverage,
    )
    return result, target.target


def _changed_columns(
    slices: Sequence[Slice],
    lake: HashedLake,
    layout: RowLayout,
    findings: Sequence[KeyFinding],
    settings: CompareSettings,
) -> dict[Key, tuple[ColumnChange, ...]]:
    """Changed columns of the reported changed keys: the source's rows read in their
    slices' snapshots, the lake's payloads and values from its hashed rows (both at once)."""
    changed = [f for f in findings if f.kind == "changed"]
    if not changed:
        return {}
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
