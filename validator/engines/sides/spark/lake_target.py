"""A lake table as it was at a source position, read with Spark.

State at P = for each key, its latest changelog event with ``_commit_pos <= P`` (ordered by
``_commit_pos``, then ``_seq``), dropping keys whose latest event is a delete and keys whose
latest event precedes the newest truncate at or before P. The files of the changelog's
newest version are listed with ``deltalake`` and read by Spark as Parquet (delta-spark
cannot be installed here); on an object store the executors read them through pyarrow
(``store_files``).

When the lake's histories prove that a version of the table's mirror holds exactly that
state (``cdc_core.lake.mirror_state``), that version's files are read instead: one row per key,
no window over every event. Spark reads only the columns a comparison selects from them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cdc_core.lake.layout import LakeTable, changelog_files
from cdc_core.lake.mirror_state import KeyRange, MirrorRead, mirror_read
from cdc_core.lake_location import LakeLocation
from cdc_core.names import COMMIT_POS, COPY, META_COLUMNS, OP, SEQ, backtick_quote
from validator.engines.sides.spark.store_files import store_frame
from validator.positions import SourcePositions

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)


def read_changelog(spark: SparkSession, table: LakeTable) -> DataFrame:
    """Every event of the changelog (an empty frame with the right schema if none)."""
    return _read_files(spark, *changelog_files(table), table.location)


def _read_files(
    spark: SparkSession, files: Sequence[str], schema: pa.Schema, lake: LakeLocation
) -> DataFrame:
    """A Delta table's data ``files`` read as Parquet, with the columns of its ``schema``:
    by Spark on local disk, by the executors through pyarrow on an object store
    (``store_files``: no Hadoop connector or Delta jar needed on the cluster)."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    if not files:
        return spark.createDataFrame([], from_arrow_schema(schema, prefer_timestamp_ntz=True))
    if not lake.is_local:
        return store_frame(spark, files, schema, lake.access())
    # Files written before a column was added lack it: merge every file's schema, or Spark
    # takes one file's and the column may vanish (the pipeline adds columns by schema merge).
    frame = spark.read.option("mergeSchema", "true").parquet(*files)
    # A column the table's schema has but no file yet (added by a DDL, no event since) is
    # NULL in every row, as at the source.
    wanted = from_arrow_schema(schema, prefer_timestamp_ntz=True)
    for field in wanted.fields:
        if field.name not in frame.columns:
            frame = frame.withColumn(field.name, F.lit(None).cast(field.dataType))
    return frame


@dataclass(frozen=True, slots=True)
class LakeState:
    """A lake table's rows at a position, and whether they are a plain read of a mirror
    version's files (read again, they cost a Parquet scan: not worth a cache)."""

    frame: DataFrame
    from_mirror: bool


def read_lake_state(
    spark: SparkSession,
    table: LakeTable,
    key: Sequence[str],
    position: int | SourcePositions | None,
    ranges: Sequence[KeyRange] | None = None,
) -> LakeState:
    """The rows of the table users read, the mirror, as of ``position`` (None: everything
    the lake has): a mirror version and the changelog's events after it
    (``cdc_core.lake.mirror_state``); with ``ranges`` (of the first key column) at least
    the rows in them, from only the mirror files that may hold them.

    With ``SourcePositions`` each key is read as of the position of the source partition
    holding it (by its first key column); a truncate counts from the highest of them.
    """
    first = key[0] if ranges is not None else None
    if isinstance(position, SourcePositions):
        read = mirror_read(table, min(position.values), max(position.values), first)
    else:
        read = mirror_read(table, position, key=first)
    if ranges is not None:
        read = read.meeting(ranges)
    mirror = _read_files(spark, read.files, read.schema, table.location).drop(*META_COLUMNS, COPY)
    if read.exact:
        log.info("lake table %s: mirror version %d", table.table, read.version)
        return LakeState(mirror, from_mirror=True)
    log.info(
        "lake table %s: mirror version %d and %d changelog file(s) after it",
        table.table,
        read.version,
        len(read.after),
    )
    events = _read_files(spark, read.after, read.after_schema, table.location)
    return LakeState(_laid_over(mirror, events, read, key, position), from_mirror=False)


