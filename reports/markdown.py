"""A Markdown summary for a pull-request comment or a CI step summary.

A status line, one table row per comparison, and for each comparison with differences its
failed data-quality expectations and first differing keys. Values are escaped so a ``|``, a
newline or Markdown syntax in a key can never break the table or turn into markup.
"""

from __future__ import annotations

import re
from typing import Any

from reports import model
from reports.visible import visible

DEFAULT_MAX_ROWS = 20
_ICONS = {"in_sync": "✅", "differences": "⚠️", "error": "❌"}
# Characters with a meaning in (GitHub-flavoured) Markdown or inline HTML.
_SPECIAL = re.compile(r"([\\`*_\[\]<>|~&#])")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def build_markdown(result: dict[str, Any], max_rows: int = DEFAULT_MAX_ROWS) -> str:
    """Render a validation result as a Markdown summary.

    Args:
        result: A ``result.json`` document (see :func:`reports.model.read_result`).
        max_rows: Differing keys listed per comparison with differences.

    Returns:
        The Markdown text.
    """
    lines = [_status_line(result), ""]
    if result["comparisons"]:
        lines += _table(result["comparisons"])
    lines += _coverage(result["comparisons"])
    for comparison in result["comparisons"]:
        lines += _details(comparison, max_rows)
    return "\n".join(lines) + "\n"


def _coverage(comparisons: list[dict[str, Any]]) -> list[str]:
    """A line per comparison that keeps validation state: what its run re-hashed."""
    lines = []
    for c in comparisons:
        coverage = model.describe_coverage(c)
        if coverage:
            lines.append(f"- {escape(c['name'])}: {escape(coverage)}")
    return ["", *lines] if lines else []


def escape(text: str) -> str:
    """``text`` as literal Markdown on one line, safe inside a table cell, every hidden or
    direction-changing character shown as its code point."""
    return _SPECIAL.sub(r"\\\1", visible(_LINE_BREAK.sub(" ", text)))


def _status_line(result: dict[str, Any]) -> str:
    counts = model.status_counts(result)
    parts = [f"{escape(s)} {counts[s]}" for s in model.STATUSES if counts[s]]
    status = result["status"]
    return (
        f"{_ICONS[status]} **replcheck: {escape(status)}** — "
        f"{_plural(len(result['comparisons']), 'comparison')} ({', '.join(parts) or 'none'}), "
        f"finished {escape(result['finished'])} in {result['duration_s']:.1f} s"
    )


def _plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}" + ("" if count == 1 else "s")


def _table(comparisons: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| Comparison | Status | Source rows | Target rows | Differences |",
        "|---|---|--:|--:|---|",
    ]
    for c in comparisons:
        differences = (
            "error: " + escape(c["error"] or "could not run")
            if c["status"] == "error"
            else f"{model.total_differences(c):,} ({model.describe_differences(c)})"
        )
        if model.expectations(c):
            differences += f"; {model.describe_expectations(c)}"
        lines.append(
            f"| {escape(c['name'])} | {_ICONS[c['status']]} {escape(c['status'])} "
            f"| {_rows(c, 'source')} | {_rows(c, 'target')} | {differences} |"
        )
    return lines


def _rows(comparison: dict[str, Any], side: str) -> str:
    """A side's row count, or why there is none (a comparison its error stopped)."""
    return f"{comparison[f'{side}_rows']:,}" if model.compared(comparison) else "not compared"


def _details(comparison: dict[str, Any], max_rows: int) -> list[str]:
    findings = [f"- {escape(line)}" for line in model.lake_findings(comparison)]
    if comparison["status"] != "differences":
        return ["", f"**{escape(comparison['name'])}**", "", *findings] if findings else []
    lines = ["", f"**{escape(comparison['name'])}**", "", *findings]
    schemas = comparison["schema_differences"]
    lines += [f"- {escape(model.describe_schema_difference(s))}" for s in schemas]
    lines += [_failed_expectation(e) for e in model.failed_expectations(comparison)]
    shown = comparison["differences"][:max_rows]
    lines += [f"- {model.KIND_LABELS[d['kind']]}: {_describe(d)}" for d in shown]
    omitted = model.omitted_count(comparison, len(shown))
    if omitted > 0:
        lines.append(f"- … and {omitted:,} more")
    return lines


def _failed_expectation(expectation: dict[str, Any]) -> str:
    line = f"- expectation failed: {escape(expectation['description'])}: "
    line += escape(model.describe_observed(expectation))
    sample = expectation["unexpected_sample"]
    if sample:
        values = (model.NULL_TEXT if v is None else v for v in sample)
        line += ", e.g. " + ", ".join(escape(v) for v in values)
    return line


def _describe(difference: dict[str, Any]) -> str:
    key = escape(model.format_key(difference["key"]))
    if difference["kind"] == "changed" and difference["columns"]:
        columns = ", ".join(escape(c["column"]) for c in difference["columns"])
        return f"{key} (columns {columns})"
    if difference["kind"] == "duplicate_key":
        return f"{key} ({difference['count']} rows in {difference['side']})"
    if difference.get("rows", 1) > 1:  # equal rows of a table without a key
        return f"{key} ({difference['rows']} rows)"
    return key
