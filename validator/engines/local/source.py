"""The local engine for a source that computes no digests: its rows read here, into DuckDB.

A comparison set to ``engine: local`` whose target is a lake and whose source's connector
writes no hash contract in SQL (a SQLite or DuckDB file, ...) is compared with no Spark:
the connector reads the source's compared columns once, in one consistent snapshot, as
Arrow batches into a temporary DuckDB table on this machine (spilling to disk past memory),
and the SQL that hashes the lake (``merkle.duckdb``, through ``DuckDBHashedLake``) hashes it
too. The phases are the hybrid flow's (``validator.engines.lake_flow``) with both sides
in DuckDB: leaf digests, the keys of the mismatched leaves, the changed keys' columns. Each
side has a DuckDB connection of its own, as both keep tables of the same names.

Every source row crosses to this machine, so this suits files and modest tables; a source
database that computes its own digests keeps its rows in its server instead.
"""

from __future__ import annotations

from contextlib import ExitStack, closing
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from connectors.model import POSITION_COLUMN, Partition
from connectors.pushdown import HashLeaves, LeafScheme
from merkle import types as lt
from merkle.duckdb import quote
from merkle.layout import RowLayout
from validator.engines.local.lake import DuckDBHashedLake, DuckDBLake, connect
from validator.engines.progress import PhaseTimer
from validator.engines.sides.database.plan import MAX_DEPTH, range_leaves
from validator.engines.sides.database.slices import run_parallel
from validator.engines.sides.keys import (
    ColumnDiffer,
    KeyedDiff,
    KeyFinding,
    classify,
    detailed,
)
from validator.engines.walk import Compared, LeafDigests, walk
from validator.plan import ComparisonPlan
from validator.positions import PartitionPosition, SourcePositions
from validator.reflection import Reflected
from validator.result import ColumnChange, ComparisonResult, Difference, Key
from validator.settings import CompareSettings

_SOURCE_ROWS, _BATCHES = "source_rows", "source_batches"


def compare_read_here(plan: ComparisonPlan, spill_dir: Path) -> ComparisonResult:
    """Compare the plan's source, read into DuckDB here, with its lake target (see the
    module docstring); ``spill_dir`` takes what DuckDB spills."""
    reflected, settings = plan.reflected, plan.settings
    layout = reflected.reconciled.layout
    timer = PhaseTimer(plan.comparison.name, "source and lake in DuckDB")
    with ExitStack() as stack:
        source_db, lake_db = (
            stack.enter_context(closing(connect(str(_made(spill_dir / side)))))
            for side in ("source", "lake")
        )
        with timer.phase("source"):  # read once: every later phase sees this snapshot
            types, positions = _load_source(reflected, source_db, timer)
        with timer.phase("lake"):  # waits for the lake to reach the source's positions
            target = DuckDBLake(lake_db).read(plan, positions)
        scheme = _leaves(source_db, layout, settings.depth)
        rows = f"SELECT {', '.join(quote(n) for n in layout.names)} FROM {_SOURCE_ROWS}"
        source = DuckDBHashedLake(source_db, rows, layout, types, scheme, None)
        sides = _BothInDuckDB(source, target.hashed(scheme, None, stack), scheme, layout, settings)
        position = positions.describe() if positions else None
        labels = (reflected.source_label, target.label, position, target.position)
        return walk(sides, Compared(plan.comparison.name, *labels, engine="local"), timer)


@dataclass(frozen=True, slots=True)
class _BothInDuckDB:
    """The walk's sides (``validator.engines.walk.Sides``): the source's rows and the lake,
    each hashed in DuckDB on a connection of its own, each phase run on both at once."""

    source: DuckDBHashedLake
    lake: DuckDBHashedLake
    scheme: LeafScheme
    layout: RowLayout
    settings: CompareSettings

    def leaf_digests(self) -> LeafDigests:
        source, lake = run_parallel([self.source.digests, self.lake.digests])
        return LeafDigests(source, lake, self.scheme.depth, self.scheme.count)

    def differing_keys(self, depth: int, mismatched: tuple[int, ...]) -> KeyedDiff:
        found = run_parallel([partial(side.keys, mismatched) for side in (self.source, self.lake)])
        return classify(found[0], found[1], whole_row=self.layout.whole_row_key)

    def differences(self, keys: KeyedDiff) -> list[Difference]:
        columns = partial(_changed_columns, self.source, self.lake, self.layout, self.settings)
        return detailed(keys, self.settings.max_reported_rows, columns)


def _made(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def _load_source(
    reflected: Reflected, connection: Any, timer: PhaseTimer
) -> tuple[dict[str, Any], SourcePositions | None]:
    """The source's compared columns, read in one snapshot into ``_SOURCE_ROWS``: their
    Arrow types (as the hash SQL wants them) and the position they were read at."""
    import pyarrow as pa

    connector, schema = reflected.source, reflected.source_schema
    names = list(reflected.reconciled.layout.names)
    arrow = connector.arrow_schema(schema, names)
    _insert(connection, arrow.empty_table(), f"CREATE TEMP TABLE {_SOURCE_ROWS} AS")
    with connector.shared_snapshot(reflected.at_log_position) as snapshot:
        timer.snapshot(snapshot)
        # Batch by batch on this thread: a driver's connection may not move between threads
        # (sqlite3 refuses), as DuckDB's scan of a registered stream would move it.
        for batch in connector.read_partition(schema, names, Partition(0), snapshot):
            rows = pa.Table.from_batches([batch], arrow)
            _insert(connection, rows, f"INSERT INTO {_SOURCE_ROWS}")
    found = connection.execute(f"SELECT max({quote(POSITION_COLUMN)}) FROM {_SOURCE_ROWS}")
    (position,) = found.fetchone()
    types = {name: arrow.field(name).type for name in names}
    if position is None:  # no log: the lake is compared as of its high-water mark
        return types, None
    return types, SourcePositions(None, (PartitionPosition(0, int(position)),))


def _insert(connection: Any, rows: Any, into: str) -> None:
    """``into`` (a CREATE or INSERT prefix) the Arrow table ``rows``."""
    connection.register(_BATCHES, rows)
    try:
        connection.execute(f"{into} SELECT * FROM {_BATCHES}")
    finally:
        connection.unregister(_BATCHES)


def _leaves(connection: Any, layout: RowLayout, depth: int | None) -> LeafScheme:
    """Range leaves over the source's integer keys, else hash leaves (as the database
    engine's ``choose_leaves``)."""
    if not isinstance(layout.key_columns[0].ltype, lt.IntegerType):
        return HashLeaves(MAX_DEPTH if depth is None else depth)
    key = quote(layout.key[0])
    low, high = connection.execute(f"SELECT min({key}), max({key}) FROM {_SOURCE_ROWS}").fetchone()
    return range_leaves([None if low is None else (int(low), int(high))], depth)


def _changed_columns(
    source: DuckDBHashedLake,
    lake: DuckDBHashedLake,
    layout: RowLayout,
    settings: CompareSettings,
    changed: list[KeyFinding],
) -> dict[Key, tuple[ColumnChange, ...]]:
    """Changed columns of the reported changed keys, from both sides' hashed rows."""
    found = run_parallel([partial(side.rows, changed) for side in (source, lake)])
    differ = ColumnDiffer(layout, settings.sensitive)
    result: dict[Key, tuple[ColumnChange, ...]] = {}
    for finding in changed:
        row, target = (side.get(finding.key_bytes) for side in found)
        if row is not None and target is not None:
            changes = differ.changes_to_payloads(row[1], target[0], target[1])
            result[finding.key] = tuple(changes)
    return result