def _laid_over(
    mirror: DataFrame,
    events: DataFrame,
    read: MirrorRead,
    key: Sequence[str],
    position: int | SourcePositions | None,
) -> DataFrame:
    """The mirror version's rows with the changelog's later events laid over them: a key's
    latest event replaces its row (a delete drops it), a truncate drops every row before."""
    from pyspark.sql import functions as F

    if read.mark is not None:
        at, last = read.mark
        later = (F.col(COMMIT_POS) > at) | ((F.col(COMMIT_POS) == at) & (F.col(SEQ) > last))
        events = events.where(later)
    alive = _latest_alive(_upto(events, key, position), key)
    if read.version < 0:  # no mirror version at or below the position (or no key): a replay
        return alive.rows
    touched = alive.latest.select(
        *[F.col(backtick_quote(k)).alias(f"_k{i}") for i, k in enumerate(key)]
    )
    match = [mirror[backtick_quote(k)].eqNullSafe(touched[f"_k{i}"]) for i, k in enumerate(key)]
    kept = mirror.join(touched, match, "left_anti").crossJoin(F.broadcast(alive.cut))
    kept = kept.where(F.col("cut").isNull()).drop("cut")
    return kept.unionByName(alive.rows, allowMissingColumns=True)


def lake_state_at(
    spark: SparkSession,
    table: LakeTable,
    key: Sequence[str],
    position: int | SourcePositions | None,
) -> DataFrame:
    """The rows of ``read_lake_state``."""
    return read_lake_state(spark, table, key, position).frame


def replay_state_at(
    spark: SparkSession,
    table: LakeTable,
    key: Sequence[str],
    position: int | SourcePositions | None,
) -> DataFrame:
    """The table's rows as of ``position``, from every changelog event up to it."""
    events = _upto(read_changelog(spark, table), key, position)
    return _latest_alive(events, key).rows


def _upto(
    events: DataFrame, key: Sequence[str], position: int | SourcePositions | None
) -> DataFrame:
    """The events at or below the position their key is read at."""
    from pyspark.sql import functions as F

    if isinstance(position, SourcePositions):
        return events.where(F.col(COMMIT_POS) <= position.cutoff(F.col(backtick_quote(key[0]))))
    if position is not None:
        return events.where(F.col(COMMIT_POS) <= F.lit(position))
    return events


@dataclass(frozen=True, slots=True)
class _Latest:
    """Each key's latest event (``latest``), the newest truncate (``cut``, one row), and
    the rows alive after both (``rows``: no delete, nothing before the truncate)."""

    latest: DataFrame
    cut: DataFrame
    rows: DataFrame


def _latest_alive(events: DataFrame, key: Sequence[str]) -> _Latest:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    order = F.struct(F.col(COMMIT_POS), F.col(SEQ))
    last_truncate = events.where(F.col(OP) == "t").agg(F.max(order).alias("cut"))
    rows = events.where(F.col(OP) != "t")
    if COPY in events.columns:  # equal rows of a table without a key: cdc_core.rebuild.copies
        key = (*key, COPY)
    newest = Window.partitionBy(*map(backtick_quote, key)).orderBy(
        F.col(COMMIT_POS).desc(), F.col(SEQ).desc()
    )
    latest = rows.withColumn("_rank", F.row_number().over(newest)).where(F.col("_rank") == 1)
    alive = latest.where(F.col(OP) != "d").crossJoin(F.broadcast(last_truncate))
    alive = alive.where(F.col("cut").isNull() | (order > F.col("cut")))
    return _Latest(latest, last_truncate, alive.drop("_rank", "cut", *META_COLUMNS, COPY))
