"""Run the configured comparisons and return the run's result document.

Each comparison runs in one of two engines (``validation.engine``): the two databases
compute their own digests when both can (``validator.database_engine``), else Spark does
(``validator.compare``), in one session for the whole run, started only when a comparison
needs it. A source without a transaction log (DuckDB, SQLite) has no position: it is
compared with a lake target as of the lake's high-water mark, i.e. with everything the
lake has.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from importlib import metadata
from typing import TYPE_CHECKING, Any

from cdc_core.config import ConnectionConfig
from cdc_core.errors import ConfigError, ReplcheckError, TerminalError
from cdc_core.lake import LakeTable, high_water_mark
from connectors.base import Connector, TableSchema
from connectors.pushdown import NotPushable
from merkle.layout import RowLayout
from validator.compare import CompareSettings, Side, compare_sides, hashed_rows
from validator.config import ComparisonConfig, ValidatorConfig
from validator.database_engine import compare_in_databases
from validator.database_plan import DatabaseSide, plan_side
from validator.expectations import TargetFacts, check_columns, evaluate_expectations
from validator.lake_target import lake_state_at
from validator.positions import SourcePositions, read_positions, wait_for_lake
from validator.recheck import LiveTable, can_recheck, confirm
from validator.reflection import Reflected, reflect_comparison
from validator.result import (
    SCHEMA_VERSION,
    ComparisonResult,
    Status,
    overall_status,
    to_dict,
    with_expectations,
)
from validator.sources import plan_partitions, source_frame

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)


def _lake_side(
    spark: SparkSession,
    config: ValidatorConfig,
    connection: ConnectionConfig,
    table: str,
    key: Sequence[str],
    positions: SourcePositions | None,
) -> Side:
    assert connection.lake is not None
    lake_table = LakeTable(connection.lake, table)
    label = f"{connection.name}:{table}"
    if positions is None:  # a source without a log: everything the lake has
        mark = high_water_mark(lake_table)
        frame = lake_state_at(spark, lake_table, key, mark)
        return Side(frame, label, None if mark is None else str(mark))
    timeout = config.validation.lake_wait_timeout_s
    wait_for_lake(lambda: high_water_mark(lake_table), positions.highest, timeout, table)
    frame = lake_state_at(spark, lake_table, key, positions)
    return Side(frame, label, positions.describe())


def _database_side(
    spark: SparkSession,
    connection: ConnectionConfig,
    target: tuple[Connector, TableSchema],
    key: Sequence[str],
) -> Side:
    """A live database target, compared as it is now (it has no time travel)."""
    connector, schema = target
    partitions = plan_partitions(connector, schema, key, spark.sparkContext.defaultParallelism)
    supported = [c.name for c in schema.columns if c.ltype is not None]
    frame = source_frame(spark, connector, schema, supported, partitions)
    return Side(frame, f"{connection.name}:{schema.table}")


def _read_source_once(
    spark: SparkSession, connector: Connector, schema: TableSchema, layout: RowLayout
) -> tuple[DataFrame, SourcePositions | None]:
    """Read the source in its snapshot(s) exactly once, hashed as it is read: every later
    phase reuses these rows, so all phases see the same snapshots (a re-read would open new
    ones). The job that reads the positions is the one that reads and caches the rows."""
    from pyspark import StorageLevel

    parallelism = spark.sparkContext.defaultParallelism
    partitions = plan_partitions(connector, schema, layout.key, parallelism)
    with connector.shared_snapshot() as snapshot:
        frame = source_frame(spark, connector, schema, layout.names, partitions, snapshot)
        frame = hashed_rows(frame, layout).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            positions = read_positions(frame, partitions)
        except BaseException:
            frame.unpersist()
            raise
    return frame, positions


def _session(spark: SparkSession | Callable[[], SparkSession]) -> SparkSession:
    """The Spark session, started now if the caller passed a way to start it."""
    return spark() if callable(spark) else spark


def run_comparison(
    spark: SparkSession | Callable[[], SparkSession],
    config: ValidatorConfig,
    comparison: ComparisonConfig,
) -> ComparisonResult:
    """Compare one source table with its target, in the databases when both can compute
    their own digests (``validation.engine``), else in Spark."""
    reflected = reflect_comparison(config, comparison)
    sides = _database_sides(config, reflected)
    if sides is not None:
        result = compare_in_databases(
            comparison.name,
            *sides,
            reflected.reconciled.layout,
            _settings(config, comparison),
            config.validation.database_parallelism,
        )
        target: Side | None = None
    else:
        result, target = _compare_in_spark(_session(spark), config, reflected)
    result = replace(result, schema_differences=reflected.reconciled.schema_differences)
    if reflected.target is not None and result.differences:
        result = _confirm_live(result, config, reflected)
    if comparison.expectations:
        if target is None:  # the database engine read no frame: read the live target now
            target = _target_side(_session(spark), config, reflected, None)
        result = _check_expectations(result, comparison, target, reflected.target_key)
    return result


def _database_sides(
    config: ValidatorConfig, reflected: Reflected
) -> tuple[DatabaseSide, DatabaseSide] | None:
    """Both sides planned for the database engine, or None to compare in Spark."""
    comparison = reflected.comparison
    engine = comparison.engine or config.validation.engine
    if engine == "spark":
        return None
    try:
        if reflected.target is None:
            raise NotPushable("the target is a lake, which only Spark reads")
        layout, names = reflected.reconciled.layout, reflected.reconciled.target_names
        source_connection = config.connections[comparison.source.connection]
        source = plan_side(
            reflected.source,
            reflected.source_schema,
            layout,
            {n: n for n in layout.names},
            f"{source_connection.name}:{comparison.source.table}",
        )
        target = plan_side(
            *reflected.target,
            layout,
            names,
            f"{reflected.target_connection.name}:{comparison.target.table}",
        )
    except NotPushable as exc:
        if engine == "database":
            raise ConfigError(
                f"comparison {comparison.name}: the database engine cannot compare it ({exc});"
                " set engine: auto or spark"
            ) from exc
        log.info("comparison %s: compared in Spark: %s", comparison.name, exc)
        return None
    return source, target


def _compare_in_spark(
    spark: SparkSession, config: ValidatorConfig, reflected: Reflected
) -> tuple[ComparisonResult, Side]:
    """The Spark engine (``validator.compare``); the result and the target it read."""
    comparison, reconciled = reflected.comparison, reflected.reconciled
    names = reconciled.layout.names
    started = time.perf_counter()
    source, positions = _read_source_once(
        spark, reflected.source, reflected.source_schema, reconciled.layout
    )
    read_s = round(time.perf_counter() - started, 3)
    try:
        target = _target_side(spark, config, reflected, positions)
        check_columns(comparison.expectations, target.frame.columns, target.label)
        target_frame = target.frame.select(
            *[target.frame[reconciled.target_names[n]].alias(n) for n in names]
        )
        source_connection = config.connections[comparison.source.connection]
        label = f"{source_connection.name}:{comparison.source.table}"
        position = positions.describe() if positions else None
        result = compare_sides(
            comparison.name,
            Side(source, label, position),
            Side(target_frame, target.label, target.position),
            reconciled.layout,
            _settings(config, comparison),
        )
    finally:
        source.unpersist()
    return replace(result, timings={"source": read_s, **result.timings}), target


def _target_side(
    spark: SparkSession,
    config: ValidatorConfig,
    reflected: Reflected,
    positions: SourcePositions | None,
) -> Side:
    connection, table = reflected.target_connection, reflected.comparison.target.table
    if reflected.target is None:
        return _lake_side(spark, config, connection, table, reflected.target_key, positions)
    return _database_side(spark, connection, reflected.target, reflected.target_key)


def _check_expectations(
    result: ComparisonResult, comparison: ComparisonConfig, target: Side, key: Sequence[str]
) -> ComparisonResult:
    """Check the comparison's data-quality suite on the target (validator.expectations)."""
    from pyspark import StorageLevel

    log.info("comparison %s: expectations", comparison.name)
    rules = comparison.columns
    sensitive = {*rules.sensitive, *(rules.target_name(c) for c in rules.sensitive)}
    facts = TargetFacts(
        comparison.name, target.label, tuple(key), result.source_rows, frozenset(sensitive)
    )
    started = time.perf_counter()
    # GX runs several Spark jobs over the target: materialise it once, not once per job.
    frame = target.frame.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        checked = evaluate_expectations(frame, comparison.expectations, facts)
    finally:
        frame.unpersist()
    return with_expectations(result, checked, time.perf_counter() - started)


