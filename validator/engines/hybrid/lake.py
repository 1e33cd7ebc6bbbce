"""The lake side of the hybrid engine: Spark hashes the lake into the source's leaves
(``SparkLake``, a ``LakeReader`` of ``validator.engines.lake_reader``).

The lake's rows at the agreed position (``validator.engines.sides.spark.lake_target``), only the
compared columns, get the MD5 flavour of the hash contract (``merkle.spark.with_md5_hashes``,
the hash the source database computes) and the leaf the source's ``LeafScheme`` gives their
key, computed as ``connectors.pushdown`` computes it in SQL. The engine persists the hashed
frame once unless it is a plain read of the mirror; keys and changed rows are then read
from it for the mismatched leaves only.
"""

from __future__ import annotations

import operator
from collections.abc import Collection, Sequence
from contextlib import ExitStack
from functools import reduce
from typing import TYPE_CHECKING

from cdc_core.names import backtick_quote
from connectors.pushdown import LeafScheme, RangeLeaves, leaf_ranges
from merkle.layout import RowLayout
from merkle.spark import (
    KEY_HASH,
    LEAF,
    ROW_HASH,
    key_bytes_column,
    leaf_column,
    leaf_digests_of_hashed,
    payload_column,
    with_md5_hashes,
)
from merkle.tree import LeafDigest
from validator.engines.lake_reader import LAKE_SLICE, LakeRow
from validator.engines.sides.keys import KeyEntry, KeyFinding, collect_keys
from validator.engines.sides.spark.side import Side, cache_level
from validator.engines.sides.spark.target import in_layout_names, target_side
from validator.incremental.rehash import MAX_PUSHED_RANGES, covering_runs, key_ranges
from validator.plan import ComparisonPlan
from validator.positions import SourcePositions

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

_KEY_BYTES = "_key_bytes"


def range_leaf(key: str, scheme: RangeLeaves) -> Column:
    """The leaf of an integer key under ``scheme``, as ``connectors.pushdown`` writes it in
    SQL: keys beyond the planned range fall into the first or last leaf, NULL into the
    first. ``div`` is exact integer division (``/`` would go through a double)."""
    from pyspark.sql import functions as F

    column = backtick_quote(key)
    clamped = f"least(greatest({column}, {scheme.low}), {scheme.high}) - {scheme.low}"
    return F.expr(f"coalesce(({clamped}) div {scheme.width}, 0)").cast("bigint")


def _range_column(key: Column, low: int | None, high: int | None) -> Column | None:
    """``key`` in ``[low, high)``; an open low bound also takes NULLs (as range_predicate)."""
    if low is None:
        return None if high is None else (key < high) | key.isNull()
    if high is None:
        return key >= low
    return (key >= low) & (key < high)


def lake_in_leaves(
    frame: DataFrame, key: str, scheme: RangeLeaves, leaves: Collection[int]
) -> DataFrame:
    """The rows of ``frame`` (before hashing) whose first key column ``key`` falls in
    ``leaves``: at most ``MAX_PUSHED_RANGES`` key ranges covering them, which Spark pushes
    into the Parquet scan (row groups outside them are skipped), then the exact leaves as
    one hash-set lookup per row (testing a thousand ranges per row would cost more than
    the hashing it saves). Both filters sit below the per-key window of the lake's state."""
    from pyspark.sql import functions as F

    wanted = sorted(set(leaves))
    if not wanted:
        return frame.where(F.lit(False))
    column = frame[backtick_quote(key)]
    covering = covering_runs(leaf_ranges(wanted), MAX_PUSHED_RANGES)
    bounded = [_range_column(column, *scheme.bounds(a, b)) for a, b in covering]
    exact = range_leaf(key, scheme).isin(wanted)
    if any(c is None for c in bounded):  # one range is every key
        return frame.where(exact)
    ranges = [c for c in bounded if c is not None]
    return frame.where(reduce(operator.or_, ranges) & exact)


def hash_into_leaves(frame: DataFrame, layout: RowLayout, scheme: LeafScheme) -> DataFrame:
    """The layout's columns of ``frame`` (named as the layout names them), their MD5 row
    hash and their leaf under ``scheme``."""
    compared = frame.select(*[backtick_quote(name) for name in layout.names])
    hashed = with_md5_hashes(compared, layout)
    if isinstance(scheme, RangeLeaves):
        leaf = range_leaf(layout.key[0], scheme)
    else:
        leaf = leaf_column(hashed[KEY_HASH], scheme.depth)
    # Under range leaves the key hash is unused, and Spark does not compute it.
    return hashed.withColumn(LEAF, leaf).drop(KEY_HASH)


def lake_digests(hashed: DataFrame) -> dict[int, LeafDigest]:
    """The lake's leaf digests (one Spark job)."""
    return leaf_digests_of_hashed(hashed)


