"""Run the configured comparisons and return the run's result document.

Each comparison runs in one of two engines (``validation.engine``): the two databases
compute their own digests when both can (``validator.engines.database.engine``), else Spark does
(``validator.engines.spark.engine``), in one session for the whole run, started only when a
comparison needs it (so a run in the databases never imports pyspark). A source without a
transaction log (DuckDB, SQLite) has no position: it is compared with a lake target as of
the lake's high-water mark, i.e. with everything the lake has.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from importlib import metadata
from typing import TYPE_CHECKING, Any

from cdc_core.errors import ConfigError, ReplcheckError, TerminalError
from connectors.pushdown import NotPushable
from validator.config import ComparisonConfig, ValidatorConfig
from validator.engines.database.engine import compare_in_databases
from validator.engines.database.plan import DatabaseSide, plan_side
from validator.key_masks import KeyMasker
from validator.recheck import LiveTable, can_recheck, confirm
from validator.reflection import Reflected, reflect_comparison
from validator.result import (
    SCHEMA_VERSION,
    ComparisonResult,
    Status,
    overall_status,
    to_dict,
)
from validator.settings import CompareSettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from validator.engines.spark.compare import Side

log = logging.getLogger(__name__)


def _session(spark: SparkSession | Callable[[], SparkSession]) -> SparkSession:
    """The Spark session, started now if the caller passed a way to start it."""
    return spark() if callable(spark) else spark


def run_comparison(
    spark: SparkSession | Callable[[], SparkSession],
    config: ValidatorConfig,
    comparison: ComparisonConfig,
    masker: KeyMasker | None = None,
) -> ComparisonResult:
    """Compare one source table with its target, in the databases when both can compute
    their own digests (``validation.engine``), else in Spark; sensitive key parts come back
    as tokens (``validator.key_masks``)."""
    masker = masker or KeyMasker.for_run(config.validation.mask_key)
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
        from validator.engines.spark.engine import compare_in_spark

        settings = _settings(config, comparison)
        result, target = compare_in_spark(_session(spark), config, reflected, settings)
    result = replace(result, schema_differences=reflected.reconciled.schema_differences)
    if reflected.target is not None and result.differences:
        result = _confirm_live(result, config, reflected)
    # The last step that needs real keys is the re-check: from here on, tokens.
    result = masker.mask_result(result, reflected.reconciled.layout, comparison.columns.sensitive)
    if comparison.expectations:
        from validator.engines.spark.engine import check_expectations, target_side

        if target is None:  # the database engine read no frame: read the live target now
            target = target_side(_session(spark), config, reflected, None)
        result = check_expectations(result, comparison, target, reflected.target_key)
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
        same = {n: n for n in layout.names}
        source = plan_side(
            reflected.source, reflected.source_schema, layout, same, reflected.source_label
        )
        target = plan_side(*reflected.target, layout, names, reflected.target_label)
    except NotPushable as exc:
        if engine == "database":
            raise ConfigError(
                f"comparison {comparison.name}: the database engine cannot compare it ({exc});"
                " set engine: auto or spark"
            ) from exc
        log.info("comparison %s: compared in Spark: %s", comparison.name, exc)
        return None
    return source, target


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


def _failed(comparison: ComparisonConfig, exc: Exception) -> ComparisonResult:
    return ComparisonResult(
        name=comparison.name,
        status=Status.ERROR,
        source=comparison.source_label,
        target=comparison.target_label,
        error=str(exc),
    )


def validate(
    spark: SparkSession | Callable[[], SparkSession],
    config: ValidatorConfig,
    names: Sequence[str] = (),
    masker: KeyMasker | None = None,
) -> dict[str, Any]:
    """Run the comparisons (all, or those named) and return the run's result document.

    Args:
        spark: The Spark session, or a callable that starts it (``LazySparkSession``), called
            only when a comparison runs in Spark.
        config: The validator's configuration.
        names: Comparisons to run (default: all).
        masker: The secret sensitive key parts are hashed under (default: the config's
            ``validation.mask_key``, else a random one; save it with ``save_beside``).
    """
    masker = masker or KeyMasker.for_run(config.validation.mask_key)
    chosen = [config.comparison(n) for n in names] if names else list(config.comparisons)
    started = dt.datetime.now(dt.UTC)
    clock = time.perf_counter()
    results = []
    for comparison in chosen:
        try:
            results.append(run_comparison(spark, config, comparison, masker))
        except ReplcheckError as exc:
            log.error("comparison %s could not be validated: %s", comparison.name, exc)
            results.append(_failed(comparison, exc))
        except Exception as exc:  # a Spark or driver failure: report it, go on with the rest
            log.exception("comparison %s failed", comparison.name)
            results.append(_failed(comparison, TerminalError(f"{type(exc).__name__}: {exc}")))
    return {
        "schema_version": SCHEMA_VERSION,
        "status": overall_status([r.status for r in results]).value,
        "started": started.isoformat(),
        "finished": dt.datetime.now(dt.UTC).isoformat(),
        "duration_s": round(time.perf_counter() - clock, 3),
        "replcheck_version": _version(),
        "comparisons": [to_dict(r) for r in results],
        "mask_key_id": masker.key_id,
    }


def _version() -> str:
    try:
        return metadata.version("replcheck")
    except metadata.PackageNotFoundError:
        return "unknown"
