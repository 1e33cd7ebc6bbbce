"""Whether a comparison can run in its databases, and how: each side's SQL and the leaves.

The database engine (``connectors.pushdown``) needs both sides to be databases whose
connectors write every compared column's canonical payload in SQL, and key types a result
can name (and a re-check or re-sync can parse back). Anything else raises ``NotPushable``
and the comparison runs in Spark.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from connectors.base import Connector
from connectors.model import TableSchema
from connectors.pushdown import (
    DigestColumn,
    DigestDialect,
    DigestTable,
    HashLeaves,
    LeafScheme,
    NotPushable,
    RangeLeaves,
    digest_sql,
)
from merkle import types as lt
from merkle.layout import RowLayout

# Finer than the Spark engine's 4,096: a mismatched leaf costs an index range scan of its
# rows, and 2**16 leaf digests a side are little to collect.
ROWS_PER_LEAF = 256
MAX_DEPTH = 16
# A comparison that keeps incremental state re-hashes every leaf a change touches, so its
# leaves are smaller: 10M rows with 10,000 changed re-validated in 3.9 s at depth 20 against
# 6.6 s at 16, for a full run 18 % slower (31.4 s against 26.5 s; bench/RESULTS.md).
INCREMENTAL_ROWS_PER_LEAF = 16
INCREMENTAL_MAX_DEPTH = 20
# Keys a result carries as text that re-checks and re-syncs turn back into values.
KEY_TYPES = (lt.IntegerType, lt.DecimalType, lt.StringType, lt.UuidType, lt.DateType)
# Integer keys spanning more than this are bucketed by hash: the range arithmetic stays
# within BIGINT.
MAX_SPAN = 1 << 62


@dataclass(frozen=True, slots=True)
class DatabaseSide:
    """One side of a comparison in the database engine."""

    connector: Connector
    schema: TableSchema
    dialect: DigestDialect
    table: DigestTable
    label: str


def plan_side(
    connector: Connector,
    schema: TableSchema,
    layout: RowLayout,
    names: Mapping[str, str],
    label: str,
) -> DatabaseSide:
    """This side's SQL for ``layout`` (``names``: layout column -> this side's column).

    Raises:
        NotPushable: the product, a column type, the key or an option cannot be pushed down.
    """
    for column in layout.key_columns:
        if not isinstance(column.ltype, KEY_TYPES):
            raise NotPushable(f"key column {column.name} is {column.ltype}")
    dialect = connector.digest_dialect()
    if dialect is None:
        raise NotPushable(f"{label}: this server cannot compute leaf digests")
    columns = tuple(DigestColumn(schema.column(names[c.name]), c.ltype) for c in layout.columns)
    table = DigestTable(schema.table, columns, tuple(names[k] for k in layout.key), layout.options)
    digest_sql(dialect, table, HashLeaves(0))  # writes every payload, or raises NotPushable
    return DatabaseSide(connector, schema, dialect, table, label)


def choose_leaves(
    sides: Sequence[DatabaseSide], layout: RowLayout, depth: int | None, incremental: bool = False
) -> LeafScheme:
    """Key ranges for an integer first key column (spanning the extremes of ``sides``),
    else hash leaves. Keys a side not asked holds beyond them fall into the first or last
    leaf (``RangeLeaves``). Smaller range leaves for a comparison keeping incremental state."""
    if not isinstance(layout.key_columns[0].ltype, lt.IntegerType):
        return HashLeaves(MAX_DEPTH if depth is None else depth)
    ranges = [side.connector.key_range(side.schema.table, side.table.key[0]) for side in sides]
    return range_leaves(ranges, depth, incremental)


def range_leaves(
    ranges: Sequence[tuple[int, int] | None], depth: int | None, incremental: bool = False
) -> LeafScheme:
    """Range leaves spanning the integer key ranges (min, max) of the sides (None: a side is
    empty); hash leaves when the span is too wide for BIGINT arithmetic."""
    known = [r for r in ranges if r is not None]
    if not known:
        return RangeLeaves(0, 1, 0)  # every side empty
    low, high = min(r[0] for r in known), max(r[1] for r in known)
    span = high - low + 1
    if span > MAX_SPAN:
        return HashLeaves(MAX_DEPTH if depth is None else depth)
    if depth is None:
        rows, most = (ROWS_PER_LEAF, MAX_DEPTH)
        if incremental:
            rows, most = (INCREMENTAL_ROWS_PER_LEAF, INCREMENTAL_MAX_DEPTH)
        depth = min(most, max(0, math.ceil(math.log2(span / rows))))
    return RangeLeaves(low, max(1, math.ceil(span / (1 << depth))), depth)


def leaf_slices(scheme: LeafScheme, parallelism: int) -> list[tuple[int, int]]:
    """Contiguous leaf intervals ``[first, stop)`` read in parallel (one for hash leaves)."""
    count = scheme.count
    parts = max(1, min(parallelism, count)) if isinstance(scheme, RangeLeaves) else 1
    edges = [count * i // parts for i in range(parts + 1)]
    return [(edges[i], edges[i + 1]) for i in range(parts)]