def _in_leaves(hashed: DataFrame, leaves: Sequence[int]) -> DataFrame:
    """The rows of ``leaves``. A filter, not a join: Spark moves it below the hashing (a
    leaf depends on the key alone), so an unpersisted lake hashes only those leaves' rows."""
    from pyspark.sql import functions as F

    return hashed.where(F.col(LEAF).isin(sorted(set(leaves))))


def lake_keys(hashed: DataFrame, layout: RowLayout, leaves: Sequence[int]) -> dict[bytes, KeyEntry]:
    """The lake's keys in ``leaves``, by canonical key bytes (as the source's are)."""
    if not leaves:
        return {}
    rows = _in_leaves(hashed, leaves)
    keyed = rows.select(
        *[backtick_quote(k) for k in layout.key],
        key_bytes_column(rows, layout).alias(_KEY_BYTES),
        LEAF,
        ROW_HASH,
    )
    return collect_keys((tuple(row) for row in keyed.collect()), len(layout.key), LAKE_SLICE)


def lake_rows(
    hashed: DataFrame, layout: RowLayout, changed: Sequence[KeyFinding]
) -> dict[bytes, LakeRow]:
    """The canonical payloads and values (layout order) of the lake's rows of ``changed``
    keys, by canonical key bytes. Payloads are Spark's, so a value Python would convert on
    its way out of Spark (a timestamp) is still compared as the contract encodes it."""
    from pyspark.sql import functions as F

    if not changed:
        return {}
    spark = hashed.sparkSession
    rows = _in_leaves(hashed, [f.leaf for f in changed])
    wanted = spark.createDataFrame(
        [(bytearray(f.key_bytes),) for f in changed], f"{_KEY_BYTES} binary"
    )
    types = {field.name: field.dataType for field in rows.schema.fields}
    keyed = rows.withColumn(_KEY_BYTES, key_bytes_column(rows, layout))
    found = keyed.join(F.broadcast(wanted), _KEY_BYTES).select(
        _KEY_BYTES,
        *[
            payload_column(
                F.col(backtick_quote(c.name)), types[c.name], c.ltype, layout.options
            ).alias(f"_p{index}")
            for index, c in enumerate(layout.columns)
        ],
        *[backtick_quote(c.name) for c in layout.columns],
    )
    width = len(layout.columns)
    return {
        bytes(row[0]): (
            [None if p is None else bytes(p) for p in row[1 : width + 1]],
            list(row[width + 1 :]),
        )
        for row in found.collect()
    }


class SparkLake:
    """Spark reads and hashes the lake (the hybrid engine's ``LakeReader``)."""

    engine = "hybrid"
    where = "lake in Spark"

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    def read(self, plan: ComparisonPlan, positions: SourcePositions | None) -> SparkLakeRead:
        """The lake as Spark reads it as of ``positions`` (``target_side``)."""
        return SparkLakeRead(plan, target_side(self.spark, plan, positions))


class SparkLakeRead:
    """The lake's rows as a Spark frame, hashed on demand."""

    def __init__(self, plan: ComparisonPlan, target: Side) -> None:
        self.plan = plan
        self.target: Side | None = target
        self.label = target.label
        self.position = target.position
        self.columns: Sequence[str] = target.frame.columns

    def hashed(
        self, scheme: LeafScheme, leaves: Collection[int] | None, stack: ExitStack
    ) -> SparkHashedLake:
        """The compared columns hashed into leaves; persisted unless a plain mirror read."""
        assert self.target is not None
        reconciled = self.plan.reflected.reconciled
        layout, frame = reconciled.layout, self.target.frame
        if leaves is not None and isinstance(scheme, RangeLeaves) and self.target.narrowed:
            frame = self.target.narrowed(key_ranges(scheme, leaves))
        compared = in_layout_names(frame, reconciled)
        if leaves is not None and isinstance(scheme, RangeLeaves):
            compared = lake_in_leaves(compared, layout.key[0], scheme, leaves)
        lake = hash_into_leaves(compared, layout, scheme)
        if not self.target.rereadable:  # a replayed changelog: cache it, do not replay again
            lake = lake.persist(cache_level())
            stack.callback(lake.unpersist)
        return SparkHashedLake(lake, layout)


class SparkHashedLake:
    """The lake's hashed rows in Spark (``HashedLake``)."""

    def __init__(self, hashed: DataFrame, layout: RowLayout) -> None:
        self.frame = hashed
        self.layout = layout

    def digests(self) -> dict[int, LeafDigest]:
        """The lake's leaf digests (one Spark job)."""
        return lake_digests(self.frame)

    def keys(self, leaves: Sequence[int]) -> dict[bytes, KeyEntry]:
        """The lake's keys in ``leaves``."""
        return lake_keys(self.frame, self.layout, leaves)

    def rows(self, changed: Sequence[KeyFinding]) -> dict[bytes, LakeRow]:
        """The lake's rows of ``changed`` keys."""
        return lake_rows(self.frame, self.layout, changed)
