"""The HTML discrepancy report: one self-contained file rendered from ``result.json``.

Everything the page needs (CSS, the search script, SVG charts) is inline and nothing is
fetched, so the file can be mailed, archived as a CI artefact or opened offline. Jinja
autoescaping is on for every value: row values are attacker-controlled text.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

from jinja2 import Environment, FileSystemBytecodeCache, PackageLoader, StrictUndefined
from jinja2.bccache import Bucket
from markupsafe import Markup

from reports import model
from reports.heatmap import HeatMap, build_heatmap
from reports.history import Drift, classify
from reports.trend import Trend, build_trend
from reports.visible import visible

log = logging.getLogger(__name__)

DEFAULT_MAX_ROWS = 200
MAX_VALUE_CHARS = 500
TEMPLATE = "report.html.j2"
# Shown as the tooltip of each drift label.
DRIFT_TITLES = {
    Drift.NEW: "no differences in the run before, some now",
    Drift.GROWING: "more differences than in the run before",
    Drift.SHRINKING: "fewer differences than in the run before",
    Drift.STEADY: "as many differences as in the run before",
    Drift.RESOLVED: "differences in the run before, none now",
}


@dataclass(frozen=True, slots=True)
class ComparisonView:
    """What the template shows of one comparison.

    Attributes:
        anchor: HTML id of the comparison's section.
        data: The comparison as in ``result.json``.
        shown: The differences shown (at most ``max_rows``).
        omitted: Differences counted but not shown.
        heatmap: The leaf heat map, or None when no tree was compared.
        trend: Differences over past runs, or None without enough history.
        drift: How the differences moved since the run before, or None without one.
        resync: What a re-sync did or proposed for it (its entry in ``resync.json``).
    """

    anchor: str
    data: dict[str, Any]
    shown: Sequence[dict[str, Any]]
    omitted: int
    heatmap: HeatMap | None
    trend: Trend | None
    drift: Drift | None
    resync: dict[str, Any] | None = None


def build_html_report(
    result: dict[str, Any],
    history: list[dict[str, Any]] | None = None,
    *,
    max_rows: int = DEFAULT_MAX_ROWS,
    resync: dict[str, Any] | None = None,
) -> str:
    """Render a validation result as one self-contained HTML page.

    The result is not validated here (jsonschema needs seconds for tens of thousands of
    differences); check untrusted files with :func:`reports.model.read_result` first.

    Args:
        result: A ``result.json`` document.
        history: Past run summaries ``{"finished": ..., "comparisons": {name: total}}``,
            oldest first (see :func:`reports.history.to_trend_input`); each comparison
            known to them gets a trend line and a drift label (new, growing, ...).
        max_rows: Differences shown per comparison; a line counts the rest.
        resync: A ``resync.json`` document: each comparison it covers gets a section of
            the re-sync actions taken or proposed and what the re-validation found.

    Returns:
        The HTML text.
    """
    if max_rows < 0:
        raise ValueError("max_rows must be >= 0")
    resynced = {c["name"]: c for c in (resync or {}).get("comparisons", [])}
    views = [
        replace(_view(i, c, result, history or [], max_rows), resync=resynced.get(c["name"]))
        for i, c in enumerate(result["comparisons"])
    ]
    log.info("rendering HTML report of %d comparisons", len(views))
    script = _script()
    return (
        _environment()
        .get_template(TEMPLATE)
        .render(
            script=script,
            csp=content_security_policy(script),
            result=result,
            views=views,
            status_counts=model.status_counts(result),
            totals=_totals(result["comparisons"]),
            differences_total=sum(model.total_differences(c) for c in result["comparisons"]),
            expectations_checked=sum(len(model.expectations(c)) for c in result["comparisons"]),
            expectations_failed=sum(
                len(model.failed_expectations(c)) for c in result["comparisons"]
            ),
            positions=model.positions(result),
            model=model,
            drift_titles=DRIFT_TITLES,
            resync=resync,
            max_rows=max_rows,
        )
    )


def _totals(comparisons: Sequence[dict[str, Any]]) -> list[tuple[str, int]]:
    """Differences per kind over the run, labelled: rows first, then columns."""
    rows = model.totals_by_kind(comparisons)
    columns = model.schema_totals_by_kind(comparisons)
    return [(model.KIND_LABELS[kind], count) for kind, count in rows.items()] + [
        (model.SCHEMA_KIND_LABELS[kind], count) for kind, count in columns.items()
    ]


def _view(
    index: int,
    comparison: dict[str, Any],
    result: dict[str, Any],
    history: Sequence[dict[str, Any]],
    max_rows: int,
) -> ComparisonView:
    shown = comparison["differences"][:max_rows]
    # An in-sync map is all grey and a failed comparison may have no tree: draw drift only
    # (not a comparison drifted only by failed expectations: its rows matched).
    has_tree = (
        comparison["status"] == "differences"
        and comparison["leaves_compared"] > 0
        and bool(comparison["mismatched_leaves"])
    )
    trend = _trend(comparison, result, history)
    return ComparisonView(
        anchor=f"c{index}",
        data=comparison,
        shown=shown,
        omitted=model.omitted_count(comparison, len(shown)),
        heatmap=build_heatmap(comparison["depth"], comparison["mismatched_leaves"])
        if has_tree
        else None,
        trend=trend,
        drift=classify([count for _, count in trend.values]) if trend else None,
    )


def _trend(
    comparison: dict[str, Any], result: dict[str, Any], history: Sequence[dict[str, Any]]
) -> Trend | None:
    # A failed comparison counted nothing: drawing its 0 would read as "in sync".
    if not history or comparison["status"] == "error":
        return None
    current = (result["finished"], comparison["differences_total"])
    return build_trend(comparison["name"], current, history)


class _TemplateCache(FileSystemBytecodeCache):
    """Compiled templates kept between runs in jinja2's private temporary folder: compiling
    them took 0.2 s of every validate (a thirtieth of an incremental run at 10M rows). A
    cache that cannot be read or written is passed over: the report never depends on it."""

    def load_bytecode(self, bucket: Bucket) -> None:
        with contextlib.suppress(OSError):
            super().load_bytecode(bucket)

    def dump_bytecode(self, bucket: Bucket) -> None:
        with contextlib.suppress(OSError):
            super().dump_bytecode(bucket)


def _template_cache() -> _TemplateCache | None:
    """The cache, or None where jinja2 finds no safe private folder for it."""
    try:
        return _TemplateCache()
    except (OSError, RuntimeError):
        return None


@cache
def _environment() -> Environment:
    env = Environment(
        loader=PackageLoader("reports", "templates"),
        # Every template, whatever its file name: select_autoescape would skip "*.j2".
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_shown,
        bytecode_cache=_template_cache(),
    )
    env.filters.update(key=model.format_key, clip=clip, n=_number, seconds=format_seconds)
    env.filters["rows"] = model.rows
    return env


@cache
def _script() -> Markup:
    """The page's one inline script (search and filters)."""
    return Markup(_environment().get_template("report.js").render())


def content_security_policy(script: str) -> str:
    """The page loads nothing and runs only its own script: a policy that says so, with the
    script allowed by its hash (https://www.w3.org/TR/CSP3/#grammardef-hash-source), so no
    injected script, style sheet, image or connection could work even if escaping failed."""
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode()
    return (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:;"
        f" script-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"
    )


def _shown(value: Any) -> Any:
    """Every text a template prints, with hidden characters made visible (markup the
    templates build themselves is left alone)."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return visible(value)
    return value


def clip(value: str, limit: int = MAX_VALUE_CHARS) -> str:
    """``value`` cut to ``limit`` characters, saying how many were left out."""
    if len(value) <= limit:
        return value
    return f"{value[:limit]}… ({len(value) - limit:,} more characters)"


def _number(value: int) -> str:
    return f"{value:,}"


def format_seconds(value: float) -> str:
    """``"4.21 s"``, ``"3 min 7 s"`` or ``"2 h 5 min"``."""
    if value < 60:
        return f"{value:.2f} s"
    minutes, seconds = divmod(round(value), 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s"
    return f"{minutes // 60} h {minutes % 60} min"
