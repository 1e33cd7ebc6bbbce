"""The database engine: two databases compare a table by computing their own digests.

Phases, as in the Spark engine (``validator.engines.spark.compare``) but run by the servers:

1. **leaves** — every slice of each side (a range of leaves, on its own connection, in
   parallel) sends ``(leaf, count, sum of row hashes)``: one GROUP BY over its rows;
2. the Merkle trees of both sides give the mismatched leaves;
3. **keys** — only for those leaves, each slice sends ``(key, key bytes, leaf, row hash)``
   (an index range scan under range leaves), and keys are classified on the driver;
4. **columns** — the changed keys' rows are read again and their columns compared.

Every phase of a slice runs on one connection in one snapshot: the source's slices in its
shared snapshot (PostgreSQL) or each in its own consistent snapshot with its own binlog
position (MariaDB), the target's in a transaction of their own (a live target is re-checked
after the comparison, ``validator.recheck``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any, NoReturn, TypeVar

from cdc_core.errors import TerminalError
from connectors.model import Partition
from connectors.pushdown import (
    DigestSession,
    HashLeaves,
    LeafScheme,
    RangeLeaves,
    digest_sql,
    keyed_sql,
    leaf_ranges,
    range_predicate,
    refused_key_sql,
)
from merkle.canonical import RowEncoder
from merkle.layout import RowLayout
from merkle.tree import LeafDigest, build_tree, diff_trees
from validator.engines.database.keys import (
    ColumnDiffer,
    KeyEntry,
    KeyFinding,
    classify,
    collect_keys,
    reported,
    to_differences,
)
from validator.engines.database.plan import DatabaseSide, choose_leaves, leaf_slices
from validator.plan import ComparisonPlan, EngineRun
from validator.positions import PartitionPosition, SourcePositions
from validator.result import ColumnChange, ComparisonResult, Difference, Key, Status
from validator.settings import CompareSettings

log = logging.getLogger(__name__)

_MASK64 = (1 << 64) - 1
# Beyond this many key ranges (or hash leaves) in one query, a slice's keys are read in one
# pass and filtered here: a huge OR list costs the server more than a scan.
MAX_RANGES_PER_QUERY = 1000
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class _Slice:
    """Leaves ``[first, stop)`` of one side, read on one session."""

    index: int
    side: DatabaseSide
    session: DigestSession
    first: int
    stop: int
    scheme: LeafScheme

    def where(self) -> str:
        """The slice's rows (all of them under hash leaves)."""
        if not isinstance(self.scheme, RangeLeaves):
            return ""
        low, high = self.scheme.bounds(self.first, self.stop)
        column = self.side.dialect.quote(self.side.table.key[0])
        return range_predicate(column, low, high)

    def owns(self, leaf: int) -> bool:
        return self.first <= leaf < self.stop


def _parallel(tasks: Sequence[Callable[[], T]]) -> list[T]:
    """Run the tasks on threads of their own (each on its own connection): the work is in
    the servers, so the threads only wait."""
    if len(tasks) <= 1:
        return [task() for task in tasks]
    with ThreadPoolExecutor(max_workers=len(tasks)) as pool:
        return list(pool.map(lambda task: task(), tasks))


class _Timer:
    def __init__(self, name: str) -> None:
        self.name = name
        self.phases: dict[str, float] = {}

    @contextmanager
    def phase(self, phase: str) -> Iterator[None]:
        log.info("comparison %s: %s (in the databases)", self.name, phase)
        started = time.perf_counter()
        yield
        self.phases[phase] = round(time.perf_counter() - started, 3)


def compare_in_databases(
    name: str,
    source: DatabaseSide,
    target: DatabaseSide,
    layout: RowLayout,
    settings: CompareSettings,
    parallelism: int,
) -> ComparisonResult:
    """Compare ``source`` with ``target`` in their own servers (see the module docstring)."""
    timer = _Timer(name)
    scheme = choose_leaves(source, target, layout, settings.depth)
    intervals = leaf_slices(scheme, parallelism)
    with ExitStack() as stack:
        snapshot = stack.enter_context(source.connector.shared_snapshot())
        sides = [
            _open_slices(stack, side, scheme, intervals, shared)
            for side, shared in ((source, snapshot), (target, None))
        ]
        with timer.phase("leaves"):
            digests = _leaf_digests(sides)
            mismatched = diff_trees(
                build_tree(digests[0], scheme.depth), build_tree(digests[1], scheme.depth)
            ).mismatched_leaves
        with timer.phase("keys"):
            keyed = _keys(sides, mismatched)
            diff = classify(keyed[0], keyed[1])
        findings = reported(diff, settings.max_reported_rows)
        with timer.phase("columns"):
            columns = _changed_columns(sides, layout, findings, settings)
        positions = _positions(sides[0], scheme)
    differences: list[Difference] = []
    for finding in findings:
        differences.extend(to_differences(finding, columns))
    counts = [sum(d.count for d in side.values()) for side in digests]
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


