"""Compare two sides of a comparison in Spark: leaves, then keys, then columns.

Few passes over the data, because on a small machine every Spark job has a fixed cost of
seconds and every re-read of a database costs a full scan:

1. Each side is hashed once into a persisted frame (its columns, key hash, row hash); a side
   may come hashed and persisted already (``hashed_rows``: the job reads the source once,
   inside its snapshot). One job computes the leaf digests of both sides at a fine depth
   (reading the target as it fills its cache); the digests at the chosen depth are folded
   from them on the driver, so no count() job is needed to choose the depth.
2. Leaf digests of both sides, compared on the driver -> the mismatched leaves.
3. Only in mismatched leaves: (key, row hash, count) per side, full outer joined by key,
   classify each key: missing in target, extra in target, changed, or duplicate (one job).
4. Only for up to ``max_reported_rows`` changed keys: per-column canonical payloads of both
   sides, from the cached frames, to name the changed columns and show their values (masked
   when sensitive).

Both frames must name their columns as the layout does (targets are renamed before).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cdc_core.names import backtick_quote
from merkle.layout import RowLayout
from merkle.spark import KEY_HASH, LEAF, ROW_HASH, leaf_column, payload_column
from merkle.spark import with_hashes as _with_hashes
from merkle.tree import LeafDigest, choose_depth
from validator.engines.progress import PhaseTimer
from validator.engines.sides.spark.side import Side, cache_level
from validator.engines.walk import Compared, LeafDigests, walk
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
    key_order,
)
from validator.settings import CompareSettings

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

# Leaf digests are computed this deep and folded up to the chosen depth: 2**12 leaves a
# side is little to collect, and deep enough for 16M rows at the default 4,096 a leaf.
FINE_DEPTH = 12
_MASK64 = (1 << 64) - 1


def hashed_rows(frame: DataFrame, layout: RowLayout) -> DataFrame:
    """``frame`` (every column kept) plus its key hash and row hash under ``layout``."""
    return _with_hashes(frame, layout, depth=0).drop(LEAF)


def compare_sides(
    name: str,
    source: Side,
    target: Side,
    layout: RowLayout,
    settings: CompareSettings,
    timer: PhaseTimer | None = None,
) -> ComparisonResult:
    """Compare ``source`` with ``target`` under ``layout``; see the module docstring.

    A side whose frame already has the hash columns (``hashed_rows``) is used as it is: its
    caller persists and unpersists it. Other sides are hashed and persisted here. ``timer``
    is the comparison's, when its caller timed phases of its own before.
    """
    timer = timer or PhaseTimer(name, "in Spark")
    labels = (source.label, target.label, source.position, target.position)
    compared = Compared(name, *labels, engine="spark")
    hashed, owned = _hashed_frames((source, target), layout)
    try:
        return walk(_InSpark(hashed, layout, settings), compared, timer)
    finally:
        for frame in owned:
            frame.unpersist()


@dataclass(frozen=True, slots=True)
class _InSpark:
    """The walk's sides (``validator.engines.walk.Sides``): both hashed frames, each phase
    one Spark job over both."""

    hashed: list[DataFrame]
    layout: RowLayout
    settings: CompareSettings

    def leaf_digests(self) -> LeafDigests:
        depth, (source, target) = _leaf_digests(self.hashed, self.settings)
        return LeafDigests(source, target, depth, 1 << depth)

    def differing_keys(self, depth: int, mismatched: tuple[int, ...]) -> _KeyedDiff:
        return _classify_keys(self.hashed, self.layout, depth, mismatched)

    def differences(self, keys: _KeyedDiff) -> list[Difference]:
        return _detail(keys, self.hashed, self.layout, self.settings)


def _hashed_frames(
    sides: tuple[Side, Side], layout: RowLayout
) -> tuple[list[DataFrame], list[DataFrame]]:
    """Both sides hashed (source first), and those of them persisted here."""

    hashed: list[DataFrame] = []
    owned: list[DataFrame] = []
    for side in sides:
        if KEY_HASH in side.frame.columns and ROW_HASH in side.frame.columns:
            hashed.append(side.frame)
            continue
        frame = hashed_rows(side.frame, layout).persist(cache_level())
        hashed.append(frame)
        owned.append(frame)
    return hashed, owned


def _leaf_digests(
    hashed: list[DataFrame], settings: CompareSettings
) -> tuple[int, list[dict[int, LeafDigest]]]:
    """The tree depth and both sides' leaf digests at that depth.

    Without a configured depth the digests are computed at ``FINE_DEPTH`` and folded up to
    the depth the row counts call for; only a table too large for ``FINE_DEPTH`` costs a
    second pass (over the cached frames).
    """
    if settings.depth is not None:
        return settings.depth, _digests_of_both(hashed, settings.depth)
    fine = _digests_of_both(hashed, FINE_DEPTH)
    rows = max(sum(d.count for d in side.values()) for side in fine)
    depth = choose_depth(rows, settings.rows_per_leaf)
    if depth > FINE_DEPTH:
        return depth, _digests_of_both(hashed, depth)
    return depth, [fold_digests(side, FINE_DEPTH, depth) for side in fine]


def _digests_of_both(hashed: list[DataFrame], depth: int) -> list[dict[int, LeafDigest]]:
    """Leaf digests of both sides in one Spark job: the side is the bit above the leaf."""
    from pyspark.sql import functions as F

    from merkle.spark import leaf_digests_of_hashed

    sides = [
        frame.select(
            (leaf_column(frame[KEY_HASH], depth) + F.lit(index << depth)).alias(LEAF), ROW_HASH
        )
        for index, frame in enumerate(hashed)
    ]
    both = leaf_digests_of_hashed(sides[0].unionByName(sides[1]))
    mask = (1 << depth) - 1
    split: list[dict[int, LeafDigest]] = [{}, {}]
    for leaf, digest in both.items():
        split[leaf >> depth][leaf & mask] = digest
    return split


def fold_digests(digests: Mapping[int, LeafDigest], fine: int, depth: int) -> dict[int, LeafDigest]:
    """Leaf digests at ``depth`` from those at the deeper ``fine``: a leaf is the top bits of
    a key hash, so leaf ``i`` at ``depth`` holds the fine leaves ``j`` with
    ``j >> (fine - depth) == i``, and digests add up (counts, and sums mod 2**64)."""
    shift = fine - depth
    counts: dict[int, int] = {}
    sums: dict[int, int] = {}
    for leaf, digest in digests.items():
        parent = leaf >> shift
        counts[parent] = counts.get(parent, 0) + digest.count
        sums[parent] = (sums.get(parent, 0) + digest.hash_sum) & _MASK64
    return {leaf: LeafDigest(counts[leaf], sums[leaf]) for leaf in counts}


@dataclass(frozen=True, slots=True)
class _KeyedDiff:
    """Differing keys found in the mismatched leaves (all of them collected)."""

    rows: list[Any]
    total: int
    by_kind: dict[str, int]
    per_leaf: dict[int, int]


def _per_key(
    frame: DataFrame, wanted: DataFrame, layout: RowLayout, depth: int, prefix: str
) -> DataFrame:
    """Count, row hash and leaf per key, for the rows of one side in the wanted leaves."""
    from pyspark.sql import functions as F

    leaf = leaf_column(frame[KEY_HASH], depth)
    key = [backtick_quote(k) for k in layout.key]
    in_leaves = frame.select(*key, ROW_HASH, leaf.alias(LEAF)).join(wanted, LEAF)
    return in_leaves.groupBy(*key).agg(
        F.count(F.lit(1)).alias(f"{prefix}_count"),
        F.min(ROW_HASH).alias(f"{prefix}_hash"),
        F.first(LEAF).alias(f"{prefix}_leaf"),
    )


def _kind(whole_row: bool) -> Column:
    """What a joined key is (NULL when equal). Under a whole-row key equal rows are copies
    of one key, and only how many copies each side holds can differ."""
    from pyspark.sql import functions as F

    if whole_row:
        held, copies = (F.coalesce(F.col(c), F.lit(0)) for c in ("s_count", "t_count"))
        return F.when(held > copies, F.lit("missing_in_target")).when(
            copies > held, F.lit("extra_in_target")
        )
    return (
        F.when(F.col("s_count") > 1, F.lit("duplicate_key"))
        .when(F.col("t_count") > 1, F.lit("duplicate_key"))
        .when(F.col("t_count").isNull(), F.lit("missing_in_target"))
        .when(F.col("s_count").isNull(), F.lit("extra_in_target"))
        .when(F.col("s_hash") != F.col("t_hash"), F.lit("changed"))
    )


def _weight(row: Any) -> int:
    """How many findings a differing key counts for: a key duplicated on both sides is two
    findings (one per side), as the report lists it; a whole row, one per copy."""
    if row["kind"] != "duplicate_key":
        return max(abs((row["s_count"] or 0) - (row["t_count"] or 0)), 1)
    return sum(1 for count in (row["s_count"], row["t_count"]) if count is not None and count > 1)


def _classify_keys(
    hashed: list[DataFrame], layout: RowLayout, depth: int, leaves: tuple[int, ...]
) -> _KeyedDiff:
    from pyspark.sql import functions as F

    if not leaves:
        return _KeyedDiff([], 0, {}, {})
    spark = hashed[0].sparkSession
    wanted = F.broadcast(spark.createDataFrame([(leaf,) for leaf in leaves], f"{LEAF} bigint"))
    source, target = (
        _per_key(f, wanted, layout, depth, p) for f, p in zip(hashed, "st", strict=True)
    )
    key = [backtick_quote(k) for k in layout.key]
    orders = _key_orders(layout)  # the typed values, to sort the keys by (``_detail``)
    condition = [source[k].eqNullSafe(target[k]) for k in key]
    joined = source.join(target, condition, "full_outer").select(
        *[
            F.coalesce(source[q], target[q]).cast("string").alias(k)
            for q, k in zip(key, layout.key, strict=True)
        ],
        *[F.coalesce(source[q], target[q]).alias(o) for q, o in zip(key, orders, strict=True)],
        "s_count",
        "t_count",
        "s_hash",
        "t_hash",
        F.coalesce("s_leaf", "t_leaf").alias(LEAF),
    )
    kind = _kind(layout.whole_row_key)
    differing = joined.withColumn("kind", kind).where(F.col("kind").isNotNull())
    # One job; the totals are counted here rather than by more Spark jobs over the same rows.
    rows = differing.select(*key, *orders, "kind", "s_count", "t_count", LEAF).collect()
    by_kind: dict[str, int] = {}
    per_leaf: dict[int, int] = {}
    for row in rows:
        weight = _weight(row)
        by_kind[row["kind"]] = by_kind.get(row["kind"], 0) + weight
        per_leaf[row[LEAF]] = per_leaf.get(row[LEAF], 0) + weight
    return _KeyedDiff(rows, sum(by_kind.values()), by_kind, per_leaf)


def _detail(
    keyed: _KeyedDiff, hashed: list[DataFrame], layout: RowLayout, settings: CompareSettings
) -> list[Difference]:
    orders = _key_orders(layout)
    rows = sorted(keyed.rows, key=lambda r: (r["kind"], key_order([r[o] for o in orders])))
    rows = rows[: settings.max_reported_rows]
    changed = [r for r in rows if r["kind"] == "changed"]
    columns = _changed_columns(changed, hashed, layout, settings) if changed else {}
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
        return [MissingInTarget(key, rows=_weight(row))]
    if kind == "extra_in_target":
        return [ExtraInTarget(key, rows=_weight(row))]
    if kind == "changed":
        return [Changed(key, columns.get(key, ()))]
    found: list[Difference] = []
    for side, count in (("source", row["s_count"]), ("target", row["t_count"])):
        if count is not None and count > 1:
            found.append(DuplicateKey(key, side, count))
    return found


def _changed_columns(
    rows: list[Any], hashed: list[DataFrame], layout: RowLayout, settings: CompareSettings
) -> dict[Key, tuple[ColumnChange, ...]]:
    """Changed columns of the changed keys, read from the cached frames (no re-read)."""
    from pyspark.sql import functions as F

    spark = hashed[0].sparkSession
    schema = ", ".join(f"`{t}` string" for t in _key_texts(layout))
    keys = F.broadcast(
        spark.createDataFrame([tuple(r[k] for k in layout.key) for r in rows], schema)
    )
    details = [
        _column_values(frame, keys, layout, prefix)
        for frame, prefix in zip(hashed, "st", strict=True)
    ]
    joined = details[0].join(details[1], list(layout.key))
    result: dict[Key, tuple[ColumnChange, ...]] = {}
    for row in joined.collect():
        key: Key = tuple(row[k] for k in layout.key)
        result[key] = tuple(_column_changes(row, layout, settings.sensitive))
    return result


def _key_orders(layout: RowLayout) -> list[str]:
    """Names of the key columns' typed values, collected beside their text to sort by."""
    return [f"_key_order_{i}" for i in range(len(layout.key))]