def _confirm_live(
    result: ComparisonResult, config: ValidatorConfig, reflected: Reflected
) -> ComparisonResult:
    """Re-check a live target's differences after the replication lag (validator.recheck)."""
    assert reflected.target is not None
    layout = reflected.reconciled.layout
    lag = config.validation.recheck_lag_s
    if lag <= 0 or not can_recheck(layout):
        log.warning("comparison %s: differences not re-checked (lag %s s)", result.name, lag)
        return result
    target_names = tuple(reflected.reconciled.target_names[n] for n in layout.names)
    return confirm(
        result,
        layout,
        LiveTable(reflected.source, reflected.source_schema, layout.names, reflected.key),
        LiveTable(*reflected.target, target_names, reflected.target_key),
        lag,
    )


def _settings(config: ValidatorConfig, comparison: ComparisonConfig) -> CompareSettings:
    return CompareSettings(
        depth=comparison.depth,
        rows_per_leaf=comparison.rows_per_leaf,
        max_reported_rows=config.validation.max_reported_rows,
        sensitive=frozenset(comparison.columns.sensitive),
    )


def _failed(
    comparison: ComparisonConfig, config: ValidatorConfig, exc: Exception
) -> ComparisonResult:
    source = config.connections[comparison.source.connection].display()
    target = config.connections[comparison.target.connection].display()
    return ComparisonResult(
        name=comparison.name, status=Status.ERROR, source=source, target=target, error=str(exc)
    )


