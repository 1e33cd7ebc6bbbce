"""A comparison's target as Spark reads it: a lake as of the source's positions, or a live
database as it is now (``Side``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from cdc_core.config import ConnectionConfig
from cdc_core.lake.layout import LakeTable
from cdc_core.names import backtick_quote
from connectors.base import Connector
from connectors.model import QuietLog, TableSchema
from validator.engines.sides.spark.lake_target import read_lake_state
from validator.engines.sides.spark.session import default_parallelism
from validator.engines.sides.spark.side import Side
from validator.engines.sides.spark.sources import plan_partitions, source_frame
from validator.plan import ComparisonPlan
from validator.positions import SourcePositions, confirm_exact, lake_at, read_at_own_mark
from validator.quiet_log import quiet_log_of
from validator.reconcile import Reconciled
from validator.settings import CompareSettings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from cdc_core.lake.mirror_state import KeyRange


def lake_side(
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

    def narrowed(ranges: Sequence[KeyRange]) -> DataFrame:
        return read_lake_state(spark, lake_table, key, where.at, ranges).frame

    return Side(state.frame, label, where.text, state.from_mirror, narrowed)


def database_side(
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
        return lake_side(spark, plan.settings, connection, table, key, positions, quiet)
    return database_side(spark, connection, reflected.target, reflected.target_key)