def _open_slices(
    stack: ExitStack,
    side: DatabaseSide,
    scheme: LeafScheme,
    intervals: Sequence[tuple[int, int]],
    snapshot: Any,
) -> list[_Slice]:
    return [
        _Slice(
            index,
            side,
            stack.enter_context(side.connector.digest_session(side.schema, snapshot)),
            first,
            stop,
            scheme,
        )
        for index, (first, stop) in enumerate(intervals)
    ]


def _digests_of(part: _Slice) -> dict[int, LeafDigest]:
    sql = digest_sql(part.side.dialect, part.side.table, part.scheme, part.where())
    digests, refused = {}, 0
    for leaf, count, total, *flagged in part.session.iter_rows(sql):
        digests[int(leaf)] = LeafDigest(int(count), int(total) & _MASK64)
        refused += int(flagged[0]) if flagged else 0
    if refused:
        _raise_refused(part)
    return digests


def _raise_refused(part: _Slice) -> NoReturn:
    """A row holds a value without canonical bytes (``Payload.refused_when``): read it with
    the connector's reader, which raises its own error for the value (naming table, column
    and key), so the comparison fails as a Spark read of the row would."""
    side = part.side
    keys = list(part.session.iter_rows(refused_key_sql(side.dialect, side.table, part.where())))
    selector = Partition(-1, key_columns=side.table.key, keys=tuple(tuple(k) for k in keys))
    for _ in part.session.read_rows([c.name for c in side.table.columns], selector):
        pass
    raise TerminalError(
        f"{side.dialect.product} flags a value of table {side.table.table} as having no"
        " canonical bytes, but its reader reads the row; compare the table with engine: spark",
        {"table": side.table.table},
    )


def _per_side(
    sides: Sequence[Sequence[_Slice]], work: Callable[[_Slice], dict[Any, Any]]
) -> list[dict[Any, Any]]:
    """``work`` on every slice of both sides at once, merged per side (slices are disjoint)."""
    tasks = [(index, part) for index, side in enumerate(sides) for part in side]
    results = _parallel([partial(work, part) for _, part in tasks])
    merged: list[dict[Any, Any]] = [{}, {}]
    for (index, _), found in zip(tasks, results, strict=True):
        merged[index].update(found)
    return merged


def _leaf_digests(sides: Sequence[Sequence[_Slice]]) -> list[dict[int, LeafDigest]]:
    """Both sides' leaf digests, every slice of both sides at once."""
    return _per_side(sides, _digests_of)


def _keyed_queries(part: _Slice, leaves: Sequence[int]) -> list[tuple[str, set[int] | None]]:
    """The queries reading the keys of ``leaves`` in one slice, and the leaves to keep from
    their rows (None: all of them)."""
    side = part.side
    if isinstance(part.scheme, RangeLeaves):
        runs = leaf_ranges(leaves)
        if len(runs) <= MAX_RANGES_PER_QUERY:
            column = side.dialect.quote(side.table.key[0])
            ranges = [range_predicate(column, *part.scheme.bounds(a, b)) for a, b in runs]
            where = " OR ".join(f"({r})" for r in ranges if r) or ""
            return [(keyed_sql(side.dialect, side.table, part.scheme, where), None)]
    elif len(leaves) <= MAX_RANGES_PER_QUERY:
        return [(keyed_sql(side.dialect, side.table, part.scheme, leaves=leaves), None)]
    return [(keyed_sql(side.dialect, side.table, part.scheme, part.where()), set(leaves))]


