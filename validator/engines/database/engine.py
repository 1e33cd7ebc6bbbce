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
from dataclasses import dataclass
from functools import partial
from typing import Any

from connectors.pushdown import LeafScheme
from merkle.layout import RowLayout
from merkle.tree import LeafDigest
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
    KeyEntry,
    KeyFinding,
    classify,
    detailed,
)
from validator.engines.walk import Compared, LeafDigests, walk
from validator.plan import ComparisonPlan, EngineRun
from validator.result import ColumnChange, ComparisonResult, Difference, Key
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
        slices = [
            open_slices(stack, side, scheme, intervals, shared)
            for side, shared in ((source, snapshot), (target, None))
        ]
        positions = positions_of(slices[0], scheme)
        position = positions.describe() if positions else None
        compared = Compared(name, source.label, target.label, position, None, "database")
        return walk(_InDatabases(slices, scheme, layout, settings), compared, timer)


@dataclass(frozen=True, slots=True)
class _InDatabases:
    """The walk's sides (``validator.engines.walk.Sides``): both sides' slices, each phase
    run by every slice of both sides at once."""

    slices: Sequence[Sequence[Slice]]
    scheme: LeafScheme
    layout: RowLayout
    settings: CompareSettings

    def leaf_digests(self) -> LeafDigests:
        source, target = _leaf_digests(self.slices)
        return LeafDigests(source, target, self.scheme.depth, self.scheme.count)

    def differing_keys(self, depth: int, mismatched: tuple[int, ...]) -> KeyedDiff:
        keyed = _keys(self.slices, mismatched)
        return classify(keyed[0], keyed[1], self.layout.whole_row_key)

    def differences(self, keys: KeyedDiff) -> list[Difference]:
        columns = partial(_changed_columns, self.slices, self.layout, self.settings)
        return detailed(keys, self.settings.max_reported_rows, columns)


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
    settings: CompareSettings,
    changed: list[KeyFinding],
) -> dict[Key, tuple[ColumnChange, ...]]:
    """Changed columns of the reported changed keys, read in each slice's own snapshot."""
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