def _key_texts(layout: RowLayout) -> list[str]:
    """Names of the key columns as text, to join the wanted keys on."""
    return [f"_key_text_{i}" for i in range(len(layout.key))]


def _column_values(frame: DataFrame, keys: DataFrame, layout: RowLayout, prefix: str) -> DataFrame:
    """Payloads and values of the wanted keys' rows. The keys are joined first, so the
    payloads are computed for those rows only, not for every row of the cached frame."""
    from pyspark.sql import functions as F

    types = {f.name: f.dataType for f in frame.schema.fields}
    texts = _key_texts(layout)
    wanted = frame.select(
        *[
            F.col(backtick_quote(k)).cast("string").alias(t)
            for k, t in zip(layout.key, texts, strict=True)
        ],
        *[backtick_quote(c.name) for c in layout.columns],
    ).join(keys, texts)
    return wanted.select(
        *[F.col(t).alias(k) for k, t in zip(layout.key, texts, strict=True)],
        *[
            payload_column(
                wanted[backtick_quote(c.name)], types[c.name], c.ltype, layout.options
            ).alias(f"{prefix}_p_{i}")
            for i, c in enumerate(layout.columns)
        ],
        *[
            wanted[backtick_quote(c.name)].cast("string").alias(f"{prefix}_v_{i}")
            for i, c in enumerate(layout.columns)
        ],
    )


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
