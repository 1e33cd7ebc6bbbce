"""Run the configured comparisons and return the run's result document.

Each comparison runs in one of four engines (``validation.engine``): the two databases
compute their own digests when both can (``validator.engines.database.engine``); a source
database computes its own while DuckDB (``validator.engines.local.engine``) or Spark
(``validator.engines.hybrid.engine``) hashes the lake target; else Spark does it all
(``validator.engines.spark.engine``). Spark runs in one session for the whole run, started
only when a comparison needs it (so a run in the databases never imports pyspark). A source
without a transaction log (DuckDB, SQLite) has no position: it is compared with a lake
target as of the lake's high-water mark, i.e. with everything the lake has.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from importlib import metadata
from typing import TYPE_CHECKING, Any, TypeAlias

from cdc_core.errors import ReplcheckError, TerminalError
from cdc_core.lake.layout import LakeTable
from validator.config import ComparisonConfig, ValidationSettings, ValidatorConfig
from validator.engines.database.engine import DatabaseEngine
from validator.engines.sides.spark.session import SparkUnreachableError
from validator.incremental.guarantee import stateless_coverage
from validator.key_masks import KeyMasker
from validator.lake_audit import lake_findings
from validator.plan import ComparisonPlan, Engine, plan_comparison
from validator.recheck import LiveTable
from validator.reloads import through_reloads
from validator.replicas import confirm_live
from validator.result import (
    SCHEMA_VERSION,
    Changed,
    ComparisonResult,
    Status,
    overall_status,
    to_dict,
    with_schema_differences,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


log = logging.getLogger(__name__)

Spark: TypeAlias = "SparkSession | Callable[[], SparkSession] | None"
"""A Spark session, a callable that starts one (``LazySparkSession``), or None: no Spark
(a comparison that needs it is an error naming the extra)."""


def _session(spark: Spark) -> SparkSession:
    """The Spark session, started now if the caller passed a way to start it.

    Raises:
        TerminalError: ``spark`` is None: the caller has no Spark for this comparison.
    """
    if spark is None:
        raise TerminalError(
            "this comparison needs Spark (see its engine reason), and validate() was given"
            " None: pass a SparkSession or a LazySparkSession (pip install 'replcheck[spark]')"
        )
    return spark() if callable(spark) else spark


def run_comparison(
    spark: Spark,
    config: ValidatorConfig,
    comparison: ComparisonConfig,
    masker: KeyMasker | None = None,
) -> ComparisonResult:
    """Compare one source table with its target, in the databases when both can compute
    their own digests (``validation.engine``), else in Spark; sensitive key parts come back
    as tokens (``validator.key_masks``)."""
    masker = masker or KeyMasker.for_run(config.validation.mask_key)
    plan = plan_comparison(config, comparison)
    reflected = plan.reflected
    engine = _engine(plan, spark)
    result, target = engine(plan)
    result = _as_planned(result, plan)
    lake = reflected.target_connection.lake
    if lake is not None and result.status is not Status.ERROR:
        table = LakeTable(lake, comparison.target.table)
        result = replace(result, lake_findings=lake_findings(table))
    if reflected.target is not None and result.differences:
        result = _confirm_live(result, plan, config.validation)
    # After the re-check, which sets the status from the rows alone.
    result = with_schema_differences(result, reflected.reconciled.schema_differences)
    # The last step that needs real keys is the re-check: from here on, tokens.
    result = masker.mask_result(result, reflected.reconciled.layout, comparison.columns.sensitive)
    result = _refuse_unexplained(result)
    if comparison.expectations:
        from validator.engines.sides.spark.target import target_side
        from validator.engines.spark.engine import check_expectations

        if target is None:  # the database engine read no frame: read the live target now
            target = target_side(_session(spark), plan, None)
        result = check_expectations(result, comparison, target, reflected.target_key)
    return result


def _engine(plan: ComparisonPlan, spark: Spark) -> Engine:
    if plan.databases is not None:
        return DatabaseEngine()
    if plan.local:  # no Spark: the lake is read and hashed in DuckDB
        from validator.engines.local.engine import LocalEngine

        return LocalEngine()
    if plan.lake_source is not None:
        from validator.engines.hybrid.engine import HybridEngine

        return HybridEngine(_session(spark))
    from validator.engines.spark.engine import SparkEngine

    return SparkEngine(_session(spark))


def _as_planned(result: ComparisonResult, plan: ComparisonPlan) -> ComparisonResult:
    """``result`` with why its engine ran; a run asked to keep validation state whose engine
    keeps none is full, and its coverage says why."""
    coverage, why = result.coverage, plan.not_incremental
    if coverage is None and why is not None:
        coverage = stateless_coverage(result.source_position, result.leaves_compared, why)
    return replace(result, engine_reason=plan.engine_reason, coverage=coverage)


def _refuse_unexplained(result: ComparisonResult) -> ComparisonResult:
    """A row whose hashes differ while every compared column reads back equal means the
    two sides' readers disagree on a value (the hash SQL and the driver, say): no verdict
    can rest on it, so the comparison could not be validated (exit 2), naming the key."""
    unexplained = [d.key for d in result.differences if isinstance(d, Changed) and not d.columns]
    if not unexplained or result.status is Status.ERROR:
        return result
    error = (
        f"{len(unexplained)} key(s) hash differently on the two sides while every compared"
        f" column reads back equal (first: {list(unexplained[0])}): the readers of"
        f" {result.source} and {result.target} disagree on a value, so neither in_sync nor"
        " differences can be trusted; this is a replcheck bug: please report it with the"
        " compared columns' types (exclude a column by name meanwhile to find it)"
    )
    log.error("comparison %s: %s", result.name, error)
    return replace(result, status=Status.ERROR, error=error)


def _confirm_live(
    result: ComparisonResult, plan: ComparisonPlan, settings: ValidationSettings
) -> ComparisonResult:
    """Set a live target's in-flight differences apart, as its feed allows
    (``validator.replicas``)."""
    reflected = plan.reflected
    assert reflected.target is not None
    layout = reflected.reconciled.layout
    target_names = tuple(reflected.reconciled.target_names[n] for n in layout.names)
    sides = (
        LiveTable(reflected.source, reflected.source_schema, layout.names, reflected.key),
        LiveTable(*reflected.target, target_names, reflected.target_key),
    )
    connection = reflected.target_connection
    return confirm_live(result, reflected.comparison, settings, layout, sides, connection)


def _lake_table(config: ValidatorConfig, comparison: ComparisonConfig) -> LakeTable | None:
    """The comparison's target table when it is a lake's."""
    lake = config.connections[comparison.target.connection].lake
    return LakeTable(lake, comparison.target.table) if lake is not None else None


def _failed(comparison: ComparisonConfig, exc: Exception) -> ComparisonResult:
    return ComparisonResult(
        name=comparison.name,
        status=Status.ERROR,
        source=comparison.source_label,
        target=comparison.target_label,
        error=str(exc),
    )


def validate(
    spark: Spark,
    config: ValidatorConfig,
    names: Sequence[str] = (),
    masker: KeyMasker | None = None,
) -> dict[str, Any]:
    """Run the comparisons (all, or those named) and return the run's result document.

    Args:
        spark: The Spark session, or a callable that starts it (``LazySparkSession``), called
            only when a comparison runs in Spark; None runs without Spark (the ``database``
            and ``local`` engines), a comparison that needs it is an error result.
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
            compare = functools.partial(run_comparison, spark, config, comparison, masker)
            results.append(through_reloads(compare, _lake_table(config, comparison)))
        except SparkUnreachableError:
            raise  # every comparison that needs Spark would fail alike: the run stops
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
