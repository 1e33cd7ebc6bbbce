"""Compare two sides of a comparison in Spark: leaves, then keys, then columns.

1. Each side is hashed once into a narrow frame (key columns, key hash, row hash) that is
   persisted, so later phases never read the source again for the mismatched leaves.
2. Leaf digests of both sides -> Merkle trees -> the mismatched leaves.
3. Only in mismatched leaves: (key, row hash, count) per side, full outer joined by key,
   classify each key: missing in target, extra in target, changed, or duplicate.
4. Only for up to ``max_reported_rows`` changed keys: per-column canonical payloads of both
   sides, to name the changed columns and show their values (masked when sensitive).

Both frames must name their columns as the layout does (targets are renamed before).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from merkle.layout import RowLayout
from merkle.spark import KEY_HASH, LEAF, ROW_HASH, leaf_column, payload_column
from merkle.spark import with_hashes as _with_hashes
from merkle.tree import LeafDigest, build_tree, choose_depth, diff_trees
from validator.result import (
    MASK,
    Changed,
    ColumnChange,
    ComparisonResult,
    Difference,
    DuplicateKey,
    ExtraInTarget,
    Key,
    MissingInTarget,
    Status,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Side:
    """One side of a comparison: its rows, a display label (no secrets) and its position."""

    frame: DataFrame
    label: str
    position: str | None = None


@dataclass(frozen=True, slots=True)
class CompareSettings:
    """Tree size and report size for one comparison."""

    depth: int | None = None
    rows_per_leaf: int = 4096
    max_reported_rows: int = 1000
    sensitive: frozenset[str] = field(default_factory=frozenset)


class _Timer:
    def __init__(self) -> None:
        self.phases: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str, comparison: str) -> Iterator[None]:
        log.info("comparison %s: %s", comparison, name)
        start = time.perf_counter()
        yield
        self.phases[name] = round(time.perf_counter() - start, 3)


def compare_sides(
    name: str, source: Side, target: Side, layout: RowLayout, settings: CompareSettings
) -> ComparisonResult:
    """Compare ``source`` with ``target`` under ``layout``; see the module docstring."""
    from pyspark import StorageLevel

    timer = _Timer()
    with timer.phase("hash", name):
        narrow = [
            _narrow(side.frame, layout).persist(StorageLevel.MEMORY_AND_DISK)
            for side in (source, target)
        ]
        counts = [frame.count() for frame in narrow]
    try:
        depth = settings.depth
        if depth is None:
            depth = choose_depth(max(counts), settings.rows_per_leaf)
        with timer.phase("leaves", name):
            digests = [_leaf_digests(frame, depth) for frame in narrow]
            tree_diff = diff_trees(build_tree(digests[0], depth), build_tree(digests[1], depth))
        with timer.phase("keys", name):
            keyed = _classify_keys(narrow, layout, depth, tree_diff.mismatched_leaves)
        with timer.phase("columns", name):
            differences = _detail(keyed, source, target, layout, settings)
    finally:
        for frame in narrow:
            frame.unpersist()
    return ComparisonResult(
        name=name,
        status=Status.DIFFERENCES if keyed.total else Status.IN_SYNC,
        source=source.label,
        target=target.label,
        source_rows=counts[0],
        target_rows=counts[1],
        source_position=source.position,
        target_position=target.position,
        depth=depth,
        leaves_compared=1 << depth,
        leaves_mismatched=len(tree_diff.mismatched_leaves),
        mismatched_leaves=keyed.per_leaf,
        differences=tuple(differences),
        differences_total=keyed.total,
        counts_by_kind=keyed.by_kind,
        timings=timer.phases,
    )


def _narrow(frame: DataFrame, layout: RowLayout) -> DataFrame:
    hashed = _with_hashes(frame, layout, depth=0)
    return hashed.select(*layout.key, KEY_HASH, ROW_HASH)


def _leaf_digests(narrow: DataFrame, depth: int) -> dict[int, LeafDigest]:
    from merkle.spark import leaf_digests_of_hashed

    return leaf_digests_of_hashed(narrow.withColumn(LEAF, leaf_column(narrow[KEY_HASH], depth)))


@dataclass(frozen=True, slots=True)
class _KeyedDiff:
    """Differing keys found in the mismatched leaves (at most ``limit`` of them collected)."""

    rows: list[Any]
    total: int
    by_kind: dict[str, int]
    per_leaf: dict[int, int]


def _per_key(
    frame: DataFrame, wanted: DataFrame, layout: RowLayout, depth: int, prefix: str
) -> DataFrame:
    """Count, row hash and leaf per key, for the rows of one side in the wanted leaves."""
    from pyspark.sql import functions as F

    in_leaves = frame.withColumn(LEAF, leaf_column(frame[KEY_HASH], depth)).join(wanted, LEAF)
    return in_leaves.groupBy(*layout.key).agg(
        F.count(F.lit(1)).alias(f"{prefix}_count"),
        F.min(ROW_HASH).alias(f"{prefix}_hash"),
        F.first(LEAF).alias(f"{prefix}_leaf"),
    )


def _kind_and_weight() -> tuple[Column, Column]:
    """What a joined key is (NULL when equal) and how many findings it counts for."""
    from pyspark.sql import functions as F

    kind = (
        F.when(F.col("s_count") > 1, F.lit("duplicate_key"))
        .when(F.col("t_count") > 1, F.lit("duplicate_key"))
        .when(F.col("t_count").isNull(), F.lit("missing_in_target"))
        .when(F.col("s_count").isNull(), F.lit("extra_in_target"))
        .when(F.col("s_hash") != F.col("t_hash"), F.lit("changed"))
    )
    # A key duplicated on both sides is two findings (one per side), as the report lists it.
    sides_duplicated = sum(
        F.coalesce((F.col(c) > 1).cast("int"), F.lit(0)) for c in ("s_count", "t_count")
    )
    weight = F.when(F.col("kind") == "duplicate_key", sides_duplicated).otherwise(F.lit(1))
    return kind, weight


def _classify_keys(
    narrow: list[DataFrame], layout: RowLayout, depth: int, leaves: tuple[int, ...]
) -> _KeyedDiff:
    from pyspark.sql import functions as F

    if not leaves:
        return _KeyedDiff([], 0, {}, {})
    spark = narrow[0].sparkSession
    wanted = F.broadcast(spark.createDataFrame([(leaf,) for leaf in leaves], f"{LEAF} bigint"))
    source, target = (
        _per_key(f, wanted, layout, depth, p) for f, p in zip(narrow, "st", strict=True)
    )
    condition = [source[k].eqNullSafe(target[k]) for k in layout.key]
    joined = source.join(target, condition, "full_outer").select(
        *[F.coalesce(source[k], target[k]).alias(k) for k in layout.key],
        "s_count",
        "t_count",
        "s_hash",
        "t_hash",
        F.coalesce("s_leaf", "t_leaf").alias(LEAF),
    )
    kind, weight = _kind_and_weight()
    differing = (
        joined.withColumn("kind", kind)
        .where(F.col("kind").isNotNull())
        .withColumn("weight", weight)
        .cache()
    )
    try:
        by_kind = _weighted_counts(differing, "kind")
        per_leaf = _weighted_counts(differing, LEAF)
        keys = [F.col(k).cast("string").alias(k) for k in layout.key]
        rows = differing.select(*keys, "kind", "s_count", "t_count").collect()
    finally:
        differing.unpersist()
    return _KeyedDiff(rows, sum(by_kind.values()), by_kind, per_leaf)


def _weighted_counts(differing: DataFrame, column: str) -> dict[Any, int]:
    from pyspark.sql import functions as F

    grouped = differing.groupBy(column).agg(F.sum("weight").alias("n")).collect()
    return {row[column]: int(row["n"]) for row in grouped}


def _detail(
    keyed: _KeyedDiff, source: Side, target: Side, layout: RowLayout, settings: CompareSettings
) -> list[Difference]:
    rows = sorted(keyed.rows, key=lambda r: (r["kind"], [str(r[k]) for k in layout.key]))
    rows = rows[: settings.max_reported_rows]
    changed = [r for r in rows if r["kind"] == "changed"]
    columns = _changed_columns(changed, source, target, layout, settings) if changed else {}
    differences: list[Difference] = []
    for row in rows:
        key: Key = tuple(row[k] for k in layout.key)
        differences.extend(_to_differences(row, key, columns))
    return differences


def _to_differences(
    row: Any, key: Key, columns: dict[Key, tuple[ColumnChange, ...]]
) -> list[Difference]:
    kind = row["kind"]
    if kind == "missing_in_target":
        return [MissingInTarget(key)]
    if kind == "extra_in_target":
        return [ExtraInTarget(key)]
    if kind == "changed":
        return [Changed(key, columns.get(key, ()))]
    found: list[Difference] = []
    for side, count in (("source", row["s_count"]), ("target", row["t_count"])):
        if count is not None and count > 1:
            found.append(DuplicateKey(key, side, count))
    return found


def _changed_columns(
    rows: list[Any], source: Side, target: Side, layout: RowLayout, settings: CompareSettings
) -> dict[Key, tuple[ColumnChange, ...]]:
    from pyspark.sql import functions as F

    spark = source.frame.sparkSession
    schema = ", ".join(f"`{k}` string" for k in layout.key)
    keys = F.broadcast(
        spark.createDataFrame([tuple(r[k] for k in layout.key) for r in rows], schema)
    )
    details = [
        _column_values(side.frame, keys, layout, prefix)
        for side, prefix in ((source, "s"), (target, "t"))
    ]
    joined = details[0].join(details[1], list(layout.key))
    result: dict[Key, tuple[ColumnChange, ...]] = {}
    for row in joined.collect():
        key: Key = tuple(row[k] for k in layout.key)
        result[key] = tuple(_column_changes(row, layout, settings.sensitive))
    return result


def _column_values(frame: DataFrame, keys: DataFrame, layout: RowLayout, prefix: str) -> DataFrame:
    from pyspark.sql import functions as F

    types = {f.name: f.dataType for f in frame.schema.fields}
    keyed = frame.select(
        *[F.col(k).cast("string").alias(k) for k in layout.key],
        *[
            payload_column(frame[c.name], types[c.name], c.ltype, layout.options).alias(
                f"{prefix}_p_{i}"
            )
            for i, c in enumerate(layout.columns)
        ],
        *[
            frame[c.name].cast("string").alias(f"{prefix}_v_{i}")
            for i, c in enumerate(layout.columns)
        ],
    )
    return keyed.join(keys, list(layout.key))


def _column_changes(
    row: Any, layout: RowLayout, sensitive: frozenset[str]
) -> Iterator[ColumnChange]:
    for index, column in enumerate(layout.columns):
        if row[f"s_p_{index}"] == row[f"t_p_{index}"]:
            continue
        hidden = column.name in sensitive or column.sensitive
        yield ColumnChange(
            column.name,
            MASK if hidden else row[f"s_v_{index}"],
            MASK if hidden else row[f"t_v_{index}"],
        )
