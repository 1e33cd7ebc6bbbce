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

from validator.config import ComparisonConfig
from validator.engines.progress import PhaseTimer
from validator.engines.sides.spark.session import default_parallelism
from validator.engines.sides.spark.side import Side, cache_level
from validator.engines.sides.spark.sources import plan_partitions, source_frame
from validator.engines.sides.spark.target import in_layout_names, target_side
from validator.engines.spark.compare import compare_sides, hashed_rows
from validator.expectations import TargetFacts, check_columns, evaluate_expectations
from validator.plan import ComparisonPlan, EngineRun
from validator.positions import (
    SourcePositions,
    read_positions,
)
from validator.reflection import Reflected
from validator.result import ComparisonResult, with_expectations

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)


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
