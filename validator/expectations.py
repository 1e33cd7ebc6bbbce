"""Data-quality expectations on a comparison's target, checked with Great Expectations 1.x.

The suite declared in a comparison's ``expectations`` (``validator.config``) becomes GX
expectation classes and runs through GX's Spark datasource on the DataFrame the validator
already built for the target (the lake as of the agreed position, or a live table), in the
run's own Spark session. GX computes every metric; this module only maps configuration to
GX classes and GX's results to ``validator.result.ExpectationResult``.

This is the only module that imports ``great_expectations``, and only inside
:func:`evaluate_expectations`: the import costs seconds (DESIGN.md, platform notes), so runs
that declare no suites never pay it.

Sensitive columns: GX collects a few unexpected values of every failed column expectation;
for a sensitive column they are replaced by ``MASK`` (and GX's error text is withheld,
since Spark errors may quote a value) before anything leaves this module.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cdc_core.drivers import driver_import
from cdc_core.errors import ConfigError, TerminalError
from validator.config import ExpectationConfig
from validator.result import MASK, ExpectationResult

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

SAMPLE_SIZE = 5  # unexpected values GX collects per failed column expectation
MAX_ERROR_CHARS = 300
_INDEX = "replcheck_index"  # meta key that maps GX's results back to our plan


@dataclass(frozen=True, slots=True)
class TargetFacts:
    """What a comparison's expectations need besides the target's rows.

    Attributes:
        comparison: The comparison's name.
        table: The target table, as shown in messages.
        key: The comparison's key columns, named as in the target.
        source_rows: Rows the source had at the agreed position (``row_count`` compares).
        sensitive: Target columns whose values must never be reported.
    """

    comparison: str
    table: str
    key: tuple[str, ...]
    source_rows: int
    sensitive: frozenset[str]


@dataclass(frozen=True, slots=True)
class _Planned:
    """One GX expectation to run, and how to report it."""

    kind: str
    columns: tuple[str, ...]
    description: str
    expectation: Any  # a great_expectations.expectations.Expectation


def check_columns(
    expectations: Sequence[ExpectationConfig], columns: Sequence[str], table: str
) -> None:
    """Fail before any Spark job when an expectation names a column the target lacks.

    Raises:
        ConfigError: naming the expectation's place in the config, the column and the
            target's columns.
    """
    known = set(columns)
    for expectation in expectations:
        if expectation.column is not None and expectation.column not in known:
            raise ConfigError(
                f"{expectation.where}: column {expectation.column!r} does not exist in the "
                f"target {table}; its columns are: {', '.join(columns)} "
                "(expectations name target columns)",
                {"table": table, "expectation": expectation.kind},
            )


def evaluate_expectations(
    frame: DataFrame, expectations: Sequence[ExpectationConfig], facts: TargetFacts
) -> tuple[ExpectationResult, ...]:
    """Check ``expectations`` on the target's rows in one GX validation.

    Args:
        frame: The target as materialised at the agreed position (target column names).
        expectations: The comparison's suite, in config order.
        facts: The comparison's key, source row count and sensitive columns.

    Returns:
        One result per GX expectation, in config order (``key_not_null_unique`` gives one
        per key column plus one for uniqueness).

    Raises:
        TerminalError: Great Expectations is not installed or could not run the suite.
    """
    gx = _import_gx()
    batch = _batch(gx, frame, facts.comparison)  # first: a suite needs an active GX context
    plans = [plan for e in expectations for plan in _plan(gx.expectations, e, facts)]
    suite = gx.ExpectationSuite(name=f"replcheck:{facts.comparison}")
    slots = _add_to_suite(suite, plans)
    try:
        validation = batch.validate(
            suite,
            result_format={"result_format": "SUMMARY", "partial_unexpected_count": SAMPLE_SIZE},
        )
    except Exception as exc:  # GX wraps Spark; a failure here means the suite did not run
        raise TerminalError(
            f"Great Expectations could not check the suite of comparison {facts.comparison}: "
            f"{type(exc).__name__}",
            {"table": facts.table},
        ) from exc
    # GX returns results in its own order; the meta index set on each one maps them back.
    found = {r.expectation_config.meta[_INDEX]: r for r in validation.results}
    return tuple(_to_result(p, found[slot], facts) for p, slot in zip(plans, slots, strict=True))


def _add_to_suite(suite: Any, plans: Sequence[_Planned]) -> list[int]:
    """Add each plan's expectation to ``suite``; return the result slot of each plan.

    A GX suite is set-like: it silently drops an expectation equal to one it holds (e.g.
    ``tolerance: 2%`` and ``tolerance: 4`` of 200 rows), so equal plans share one slot.
    """
    slots: dict[str, int] = {}
    placed = []
    for plan in plans:
        configuration = plan.expectation.configuration
        settings = [configuration.type, configuration.kwargs]
        identity = json.dumps(settings, sort_keys=True, default=str)
        if identity not in slots:
            slots[identity] = len(slots)
            plan.expectation.meta = {_INDEX: slots[identity]}
            suite.add_expectation(plan.expectation)
        placed.append(slots[identity])
    return placed


def _import_gx() -> Any:
    # GX 1.x sends usage statistics unless told not to; replcheck runs offline.
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    with driver_import("comparison expectations"):
        import great_expectations as gx
    return gx


def _batch(gx: Any, frame: DataFrame, comparison: str) -> Any:
    """A GX batch over ``frame``, in an ephemeral context (nothing is written to disk)."""
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    # GX draws tqdm bars on stderr for every metric; the CLI prints its own progress.
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    # persist=False: GX would cache the frame and never release it; the caller does.
    source = context.data_sources.add_spark(name="replcheck", persist=False)
    asset = source.add_dataframe_asset(name=comparison)
    definition = asset.add_batch_definition_whole_dataframe("at_agreed_position")
    return definition.get_batch(batch_parameters={"dataframe": frame})


# -- configuration -> GX expectation classes -------------------------------------------------


def _plan(classes: Any, expectation: ExpectationConfig, facts: TargetFacts) -> Iterator[_Planned]:
    """The GX expectation(s) for one configured expectation."""
    if expectation.kind == "key_not_null_unique":
        yield from _plan_key(classes, facts.key)
        return
    if expectation.kind == "row_count":
        low, high = expectation.row_count_range(facts.source_rows)
        description = (
            f"row count {low:,}..{high:,} (source {facts.source_rows:,} rows, "
            f"tolerance {_tolerance(expectation)})"
        )
        gx_class = classes.ExpectTableRowCountToBeBetween
        yield _Planned("row_count", (), description, gx_class(min_value=low, max_value=high))
        return
    column = expectation.column
    assert column is not None  # ExpectationConfig guarantees a column for column kinds
    gx_class, arguments, description = _COLUMN_KINDS[expectation.kind](classes, expectation)
    if expectation.mostly < 1:
        description += f" (at least {expectation.mostly:.0%} of rows)"
    built = gx_class(column=column, mostly=expectation.mostly, **arguments)
    yield _Planned(expectation.kind, (column,), description, built)


def _plan_key(classes: Any, key: tuple[str, ...]) -> Iterator[_Planned]:
    for column in key:
        built = classes.ExpectColumnValuesToNotBeNull(column=column)
        yield _Planned("key_not_null_unique", (column,), f"key column {column} not null", built)
    if len(key) == 1:
        unique = classes.ExpectColumnValuesToBeUnique(column=key[0])
    else:
        unique = classes.ExpectCompoundColumnsToBeUnique(column_list=list(key))
    yield _Planned("key_not_null_unique", key, f"key ({', '.join(key)}) unique", unique)


ColumnKind = Callable[[Any, ExpectationConfig], tuple[Any, dict[str, Any], str]]


def _not_null(classes: Any, e: ExpectationConfig) -> tuple[Any, dict[str, Any], str]:
    return classes.ExpectColumnValuesToNotBeNull, {}, f"{e.column} not null"


def _unique(classes: Any, e: ExpectationConfig) -> tuple[Any, dict[str, Any], str]:
    return classes.ExpectColumnValuesToBeUnique, {}, f"{e.column} unique"


def _between(classes: Any, e: ExpectationConfig) -> tuple[Any, dict[str, Any], str]:
    limits = {"min_value": e.min_value, "max_value": e.max_value}
    if e.max_value is None:
        description = f"{e.column} at least {e.min_value}"
    elif e.min_value is None:
        description = f"{e.column} at most {e.max_value}"
    else:
        description = f"{e.column} between {e.min_value} and {e.max_value}"
    return classes.ExpectColumnValuesToBeBetween, limits, description


def _in_set(classes: Any, e: ExpectationConfig) -> tuple[Any, dict[str, Any], str]:
    shown = ", ".join(str(v) for v in e.values)
    arguments = {"value_set": list(e.values)}
    return classes.ExpectColumnValuesToBeInSet, arguments, f"{e.column} in {{{shown}}}"


def _regex(classes: Any, e: ExpectationConfig) -> tuple[Any, dict[str, Any], str]:
    arguments = {"regex": e.pattern}
    return classes.ExpectColumnValuesToMatchRegex, arguments, f"{e.column} matches {e.pattern}"


_COLUMN_KINDS: Mapping[str, ColumnKind] = {
    "not_null": _not_null,
    "unique": _unique,
    "between": _between,
    "in_set": _in_set,
    "regex": _regex,
}


def _tolerance(expectation: ExpectationConfig) -> str:
    amount = f"{expectation.tolerance:g}"
    return f"{amount}%" if expectation.tolerance_percent else f"{amount} rows"


# -- GX results -> ExpectationResult --------------------------------------------------------


def _to_result(plan: _Planned, gx_result: Any, facts: TargetFacts) -> ExpectationResult:
    hidden = any(column in facts.sensitive for column in plan.columns)
    details: Mapping[str, Any] = gx_result.result or {}
    error = _error_text(gx_result.exception_info, hidden)
    observed = details.get("observed_value")
    percent = details.get("unexpected_percent")
    return ExpectationResult(
        kind=plan.kind,
        expectation=gx_result.expectation_config.type,
        columns=plan.columns,
        description=plan.description,
        success=bool(gx_result.success) and error is None,
        observed_value=None if observed is None else str(observed),
        element_count=details.get("element_count"),
        unexpected_count=details.get("unexpected_count"),
        unexpected_percent=None if percent is None else round(float(percent), 4),
        unexpected_sample=_sample(details.get("partial_unexpected_list") or [], hidden),
        error=error,
    )


def _sample(values: Sequence[Any], hidden: bool) -> tuple[str | None, ...]:
    """Distinct unexpected values as display text, in GX's order; masked when sensitive."""
    shown = (_display(value) for value in values)
    if hidden:  # a NULL stays visible: it is no value
        shown = (None if value is None else MASK for value in shown)
    return tuple(dict.fromkeys(shown))


def _display(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, Mapping):  # compound key: one value per column
        return ", ".join("NULL" if v is None else str(v) for v in value.values())
    return str(value)


def _error_text(info: Any, hidden: bool) -> str | None:
    """GX's exception message, if evaluating the expectation raised one."""
    # GX 1.x gives either one {"raised_exception", "exception_message", ...} mapping or one
    # such mapping per metric that failed.
    infos = [info] if isinstance(info, Mapping) and "raised_exception" in info else []
    if isinstance(info, Mapping) and not infos:
        infos = [v for v in info.values() if isinstance(v, Mapping)]
    raised = [i for i in infos if i.get("raised_exception")]
    if not raised:
        return None
    if hidden:
        return "evaluation failed (message withheld: the column is sensitive)"
    message = str(raised[0].get("exception_message") or "evaluation failed")
    return message[:MAX_ERROR_CHARS]
