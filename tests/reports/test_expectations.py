"""Data-quality expectations in result.json and its renderings: schema, HTML, Markdown,
JUnit; failed expectations fail, sensitive samples stay masked, hostile text stays text."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from reports.html import build_html_report
from reports.json_schema import ResultSchemaError, validate_result
from reports.junit import build_junit
from reports.markdown import build_markdown
from reports.model import describe_expectations, describe_observed
from tests.reports.sample import make_comparison, wrap
from validator.result import (
    MASK,
    ComparisonResult,
    ExpectationResult,
    Status,
    to_dict,
    with_expectations,
)

HOSTILE = '"><img src=x onerror=alert(1)><script>alert(2)</script>'


def expectation(description: str, success: bool, **fields: Any) -> dict[str, Any]:
    """An expectation entry as ``validator.result.to_dict`` writes it."""
    entry: dict[str, Any] = {
        "kind": "unique",
        "expectation": "expect_column_values_to_be_unique",
        "columns": ["sku"],
        "description": description,
        "success": success,
        "observed_value": None,
        "element_count": 2000,
        "unexpected_count": 0 if success else 3,
        "unexpected_percent": 0.0 if success else 0.15,
        "unexpected_sample": [] if success else ["SKU-1", None],
        "error": None,
    }
    return {**entry, **fields}


def row_count(success: bool) -> dict[str, Any]:
    return expectation(
        "row count 1,990..2,010 (source 2,000 rows, tolerance 0.5%)",
        success,
        kind="row_count",
        expectation="expect_table_row_count_to_be_between",
        columns=[],
        observed_value="2000" if success else "1985",
        element_count=None,
        unexpected_count=None,
        unexpected_percent=None,
        unexpected_sample=[],
    )


def failing_comparison() -> dict[str, Any]:
    """In sync row by row, but 2 of 3 expectations failed (one on a sensitive column)."""
    comparison = make_comparison("items")
    comparison["status"] = "differences"
    comparison["expectations"] = [
        expectation("sku unique", False),
        expectation(
            "email matches ^[^@]+@[^@]+$",
            False,
            kind="regex",
            expectation="expect_column_values_to_match_regex",
            columns=["email"],
            unexpected_sample=[MASK],
        ),
        row_count(True),
    ]
    return comparison


def test_results_with_expectations_match_the_schema() -> None:
    passing = make_comparison("passing")
    passing["expectations"] = [expectation("sku unique", True), row_count(True)]
    validate_result(wrap([passing, failing_comparison()]))


def test_the_validators_own_serialisation_matches_the_schema() -> None:
    checked = (
        ExpectationResult(
            "between",
            "expect_column_values_to_be_between",
            ("price",),
            "price between 0 and 1000",
            False,
            element_count=200,
            unexpected_count=1,
            unexpected_percent=0.5,
            unexpected_sample=("5000.00",),
        ),
        ExpectationResult("row_count", "expect_table_row_count_to_be_between", (), "rows", True),
    )
    in_sync = ComparisonResult("items", Status.IN_SYNC, "src:items", "lake:shop.items")
    result = with_expectations(in_sync, checked, 1.25)
    assert result.status is Status.DIFFERENCES and result.expectations_failed == 1
    assert result.timings == {"expectations": 1.25}
    validate_result(json.loads(json.dumps(wrap([to_dict(result)]))))


def test_passing_expectations_leave_an_in_sync_comparison_in_sync() -> None:
    checked = (ExpectationResult("unique", "expect_column_values_to_be_unique", (), "u", True),)
    in_sync = ComparisonResult("items", Status.IN_SYNC, "a", "b")
    assert with_expectations(in_sync, checked, 0.5).status is Status.IN_SYNC


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (["status"], "in_sync", "$.comparisons[0].status"),  # a failed expectation fails
        (["expectations", 0, "verdict"], "ok", "$.comparisons[0].expectations[0].verdict"),
        (["expectations", 0, "kind"], "fresh", "$.comparisons[0].expectations[0].kind"),
        (["expectations", 0, "success"], "no", "$.comparisons[0].expectations[0].success"),
        (
            ["expectations", 0, "unexpected_percent"],
            150.0,
            "$.comparisons[0].expectations[0].unexpected_percent",
        ),
        (
            ["expectations", 0, "expectation"],
            "ExpectColumnValuesToBeUnique",
            "$.comparisons[0].expectations[0].expectation",
        ),
    ],
)
def test_a_wrong_expectation_entry_is_named(path: list[Any], value: Any, expected: str) -> None:
    comparison = failing_comparison()
    target: Any = comparison
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    with pytest.raises(ResultSchemaError) as caught:
        validate_result(wrap([comparison]))
    assert caught.value.path == expected


def test_observed_values_in_words() -> None:
    failed, _, passed_count = failing_comparison()["expectations"]
    assert describe_observed(failed) == "3 of 2,000 rows unexpected (0.15%)"
    assert describe_observed(passed_count) == "observed 2,000 rows"
    assert describe_observed({**failed, "error": "column gone"}) == (
        "could not be evaluated: column gone"
    )
    assert describe_expectations(failing_comparison()) == "2 of 3 expectations failed"
    assert describe_expectations(make_comparison("none")) == ""


def test_html_lists_each_expectation_with_its_outcome_and_masks_sensitive_samples() -> None:
    html = build_html_report(wrap([failing_comparison()]))
    section = html.split("<h3>Expectations")[1].split("</table>")[0]
    assert "2 of 3 expectations failed" in section
    rows = section.split("<tr class=")[1:]
    assert [row.split(">")[0] for row in rows] == ['"failed"', '"failed"', '"passed"']
    assert "sku unique" in rows[0] and "3 of 2,000 rows unexpected (0.15%)" in rows[0]
    assert '<span class="v">SKU-1</span>' in rows[0] and '<span class="null">NULL</span>' in rows[0]
    assert '<span class="masked" title="sensitive column: value hidden">***</span>' in rows[1]
    assert "observed 2,000 rows" in rows[2]
    assert 'id="expectations-card"><b>2</b>of 3 expectations failed' in html
    assert "<svg" not in html.split('id="c0"')[1]  # no heat map: every row matched


def test_html_escapes_hostile_expectation_text() -> None:
    comparison = failing_comparison()
    comparison["expectations"][0]["description"] = HOSTILE
    comparison["expectations"][0]["unexpected_sample"] = [HOSTILE]
    html = build_html_report(wrap([comparison]))
    assert "<script>alert(2)" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in html


def test_html_without_expectations_has_no_section() -> None:
    html = build_html_report(wrap([make_comparison("items", 2)]))
    assert "<h3>Expectations" not in html and "expectations-card" not in html


def test_markdown_counts_and_lists_failed_expectations() -> None:
    comparison = failing_comparison()
    comparison["expectations"][0]["unexpected_sample"] = ["a|b", None]
    markdown = build_markdown(wrap([comparison]))
    assert "| 0 (none); 2 of 3 expectations failed |" in markdown
    lines = [line for line in markdown.splitlines() if line.startswith("- expectation failed")]
    assert lines == [
        "- expectation failed: sku unique: 3 of 2,000 rows unexpected (0.15%), e.g. a\\|b, NULL",
        "- expectation failed: email matches ^\\[^@\\]+@\\[^@\\]+$: "
        "3 of 2,000 rows unexpected (0.15%), e.g. \\*\\*\\*",
    ]


def test_junit_fails_a_comparison_whose_expectations_failed() -> None:
    passing = make_comparison("passing")
    passing["expectations"] = [row_count(True)]
    root = ET.fromstring(build_junit(wrap([failing_comparison(), passing])))
    suite = root.find("testsuite")
    assert suite is not None and suite.get("failures") == "1"
    failure = suite.find("testcase[@name='items']/failure")
    assert failure is not None
    assert failure.get("message") == "0 differences; 2 of 3 expectations failed"
    assert failure.text is not None
    assert "expectation failed: sku unique: 3 of 2,000 rows unexpected (0.15%)" in failure.text
    assert "SKU-1" not in failure.text  # samples stay in the HTML, where they are masked
    assert suite.find("testcase[@name='passing']/failure") is None
