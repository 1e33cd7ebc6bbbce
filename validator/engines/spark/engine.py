"""The Spark engine: a comparison read into Spark and hashed there (``compare.py`` here).

The source is read once, in its snapshot(s), hashed as it is read; the target is a lake
materialised at the source's positions (after waiting for its high-water mark) or a live
database read as it is now. Imported only when a comparison runs in Spark.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from cdc_core.config import ConnectionConfig
from cdc_core.lake.layout import LakeTable
from cdc_core.names import backtick_quote
from connectors.base import Connector
from connectors.model import QuietLog, TableSchema
from validator.config import ComparisonConfig
from validator.engines.progress import PhaseTimer
from validator.engines.spark.compare import Side, cache_level, compare_sides, hashed_rows
from validator.engines.spark.lake_target import read_lake_state
from validator.engines.spark.session import default_parallelism
from validator.engines.spark.sources import plan_partitions, source_frame
from validator.expectations import TargetFacts, check_columns, evaluate_expectations
from validator.plan import ComparisonPlan, EngineRun
from validator.positions import (
    SourcePositions,
    confirm_exact,
    lake_at,
    read_at_own_mark,
    read_positions,
)
from validator.quiet_log import quiet_log_of
from validator.reconcile import Reconciled
from validator.reflection import Reflected
from validator.result import ComparisonResult, with_expectations
from validator.settings import CompareSettings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)


def _lake_side(
    spark: SparkSession,
    settings: CompareSettings,
    connection: ConnectionConfig,
    table: str,
    key: Sequence[str],
    positions: SourcePositions | None,
    quiet: QuietLog | None,
) -> Side:
    assert connection.lake is not None
    lake_table = LakeTable(connection.lake, table)
    label = f"{connection.name}:{table}"
    where = lake_at(lake_table, positions, settings.lake_wait_timeout_s, quiet)
    state = read_lake_state(spark, lake_table, key, where.at)
    confirm_exact(lake_table, where)
    return Side(state.frame, label, where.text, state.from_mirror)


def _database_side(
    spark: SparkSession,
    connection: ConnectionConfig,
    target: tuple[Connector, TableSchema],
    key: Sequence[str],
) -> Side:
    """A live database target, compared as it is now (it has no time travel)."""
    connector, schema = target
    partitions = plan_partitions(connector, schema, key, default_parallelism(spark))
    supported = [c.name for c in schema.columns if c.ltype is not None]
    frame = source_frame(spark, connector, schema, supported, partitions)
    return Side(frame, f"{connection.name}:{schema.table}")


def _read_source_once(
    spark: SparkSession, reflected: Reflected, timer: PhaseTimer
) -> tuple[DataFrame, SourcePositions | None]:
    """Read the source in its snapshot(s) exactly once, hashed as it is read: every later
    phase reuses these rows, so all phases see the same snapshots (a re-read would open new
    ones). The job that reads the positions is the one that reads and caches the rows."""
    connector, schema = reflected.source, reflected.source_schema
    layout = reflected.reconciled.layout
    parallelism = default_parallelism(spark)
    partitions = plan_partitions(connector, schema, layout.key, parallelism)
    with connector.shared_snapshot(reflected.at_log_position) as snapshot:
        timer.snapshot(snapshot)
        frame = source_frame(spark, connector, schema, layout.names, partitions, snapshot)
        frame = hashed_rows(frame, layout).persist(cache_level())
        try:
            positions = read_positions(frame, partitions, connector.describe_position)
        except BaseException:
            frame.unpersist()
            raise
    return frame, positions


class SparkEngine:
    """The Spark engine as an ``Engine`` of ``validator.plan``, on one session."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    def __call__(self, plan: ComparisonPlan) -> EngineRun:
        return EngineRun(*compare_in_spark(self.spark, plan))


def compare_in_spark(spark: SparkSession, plan: ComparisonPlan) -> tuple[ComparisonResult, Side]:
    """The Spark engine (``compare.py`` here); the result and the target it read."""
    reflected, settings = plan.reflected, plan.settings
    comparison, reconciled = reflected.comparison, reflected.reconciled
    timer = PhaseTimer(comparison.name, "in Spark")
    with timer.phase("source"):  # read once, in its snapshot(s), hashed as it is read
        source, positions = _read_source_once(spark, reflected, timer)
    try:
        target = target_side(spark, plan, positions)
        check_columns(comparison.expectations, target.frame.columns, target.label)
        target_frame = in_layout_names(target.frame, reconciled)
        position = positions.describe() if positions else None
        result = compare_sides(
            comparison.name,
            Side(source, reflected.source_label, position),
            Side(target_frame, target.label, target.position),
            reconciled.layout,
            settings,
            timer,
        )
    finally:
        source.unpersist()
    return result, target


def in_layout_names(frame: DataFrame, reconciled: Reconciled) -> DataFrame:
    """The target's compared columns, named as the layout (the source) names them."""
    return frame.select(
        *[
            frame[backtick_quote(reconciled.target_names[name])].alias(name)
            for name in reconciled.layout.names
        ]
    )


def target_side(
    spark: SparkSession, plan: ComparisonPlan, positions: SourcePositions | None
) -> Side:
    """The target as Spark reads it: a lake at ``positions`` (None, or a lake fed by
    trigger capture: at its high-water mark, ``read_at_own_mark``), or a live database as
    it is now."""
    reflected = plan.reflected
    connection, table = reflected.target_connection, reflected.comparison.target.table
    if reflected.target is None:
        if read_at_own_mark(reflected.source.url):
            positions = None
        key = reflected.target_key
        source_table = reflected.comparison.source.table
        quiet = quiet_log_of(reflected.source.url, reflected.source.password, source_table)
        return _lake_side(spark, plan.settings, connection, table, key, positions, quiet)
    return _database_side(spark, connection, reflected.target, reflected.target_key)


def check_expectations(
    result: ComparisonResult, comparison: ComparisonConfig, target: Side, key: Sequence[str]
) -> ComparisonResult:
    """Check the comparison's data-quality suite on the target (validator.expectations)."""

    log.info("comparison %s: expectations", comparison.name)
    rules = comparison.columns
    sensitive = {*rules.sensitive, *(rules.target_name(c) for c in rules.sensitive)}
    facts = TargetFacts(
        comparison.name, target.label, tuple(key), result.source_rows, frozenset(sensitive)
    )
    started = time.perf_counter()
    # GX runs several Spark jobs over the target: materialise it once, not once per job.
    frame = target.frame.persist(cache_level())
    try:
        checked = evaluate_expectations(frame, comparison.expectations, facts)
    finally:
        frame.unpersist()
    return with_expectations(result, checked, time.perf_counter() - started)
