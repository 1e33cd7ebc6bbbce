"""Run the configured comparisons in one Spark session and write ``result.json``.

A source without a transaction log (DuckDB, SQLite) has no position: it is compared with
a lake target as of the lake's high-water mark, i.e. with everything the lake has.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Sequence
from dataclasses import replace
from importlib import metadata
from typing import TYPE_CHECKING, Any

from cdc_core.config import ConnectionConfig
from cdc_core.errors import ConfigError, ReplcheckError, TerminalError
from cdc_core.lake import LakeTable, changelog_files, high_water_mark
from connectors.base import Connector, TableSchema, connector_for
from merkle.layout import RowLayout
from merkle.options import TimeRounding
from validator.compare import CompareSettings, Side, compare_sides, hashed_rows
from validator.config import ComparisonConfig, ValidatorConfig
from validator.expectations import TargetFacts, check_columns, evaluate_expectations
from validator.lake_target import lake_state_at
from validator.positions import SourcePositions, read_positions, wait_for_lake
from validator.recheck import LiveTable, can_recheck, confirm
from validator.reconcile import Reconciled, SideRounding, logical_type_of_arrow, reconcile
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


def _connector(connection: ConnectionConfig) -> Connector:
    if connection.url is None:
        raise ConfigError(f"connection {connection.name} is a lake; use it as a target")
    password = connection.password.reveal() if connection.password else None
    return connector_for(connection.url, password)


def _source_key(comparison: ComparisonConfig, schema: TableSchema) -> tuple[str, ...]:
    key = comparison.key or schema.primary_key
    if not key:
        raise ConfigError(
            f"comparison {comparison.name}: {comparison.source.table} has no primary key; "
            "set key: [...] in the comparison"
        )
    missing = [k for k in key if k not in {c.name for c in schema.columns}]
    if missing:
        raise ConfigError(f"comparison {comparison.name}: key columns {missing} do not exist")
    return tuple(key)


def _target_types(connection: ConnectionConfig, table: str) -> dict[str, Any]:
    if connection.lake is not None:
        _, schema = changelog_files(LakeTable(connection.lake, table))
        return {f.name: logical_type_of_arrow(f.type) for f in schema if not f.name.startswith("_")}
    reflected = _connector(connection).reflect(table)
    return {c.name: c.ltype for c in reflected.columns}


def _target_rounding(connection: ConnectionConfig) -> TimeRounding | None:
    """How the target's product rounds stored times (unknown for a lake's writer)."""
    return None if connection.lake is not None else _connector(connection).timestamp_rounding()


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
    spark: SparkSession, connection: ConnectionConfig, table: str, key: Sequence[str]
) -> tuple[Side, Connector, TableSchema]:
    """A live database target, compared as it is now (it has no time travel)."""
    connector = _connector(connection)
    schema = connector.reflect(table)
    partitions = plan_partitions(connector, schema, key, spark.sparkContext.defaultParallelism)
    supported = [c.name for c in schema.columns if c.ltype is not None]
    frame = source_frame(spark, connector, schema, supported, partitions)
    return Side(frame, f"{connection.name}:{table}"), connector, schema


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


def run_comparison(
    spark: SparkSession, config: ValidatorConfig, comparison: ComparisonConfig
) -> ComparisonResult:
    """Compare one source table with its target."""
    source_connection = config.connections[comparison.source.connection]
    target_connection = config.connections[comparison.target.connection]
    connector = _connector(source_connection)
    schema = connector.reflect(comparison.source.table)
    key = _source_key(comparison, schema)
    rules = comparison.columns
    reconciled = reconcile(
        {c.name: c.ltype for c in schema.columns},
        _target_types(target_connection, comparison.target.table),
        key,
        rules.rename,
        rules.exclude,
        rules.sensitive,
        comparison.options,
        boolean=rules.boolean,
        rounding=SideRounding(connector.timestamp_rounding(), _target_rounding(target_connection)),
    )
    names = reconciled.layout.names
    started = time.perf_counter()
    source, positions = _read_source_once(spark, connector, schema, reconciled.layout)
    read_s = round(time.perf_counter() - started, 3)
    try:
        target_key = [rules.target_name(k) for k in key]
        table = comparison.target.table
        live: tuple[Connector, TableSchema] | None = None
        if target_connection.is_lake:
            target = _lake_side(spark, config, target_connection, table, target_key, positions)
        else:
            target, target_connector, target_schema = _database_side(
                spark, target_connection, table, target_key
            )
            live = (target_connector, target_schema)
        check_columns(comparison.expectations, target.frame.columns, target.label)
        target_frame = target.frame.select(
            *[target.frame[reconciled.target_names[n]].alias(n) for n in names]
        )
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
    result = replace(
        result,
        schema_differences=reconciled.schema_differences,
        timings={"source": read_s, **result.timings},
    )
    if live is not None and result.differences:
        result = _confirm_live(result, config, reconciled, (connector, schema), live, key)
    if comparison.expectations:
        result = _check_expectations(result, comparison, target, target_key)
    return result


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
    result: ComparisonResult,
    config: ValidatorConfig,
    reconciled: Reconciled,
    source: tuple[Connector, TableSchema],
    target: tuple[Connector, TableSchema],
    key: Sequence[str],
) -> ComparisonResult:
    """Re-check a live target's differences after the replication lag (validator.recheck)."""
    layout = reconciled.layout
    lag = config.validation.recheck_lag_s
    if lag <= 0 or not can_recheck(layout):
        log.warning("comparison %s: differences not re-checked (lag %s s)", result.name, lag)
        return result
    names = layout.names
    target_names = tuple(reconciled.target_names[n] for n in names)
    return confirm(
        result,
        layout,
        LiveTable(source[0], source[1], names, tuple(key)),
        LiveTable(
            target[0], target[1], target_names, tuple(reconciled.target_names[k] for k in key)
        ),
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
    spark: SparkSession, config: ValidatorConfig, names: Sequence[str] = ()
) -> dict[str, Any]:
    """Run the comparisons (all, or those named) and return the run's result document."""
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