def _keys_of(part: _Slice, leaves: Sequence[int]) -> dict[bytes, KeyEntry]:
    width = len(part.side.table.key)
    found: dict[bytes, KeyEntry] = {}
    for sql, keep in _keyed_queries(part, leaves):
        rows = part.session.iter_rows(sql)
        if keep is not None:
            rows = (row for row in rows if int(row[width + 1]) in keep)
        found.update(collect_keys(rows, width, part.index))
    return found


def _keys(
    sides: Sequence[Sequence[_Slice]], mismatched: Sequence[int]
) -> list[dict[bytes, KeyEntry]]:
    """Both sides' keys in the mismatched leaves, each slice reading its own leaves."""

    def keys_of_slice(part: _Slice) -> dict[bytes, KeyEntry]:
        leaves = [leaf for leaf in mismatched if part.owns(leaf)]
        return _keys_of(part, leaves) if leaves else {}

    return _per_side(sides, keys_of_slice)


def _rows_by_key(
    part: _Slice, layout_names: Sequence[str], keys: Sequence[tuple[Any, ...]]
) -> list[dict[str, Any]]:
    side = part.side
    selector = Partition(-1, key_columns=side.table.key, keys=tuple(keys))
    rows: list[dict[str, Any]] = []
    for batch in part.session.read_rows(layout_names, selector):
        rows.extend(batch.to_pylist())
    return rows


def _changed_columns(
    sides: Sequence[Sequence[_Slice]],
    layout: RowLayout,
    findings: Sequence[KeyFinding],
    settings: CompareSettings,
) -> dict[Key, tuple[ColumnChange, ...]]:
    """Changed columns of the reported changed keys, read in each slice's own snapshot."""
    changed = [f for f in findings if f.kind == "changed"]
    if not changed:
        return {}
    rows = [_side_rows(side, changed, index, layout) for index, side in enumerate(sides)]
    differ = ColumnDiffer(layout, settings.sensitive)
    result: dict[Key, tuple[ColumnChange, ...]] = {}
    for finding in changed:
        source, target = rows[0].get(finding.key), rows[1].get(finding.key)
        if source is not None and target is not None:
            result[finding.key] = tuple(differ.changes(source, target))
    return result


def _side_rows(
    side: Sequence[_Slice], changed: Sequence[KeyFinding], index: int, layout: RowLayout
) -> dict[Key, list[Any]]:
    """Rows of the changed keys on one side (values in layout order), by key text. Keys are
    matched by their canonical bytes: a driver and an Arrow batch type a key alike only up
    to its scale or spelling (``1.10`` and ``1.100000``)."""
    table = side[0].side.table
    names = [c.name for c in table.columns]
    key_positions = [names.index(k) for k in table.key]
    encoder = RowEncoder([c.ltype for c in layout.key_columns], layout.options)
    by_key: dict[Key, list[Any]] = {}
    for part in side:
        entries = [(f.key, (f.source, f.target)[index]) for f in changed]
        mine = [(key, e.values) for key, e in entries if e is not None and e.slice == part.index]
        if not mine:
            continue
        wanted = {encoder.to_bytes(values): key for key, values in mine}
        for row in _rows_by_key(part, names, [values for _, values in mine]):
            values = [row[name] for name in names]
            key = wanted.get(encoder.to_bytes([values[i] for i in key_positions]))
            if key is not None:
                by_key[key] = values
    return by_key


def _positions(source: Sequence[_Slice], scheme: LeafScheme) -> SourcePositions | None:
    """Where each source slice's snapshot stands in the source's log (None: no log)."""
    placed = []
    for part in source:
        if part.session.position is None:
            return None
        low, high = (None, None)
        if isinstance(scheme, RangeLeaves):
            low, high = scheme.bounds(part.first, part.stop)
        placed.append(PartitionPosition(part.index, part.session.position, low, high))
    column = source[0].side.table.key[0] if not isinstance(scheme, HashLeaves) else None
    return SourcePositions(column, tuple(placed))


class DatabaseEngine:
    """The database engine as an ``Engine`` of ``validator.plan``."""

    def __call__(self, plan: ComparisonPlan) -> EngineRun:
        assert plan.databases is not None  # planned for this engine
        layout = plan.reflected.reconciled.layout
        result = compare_in_databases(
            plan.comparison.name, *plan.databases, layout, plan.settings, plan.parallelism
        )
        return EngineRun(result, None)