def validate(
    spark: SparkSession | Callable[[], SparkSession],
    config: ValidatorConfig,
    names: Sequence[str] = (),
) -> dict[str, Any]:
    """Run the comparisons (all, or those named) and return the run's result document.

    Args:
        spark: The Spark session, or a callable that starts it (``LazySparkSession``), called
            only when a comparison runs in Spark.
        config: The validator's configuration.
        names: Comparisons to run (default: all).
    """
    chosen = [config.comparison(n) for n in names] if names else list(config.comparisons)
    started = dt.datetime.now(dt.UTC)
    clock = time.perf_counter()
    results = []
    for comparison in chosen:
        try:
            results.append(run_comparison(spark, config, comparison))
        except ReplcheckError as exc:
            log.error("comparison %s could not be validated: %s", comparison.name, exc)
            results.append(_failed(comparison, config, exc))
        except Exception as exc:  # a Spark or driver failure: report it, go on with the rest
            log.exception("comparison %s failed", comparison.name)
            results.append(
                _failed(comparison, config, TerminalError(f"{type(exc).__name__}: {exc}"))
            )
    return {
        "schema_version": SCHEMA_VERSION,
        "status": overall_status([r.status for r in results]).value,
        "started": started.isoformat(),
        "finished": dt.datetime.now(dt.UTC).isoformat(),
        "duration_s": round(time.perf_counter() - clock, 3),
        "replcheck_version": _version(),
        "comparisons": [to_dict(r) for r in results],
    }


def _version() -> str:
    try:
        return metadata.version("replcheck")
    except metadata.PackageNotFoundError:
        return "unknown"
