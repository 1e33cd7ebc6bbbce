"""One database side of a comparison, read in slices: the phases a server runs.

A slice is a contiguous range of leaves read on one connection in one snapshot (its own
consistent snapshot with its own binlog position on MariaDB, a shared exported snapshot on
PostgreSQL), so its digests, keys and rows all see the same data. The database engine runs
the slices of both sides; the hybrid engine those of its source, beside Spark reading the
lake.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
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
from merkle.tree import LeafDigest
from validator.engines.sides.database.plan import DatabaseSide
from validator.engines.sides.keys import KeyEntry, KeyFinding, collect_keys
from validator.positions import PartitionPosition, SourcePositions
from validator.result import Key

_MASK64 = (1 << 64) - 1
# Beyond this many hash leaves in one query, a slice's keys are read in one pass and
# filtered here: a huge IN list costs the server more than a scan.
MAX_RANGES_PER_QUERY = 1000
# Key ranges per query when a slice reads scattered leaves: a server's planner spends more
# per range as the OR list grows (MariaDB, 10,000 ranges of 19 keys: 0.15 s in queries of
# 25-50 ranges, 0.19 s of 100, 1.05 s of 1,000; bench/RESULTS.md, incremental validation).
RANGES_PER_QUERY = 50
# A run of at least this many leaves is read by a query of its own: a server tests every row
# it reads against the query's whole OR list (MariaDB: a sweep's wide runs among 100 ranges
# cost 18 us a row, alone 12 us).
WIDE_RUN = 16
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Slice:
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
        """Whether the leaf is one of this slice's."""
        return self.first <= leaf < self.stop


def run_parallel(tasks: Sequence[Callable[[], T]]) -> list[T]:
    """Run the tasks on threads of their own (each on its own connection, or a Spark job):
    the work is in the servers, so the threads only wait."""
    if len(tasks) <= 1:
        return [task() for task in tasks]
    with ThreadPoolExecutor(max_workers=len(tasks)) as pool:
        return list(pool.map(lambda task: task(), tasks))


def open_slices(
    stack: ExitStack,
    side: DatabaseSide,
    scheme: LeafScheme,
    intervals: Sequence[tuple[int, int]],
    snapshot: Any,
) -> list[Slice]:
    """A session per leaf interval, closed with ``stack``."""
    return [
        Slice(
            index,
            side,
            stack.enter_context(side.connector.digest_session(side.schema, snapshot)),
            first,
            stop,
            scheme,
        )
        for index, (first, stop) in enumerate(intervals)
    ]


def digests_of(part: Slice, where: str | None = None) -> dict[int, LeafDigest]:
    """The slice's leaf digests: one GROUP BY in the server (over the rows ``where``
    selects, a predicate within the slice; None: all the slice's rows)."""
    where = part.where() if where is None else where
    sql = digest_sql(part.side.dialect, part.side.table, part.scheme, where)
    digests, refused = {}, 0
    for leaf, count, total, *flagged in part.session.iter_rows(sql):
        digests[int(leaf)] = LeafDigest(int(count), int(total) & _MASK64)
        refused += int(flagged[0]) if flagged else 0
    if refused:
        _raise_refused(part)
    return digests


def _raise_refused(part: Slice) -> NoReturn:
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


def leaf_range_wheres(part: Slice, leaves: Sequence[int]) -> list[str] | None:
    """Predicates selecting the rows of ``leaves`` (range leaves within the slice): one for
    each wide run of leaves, and at most ``RANGES_PER_QUERY`` key ranges each for the rest,
    for one index range scan per run; None when the leaves are most of the slice, whose one
    pass then costs less."""
    assert isinstance(part.scheme, RangeLeaves)
    runs = leaf_ranges(leaves)
    if 2 * sum(stop - first for first, stop in runs) > part.stop - part.first:
        return None
    column = part.side.dialect.quote(part.side.table.key[0])
    scheme = part.scheme
    wide = [range_predicate(column, *scheme.bounds(a, b)) for a, b in runs if b - a >= WIDE_RUN]
    narrow = [range_predicate(column, *scheme.bounds(a, b)) for a, b in runs if b - a < WIDE_RUN]
    if "" in wide + narrow:  # one unbounded range: every row
        return [""]
    step = RANGES_PER_QUERY
    grouped = [narrow[i : i + step] for i in range(0, len(narrow), step)]
    return [" OR ".join(f"({r})" for r in group) for group in [*([r] for r in wide), *grouped]]


def _keyed_queries(part: Slice, leaves: Sequence[int]) -> list[tuple[str, set[int] | None]]:
    """The queries reading the keys of ``leaves`` in one slice, and the leaves to keep from
    their rows (None: all of them)."""
    side = part.side
    if isinstance(part.scheme, RangeLeaves):
        wheres = leaf_range_wheres(part, leaves)
        if wheres is not None:
            return [(keyed_sql(side.dialect, side.table, part.scheme, w), None) for w in wheres]
    elif len(leaves) <= MAX_RANGES_PER_QUERY:
        return [(keyed_sql(side.dialect, side.table, part.scheme, leaves=leaves), None)]
    return [(keyed_sql(side.dialect, side.table, part.scheme, part.where()), set(leaves))]


def keys_of(part: Slice, mismatched: Sequence[int]) -> dict[bytes, KeyEntry]:
    """The keys in those of the ``mismatched`` leaves the slice owns, by canonical key
    bytes (an index range scan per run of leaves under range leaves)."""
    leaves = [leaf for leaf in mismatched if part.owns(leaf)]
    if not leaves:
        return {}
    width = len(part.side.table.key)
    found: dict[bytes, KeyEntry] = {}
    for sql, keep in _keyed_queries(part, leaves):
        rows = part.session.iter_rows(sql)
        if keep is not None:
            rows = (row for row in rows if int(row[width + 1]) in keep)
        found.update(collect_keys(rows, width, part.index))
    return found


def _rows_by_key(
    part: Slice, layout_names: Sequence[str], keys: Sequence[tuple[Any, ...]]
) -> list[dict[str, Any]]:
    side = part.side
    selector = Partition(-1, key_columns=side.table.key, keys=tuple(keys))
    rows: list[dict[str, Any]] = []
    for batch in part.session.read_rows(layout_names, selector):
        rows.extend(batch.to_pylist())
    return rows


def side_rows(
    side: Sequence[Slice], changed: Sequence[KeyFinding], index: int, layout: RowLayout
) -> dict[Key, list[Any]]:
    """Rows of the changed keys on one side (values in layout order), by key text, each
    read by the slice that found it, in its snapshot. ``index`` says which side (0 source,
    1 target) of each finding is this one. Keys are matched by their canonical bytes: a
    driver and an Arrow batch type a key alike only up to its scale or spelling (``1.10``
    and ``1.100000``)."""
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


def positions_of(source: Sequence[Slice], scheme: LeafScheme) -> SourcePositions | None:
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
    return SourcePositions(column, tuple(placed), source[0].side.connector.describe_position)
