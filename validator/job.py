"""Run the configured comparisons in one Spark session and write ``result.json``.

A source without a transaction log (DuckDB, SQLite) has no position: it is compared with
a lake target as of the lake's high-water mark, i.e. with everything the lake has.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from importlib import metadata
from typing import TYPE_CHECKING, Any

from cdc_core.config import ConnectionConfig
from cdc_core.errors import ConfigError, ReplcheckError, TerminalError
from cdc_core.lake import LakeTable, changelog_files, high_water_mark
from connectors.base import Connector, TableSchema, connector_for
from validator.compare import CompareSettings, Side, compare_sides
from validator.config import ComparisonConfig, ValidatorConfig
from validator.lake_target import lake_state_at
from validator.reconcile import logical_type_of_arrow, reconcile
from validator.result import (
    SCHEMA_VERSION,
    ComparisonResult,
    Status,
    overall_status,
    to_dict,
)
from validator.sources import plan_partitions, source_frame

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Target:
    frame: DataFrame
    types: dict[str, Any]
    label: str
    position: str | None


def _connector(connection: ConnectionConfig) -> Connector:
    if connection.url is None:
        raise ConfigError(f"connection {connection.name} is a lake; use it as a target")
    password = connection.password.reveal() if connection.password else None
    return connector_for(connection.url, password)


def _lake_target(
    spark: SparkSession, connection: ConnectionConfig, table: str, key: Sequence[str]
) -> _Target:
    assert connection.lake is not None
    lake_table = LakeTable(connection.lake, table)
    _, schema = changelog_files(lake_table)
    position = high_water_mark(lake_table)
    types = {f.name: logical_type_of_arrow(f.type) for f in schema if not f.name.startswith("_")}
    frame = lake_state_at(spark, lake_table, key, position)
    label = f"{connection.name}:{table}"
    return _Target(frame, types, label, None if position is None else str(position))


def _database_target(
    spark: SparkSession, connection: ConnectionConfig, table: str, key: Sequence[str]
) -> _Target:
    connector = _connector(connection)
    schema = connector.reflect(table)
    types = {c.name: c.ltype for c in schema.columns}
    parallelism = spark.sparkContext.defaultParallelism
    partitions = plan_partitions(connector, schema, key, parallelism)
    supported = [c.name for c in schema.columns if c.ltype is not None]
    frame = source_frame(spark, connector, schema, supported, partitions)
    return _Target(frame, types, f"{connection.name}:{table}", None)


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


def _target(
    spark: SparkSession, config: ValidatorConfig, comparison: ComparisonConfig, key: Sequence[str]
) -> _Target:
    connection = config.connections[comparison.target.connection]
    target_key = [comparison.columns.target_name(k) for k in key]
    read = _lake_target if connection.is_lake else _database_target
    return read(spark, connection, comparison.target.table, target_key)


def run_comparison(
    spark: SparkSession, config: ValidatorConfig, comparison: ComparisonConfig
) -> ComparisonResult:
    """Compare one source table with its target."""
    source_connection = config.connections[comparison.source.connection]
    connector = _connector(source_connection)
    schema = connector.reflect(comparison.source.table)
    key = _source_key(comparison, schema)
    target = _target(spark, config, comparison, key)
    rules = comparison.columns
    reconciled = reconcile(
        {c.name: c.ltype for c in schema.columns},
        target.types,
        key,
        rules.rename,
        rules.exclude,
        rules.sensitive,
        comparison.options,
    )
    names = reconciled.layout.names
    target_df = target.frame.select(
        *[target.frame[reconciled.target_names[n]].alias(n) for n in names]
    )
    settings = CompareSettings(
        depth=comparison.depth,
        rows_per_leaf=comparison.rows_per_leaf,
        max_reported_rows=config.validation.max_reported_rows,
        sensitive=frozenset(rules.sensitive),
    )
    partitions = plan_partitions(connector, schema, key, spark.sparkContext.defaultParallelism)
    # Spark reads the source lazily, more than once: the snapshot stays open throughout.
    with connector.shared_snapshot() as snapshot:
        source_df = source_frame(spark, connector, schema, names, partitions, snapshot)
        position = snapshot.position_text if snapshot else None
        source_side = Side(
            source_df.select(*names),
            f"{source_connection.name}:{comparison.source.table}",
            position,
        )
        target_side = Side(target_df, target.label, target.position)
        result = compare_sides(
            comparison.name, source_side, target_side, reconciled.layout, settings
        )
    return replace(result, schema_differences=reconciled.schema_differences)


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
