"""A run's coverage (full or incremental, and what it proves) in result.json and every
report."""

from __future__ import annotations

from reports.html import build_html_report
from reports.json_schema import validate_result
from reports.junit import build_junit
from reports.markdown import build_markdown
from tests.reports.sample import make_comparison, wrap
from validator.incremental.guarantee import full_coverage, incremental_coverage
from validator.result import to_dict

LINE = "incremental 100 → 250: 12 changed leaves, 410 swept, 3,674 reused"


def _result() -> dict[str, object]:
    incremental = make_comparison("orders", 2)
    incremental["coverage"] = to_dict(incremental_coverage(("100", "250"), 12, 410, 3674, (10, 7)))
    full = make_comparison("items")
    full["coverage"] = to_dict(full_coverage("250", 4096, "first run: no validation state"))
    return wrap([incremental, full, make_comparison("events")])


def test_the_coverage_is_in_the_schema_and_every_report() -> None:
    result = _result()
    validate_result(result)
    markdown = build_markdown(result)
    assert f"- orders: {LINE}" in markdown
    assert "- items: full run: every leaf re-hashed (first run: no validation state)" in markdown
    assert "- events" not in markdown  # no state kept: no coverage line
    junit = build_junit(result)
    assert f"coverage: {LINE}" in junit
    html = build_html_report(result)
    assert LINE in html
    assert "cannot see, until its leaf is swept" in html


def test_the_guarantee_states_the_promise() -> None:
    coverage = incremental_coverage(("100", "250"), 12, 410, 3674, (10, 7))
    assert "proves the pipeline's changes since 100 are correct" in coverage.guarantee
    assert "a change made at the source without a log record" in coverage.guarantee
    assert "swept within 10 incremental runs (7 more" in coverage.guarantee
