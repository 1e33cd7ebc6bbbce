"""Every report shows a schema difference as a difference, by kind, in the words of a row's;
a result written before schema differences had a kind still renders."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from reports import model
from reports.html import build_html_report
from reports.json_schema import load_schema, validate_result
from reports.junit import build_junit
from reports.markdown import build_markdown
from tests.reports.sample import make_comparison, wrap
from validator import cli
from validator.result import SCHEMA_KINDS

GONE = {"column": "note", "problem": "missing in target", "kind": "missing_in_target"}
NEW = {"column": "loaded_at", "problem": "extra in target", "kind": "extra_in_target"}
ODD = {
    "column": "flag",
    "problem": "incompatible types integer (source) and boolean (target)",
    "kind": "changed",
}


def schema_drifted(*schema_differences: dict[str, str]) -> dict[str, Any]:
    """A run of one comparison whose rows all match and whose columns do not."""
    comparison = make_comparison("orders")
    comparison.update(status="differences", schema_differences=list(schema_differences))
    return wrap([comparison])


def test_the_kinds_are_one_list_in_the_schema_the_model_and_the_reports() -> None:
    item = load_schema()["$defs"]["comparison"]["properties"]["schema_differences"]["items"]
    assert tuple(item["properties"]["kind"]["enum"]) == SCHEMA_KINDS == model.SCHEMA_KINDS


def test_the_html_report_counts_and_lists_schema_differences_by_kind() -> None:
    html = build_html_report(schema_drifted(GONE, NEW, ODD))
    cards = {label: value for value, label in re.findall(r"<b>([\d,]+)</b>([\w ]+)</div>", html)}
    assert (cards["differences"], cards["differences in total"]) == ("1", "3")
    assert "3 differences" in html  # the comparison's summary line
    counts = "column missing in target 1, column extra in target 1, column changed 1"
    assert f"<dd>3: {counts}</dd>" in html
    assert "<tr><td>column missing in target</td><td><code>note</code></td><td></td></tr>" in html
    assert (
        "<tr><td>column changed</td><td><code>flag</code></td>"
        f"<td>{ODD['problem']}</td></tr>" in html
    )
    by_kind = re.search(r'<p id="totals-by-kind">(.*?)</p>', html, re.S)
    assert by_kind is not None
    assert " ".join(re.sub(r"<[^>]+>", "", by_kind.group(1)).split()) == (
        "By kind: column missing in target 1 · column extra in target 1 · column changed 1"
    )


def test_the_markdown_summary_counts_and_lists_schema_differences_by_kind() -> None:
    markdown = build_markdown(schema_drifted(GONE, ODD))
    assert "| 10,000 | 10,000 | 2 (column missing in target 1, column changed 1) |" in markdown
    assert "- column missing in target: note\n" in markdown
    assert f"- column changed: flag ({ODD['problem']})\n" in markdown


def test_the_junit_failure_counts_and_lists_schema_differences_by_kind() -> None:
    junit = build_junit(schema_drifted(NEW))
    assert 'failures="1"' in junit
    assert 'message="1 difference (column extra in target 1)"' in junit
    assert "\ncolumn extra in target: loaded_at</failure>" in junit


def test_a_result_written_before_schema_differences_had_a_kind_still_renders(
    tmp_path: Path,
) -> None:
    old = schema_drifted(*({k: v for k, v in d.items() if k != "kind"} for d in (GONE, NEW)))
    old["comparisons"][0]["status"] = "in_sync"  # as such runs were judged
    validate_result(old)
    path, markdown = tmp_path / "result.json", tmp_path / "summary.md"
    path.write_text(json.dumps(old))
    assert cli.run(["report", str(path), "--markdown", str(markdown)]) == cli.EXIT_OK
    text = markdown.read_text()
    assert "| 2 (column missing in target 1, column extra in target 1) |" in text
    assert model.schema_kind({"column": "flag", "problem": ODD["problem"]}) == "changed"
