"""The lake side of the hybrid engine: Spark hashes the lake into the source's leaves.

The lake's rows at the agreed position (``validator.engines.spark.lake_target``), only the
compared columns, get the MD5 flavour of the hash contract (``merkle.spark.with_md5_hashes``,
the hash the source database computes) and the leaf the source's ``LeafScheme`` gives their
key, computed as ``connectors.pushdown`` computes it in SQL. The engine persists the hashed
frame once unless it is a plain read of the mirror; keys and changed rows are then read
from it for the mismatched leaves only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cdc_core.names import backtick_quote
from connectors.pushdown import LeafScheme, RangeLeaves
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
from validator.engines.database.keys import KeyEntry, KeyFinding, collect_keys

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

# The lake is read by no slice of the source: its key entries carry this slice index.
LAKE_SLICE = -1
_KEY_BYTES = "_key_bytes"


def range_leaf(key: str, scheme: RangeLeaves) -> Column:
    """The leaf of an integer key under ``scheme``, as ``connectors.pushdown`` writes it in
    SQL: keys beyond the planned range fall into the first or last leaf, NULL into the
    first. ``div`` is exact integer division (``/`` would go through a double)."""
    from pyspark.sql import functions as F

    column = backtick_quote(key)
    clamped = f"least(greatest({column}, {scheme.low}), {scheme.high}) - {scheme.low}"
    return F.expr(f"coalesce(({clamped}) div {scheme.width}, 0)").cast("bigint")


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
) -> dict[bytes, tuple[list[bytes | None], list[Any]]]:
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
