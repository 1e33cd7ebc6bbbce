"""The hybrid engine: a source database computes its own leaf digests, Spark the lake's.

When the target is a lake and the source's connector writes the hash contract in SQL
(``connectors.pushdown``), the source's rows are not shipped into Spark. Phases, as in the
database engine (``validator.engines.database.engine``), the source side run by its server:

1. **leaves** — the source's slices (each on its own connection, in its own consistent
   snapshot at its own position, or all in one shared snapshot) send ``(leaf, count, sum
   of MD5 row hashes)``, while Spark reads the lake as of those positions, hashes its
   compared columns with the same MD5 flavour into the same leaves (``lake.py`` here) and
   sends the lake's digests;
2. the Merkle trees of both sides give the mismatched leaves;
3. **keys** — only for those leaves, each source slice sends ``(key, key bytes, leaf, row
   hash)`` (an index range scan under range leaves) while Spark reads the same from the
   lake's hashed rows (persisted, unless they are a plain read of the lake's mirror, cheaper
   to read again than to cache); keys are classified on the driver;
4. **columns** — the changed keys' source rows are read again, each in its slice's
   snapshot, and compared with the lake's canonical payloads.

Only leaf digests, the keys and hashes of the rows in mismatched leaves and the changed
rows leave the source database.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import ExitStack, nullcontext
from functools import partial
from typing import TYPE_CHECKING, Any

from connectors.pushdown import RangeLeaves
from merkle.layout import RowLayout
from merkle.tree import build_tree, diff_trees
from validator.engines.database.engine import PhaseTimer
from validator.engines.database.keys import (
    ColumnDiffer,
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
from validator.engines.hybrid.lake import hash_into_leaves, lake_digests, lake_keys, lake_rows
from validator.engines.spark.compare import Side, cache_level
from validator.engines.spark.engine import in_layout_names, target_side
from validator.expectations import check_columns
from validator.incremental.rehash import lake_in_leaves, source_digests
from validator.incremental.run import Increment
from validator.plan import ComparisonPlan, EngineRun
from validator.result import ColumnChange, ComparisonResult, Difference, Key, Status
from validator.settings import CompareSettings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def _with_lake(
    slices: Sequence[Slice], work: Callable[[Slice], dict[Any, Any]], lake: Callable[[], Any]
) -> tuple[dict[Any, Any], Any]:
    """``work`` on every source slice and ``lake`` in Spark, all at once: the source's
    results merged (its slices are disjoint), and the lake's."""
    tasks: list[Callable[[], Any]] = [partial(work, part) for part in slices]
    results = run_parallel([*tasks, lake])
    merged: dict[Any, Any] = {}
    for found in results[:-1]:
        merged.update(found)
    return merged, results[-1]


def compare_with_lake(
    spark: SparkSession, plan: ComparisonPlan, source: DatabaseSide
) -> tuple[ComparisonResult, Side]:
    """Compare the database ``source`` with the plan's lake target (see the module
    docstring); the result, and the lake as Spark read it."""
    settings, layout = plan.settings, plan.reflected.reconciled.layout
    timer = PhaseTimer(plan.comparison.name, "source in its database, lake in Spark")
    increment = Increment(plan, choose_leaves((source,), layout, settings.depth))
    scheme = increment.scheme  # a stored state's leaves, when it is reused
    with ExitStack() as stack:
        snapshot = stack.enter_context(source.connector.shared_snapshot())
        intervals = leaf_slices(scheme, plan.parallelism)
        slices = open_slices(stack, source, scheme, intervals, snapshot)
        positions = positions_of(slices, scheme)
        with timer.phase("lake"):  # waits for the lake to reach the source's positions
            target = target_side(spark, plan, positions)
        check_columns(plan.comparison.expectations, target.frame.columns, target.label)
        compared = in_layout_names(target.frame, plan.reflected.reconciled)
        with timer.phase("changes") if increment.active else nullcontext():
            rehash = increment.leaves_to_rehash(positions)
        work: Callable[[Slice], dict[Any, Any]] = digests_of
        if rehash is not None and isinstance(scheme, RangeLeaves):
            compared = lake_in_leaves(compared, layout.key[0], scheme, rehash)
            work = partial(source_digests, leaves=rehash)
        lake = hash_into_leaves(compared, layout, scheme)
        if not target.rereadable:  # a replayed changelog: cache it rather than replay it again
            lake = lake.persist(cache_level())
            stack.callback(lake.unpersist)
        with timer.phase("leaves"):
            digests = increment.merged(_with_lake(slices, work, partial(lake_digests, lake)))
            trees = [build_tree(side, scheme.depth) for side in digests]
            mismatched = diff_trees(*trees).mismatched_leaves
        with timer.phase("keys"):
            keyed = _with_lake(
                slices,
                partial(keys_of, mismatched=mismatched),
                partial(lake_keys, lake, layout, mismatched),
            )
            diff = classify(*keyed, whole_row=layout.whole_row_key)
        findings = reported(diff, settings.max_reported_rows)
        with timer.phase("columns"):
            columns = _changed_columns(slices, lake, layout, findings, settings)
    differences: list[Difference] = []
    for finding in findings:
        differences.extend(to_differences(finding, columns))
    coverage = increment.finish(digests, positions)
    counts = [sum(d.count for d in side.values()) for side in digests]
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
        engine="hybrid",
        coverage=coverage,
    )
    return result, target


def _changed_columns(
    slices: Sequence[Slice],
    lake: DataFrame,
    layout: RowLayout,
    findings: Sequence[KeyFinding],
    settings: CompareSettings,
) -> dict[Key, tuple[ColumnChange, ...]]:
    """Changed columns of the reported changed keys: the source's rows read in their
    slices' snapshots, the lake's payloads and values from its hashed rows."""
    changed = [f for f in findings if f.kind == "changed"]
    if not changed:
        return {}
    source = side_rows(slices, changed, 0, layout)
    found = lake_rows(lake, layout, changed)
    differ = ColumnDiffer(layout, settings.sensitive)
    result: dict[Key, tuple[ColumnChange, ...]] = {}
    for finding in changed:
        row, target = source.get(finding.key), found.get(finding.key_bytes)
        if row is not None and target is not None:
            payloads, values = target
            result[finding.key] = tuple(differ.changes_to_payloads(row, payloads, values))
    return result


class HybridEngine:
    """The hybrid engine as an ``Engine`` of ``validator.plan``, on one Spark session."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    def __call__(self, plan: ComparisonPlan) -> EngineRun:
        assert plan.lake_source is not None  # planned for this engine
        return EngineRun(*compare_with_lake(self.spark, plan, plan.lake_source))
