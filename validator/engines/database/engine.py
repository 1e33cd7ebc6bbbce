"""The database engine: two databases compare a table by computing their own digests.

Phases, as in the Spark engine (``validator.engines.spark.compare``) but run by the servers:

1. **leaves** — every slice of each side (a range of leaves, on its own connection, in
   parallel) sends ``(leaf, count, sum of row hashes)``: one GROUP BY over its rows;
2. both sides' leaf digests, compared on the driver, give the mismatched leaves;
3. **keys** — only for those leaves, each slice sends ``(key, key bytes, leaf, row hash)``
   (an index range scan under range leaves), and keys are classified on the driver;
4. **columns** — the changed keys' rows are read again and their columns compared.

Every phase of a slice runs on one connection in one snapshot: the source's slices in its
shared snapshot (PostgreSQL) or each in its own consistent snapshot with its own binlog
position (MariaDB), the target's in a transaction of their own (a live target is re-checked
after the comparison, ``validator.recheck``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import ExitStack
from functools import partial
from typing import Any

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
from validator.plan import ComparisonPlan, EngineRun
from validator.result import ColumnChange, ComparisonResult, Difference, Key, Status
from validator.settings import CompareSettings


def compare_in_databases(
    name: str,
    source: DatabaseSide,
    target: DatabaseSide,
    layout: RowLayout,
    settings: CompareSettings,
    parallelism: int,
) -> ComparisonResult:
    """Compare ``source`` with ``target`` in their own servers (see the module docstring)."""
    timer = PhaseTimer(name, "in the databases")
    scheme = choose_leaves((source, target), layout, settings.depth)
    intervals = leaf_slices(scheme, parallelism)
    with ExitStack() as stack:
        # A database target is read as it is now: no log position to agree on.
        snapshot = stack.enter_context(source.connector.shared_snapshot(at_log_position=False))
        timer.snapshot(snapshot)
        sides = [
            open_slices(stack, side, scheme, intervals, shared)
            for side, shared in ((source, snapshot), (target, None))
        ]
        with timer.phase("leaves"):
            digests = _leaf_digests(sides)
            mismatched = diff_leaves(*digests)
        counts = [sum(d.count for d in side.values()) for side in digests]
        timer.hashed(counts, len(mismatched), scheme.count)
        with timer.phase("keys"):
            keyed = _keys(sides, mismatched)
            diff = classify(keyed[0], keyed[1], layout.whole_row_key)
        timer.classified(diff.total, len(mismatched))
        findings = reported(diff, settings.max_reported_rows)
        with timer.phase("columns"):
            columns = _changed_columns(sides, layout, findings, settings)
        positions = positions_of(sides[0], scheme)
    differences: list[Difference] = []
    for finding in findings:
        differences.extend(to_differences(finding, columns))
    return ComparisonResult(
        name=name,
        status=Status.DIFFERENCES if diff.total else Status.IN_SYNC,
        source=source.label,
        target=target.label,
        source_rows=counts[0],
        target_rows=counts[1],
        source_position=positions.describe() if positions else None,
        depth=scheme.depth,
        leaves_compared=scheme.count,
        leaves_mismatched=len(mismatched),
        mismatched_leaves=diff.per_leaf,
        differences=tuple(differences),
        differences_total=diff.total,
        counts_by_kind=diff.by_kind,
        timings=timer.phases,
        engine="database",
    )


def _per_side(
    sides: Sequence[Sequence[Slice]], work: Callable[[Slice], dict[Any, Any]]
) -> list[dict[Any, Any]]:
    """``work`` on every slice of both sides at once, merged per side (slices are disjoint)."""
    tasks = [(index, part) for index, side in enumerate(sides) for part in side]
    results = run_parallel([partial(work, part) for _, part in tasks])
    merged: list[dict[Any, Any]] = [{}, {}]
    for (index, _), found in zip(tasks, results, strict=True):
        merged[index].update(found)
    return merged


def _leaf_digests(sides: Sequence[Sequence[Slice]]) -> list[dict[int, LeafDigest]]:
    """Both sides' leaf digests, every slice of both sides at once."""
    return _per_side(sides, digests_of)


def _keys(
    sides: Sequence[Sequence[Slice]], mismatched: Sequence[int]
) -> list[dict[bytes, KeyEntry]]:
    """Both sides' keys in the mismatched leaves, each slice reading its own leaves."""
    return _per_side(sides, partial(keys_of, mismatched=mismatched))


def _changed_columns(
    sides: Sequence[Sequence[Slice]],
    layout: RowLayout,
    findings: Sequence[KeyFinding],
    settings: CompareSettings,
) -> dict[Key, tuple[ColumnChange, ...]]:
    """Changed columns of the reported changed keys, read in each slice's own snapshot."""
    changed = [f for f in findings if f.kind == "changed"]
    if not changed:
        return {}
    rows = [side_rows(side, changed, index, layout) for index, side in enumerate(sides)]
    differ = ColumnDiffer(layout, settings.sensitive)
    result: dict[Key, tuple[ColumnChange, ...]] = {}
    for finding in changed:
        source, target = rows[0].get(finding.key), rows[1].get(finding.key)
        if source is not None and target is not None:
            result[finding.key] = tuple(differ.changes(source, target))
    return result


class DatabaseEngine:
    """The database engine as an ``Engine`` of ``validator.plan``."""

    def __call__(self, plan: ComparisonPlan) -> EngineRun:
        assert plan.databases is not None  # planned for this engine
        layout = plan.reflected.reconciled.layout
        result = compare_in_databases(
            plan.comparison.name, *plan.databases, layout, plan.settings, plan.parallelism
        )
        return EngineRun(result, None)
