"""JUnit XML: one suite, one case per comparison, failures and errors counted and escaped."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from reports.junit import build_junit
from tests.reports.sample import make_comparison, make_error, make_result, wrap


def parse(result: dict[str, Any]) -> ET.Element:
    return ET.fromstring(build_junit(result))


def test_one_suite_with_one_case_per_comparison() -> None:
    root = parse(make_result(3, differences=5, errors=2))
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["replcheck"]
    suite = suites[0]
    assert {k: suite.get(k) for k in ("tests", "failures", "errors", "skipped")} == {
        "tests": "5",
        "failures": "3",
        "errors": "2",
        "skipped": "0",
    }
    cases = suite.findall("testcase")
    assert [c.get("classname") for c in cases] == [
        "replcheck.table_00",
        "replcheck.table_01",
        "replcheck.table_02",
        "replcheck.broken_00",
        "replcheck.broken_01",
    ]
    assert len(suite.findall("testcase/failure")) == 3
    assert len(suite.findall("testcase/error")) == 2


def test_a_failure_message_counts_differences_by_kind() -> None:
    case = parse(wrap([make_comparison("orders", 6)])).find("testsuite/testcase")
    assert case is not None
    failure = case.find("failure")
    assert failure is not None
    assert failure.get("message") == (
        "6 differences (missing in target 2, extra in target 1, changed 2, duplicate key 1);"
        " changed columns: amount, note"
    )
    assert (
        failure.text is not None
        and "changed: 1000, region-0 (columns amount, note)" in failure.text
    )
    assert case.get("time") == "2.125"


def test_an_in_sync_comparison_passes() -> None:
    case = parse(make_result(1)).find("testsuite/testcase")
    assert case is not None and list(case) == []


def test_an_error_carries_its_message() -> None:
    error = parse(wrap([make_error("gone", "no such table")])).find("testsuite/testcase/error")
    assert error is not None and error.get("message") == "no such table"


def test_hostile_text_is_escaped_and_stays_parseable() -> None:
    hostile = "a<b>&\"c'\n]]>\x1b\x00"
    comparison = make_comparison(hostile, 1)
    comparison["differences"][0]["key"] = [hostile]
    root = parse(wrap([comparison, make_error("e", hostile)]))
    cases = root.findall("testsuite/testcase")
    shown = "a<b>&\"c'\n]]>\\u001b\\u0000"  # control characters visible, as in every report
    assert cases[0].get("name") == shown
    assert cases[0].get("classname") == f"replcheck.{shown}"
    error = cases[1].find("error")
    assert error is not None and error.get("message") == shown.split("\n")[0]
    assert error.text is not None and error.text.startswith(shown)


def test_a_failure_names_the_changed_columns_never_their_values() -> None:
    """Issue 38, item 6: a changed row said which key, not which columns."""
    comparison = make_comparison("orders", 5)
    comparison["differences"][4]["columns"] = [
        {"column": "pin", "source": "***", "target": "***"},
        {"column": "amount", "source": "4.50", "target": "4.05"},
    ]
    failure = parse(wrap([comparison])).find("testsuite/testcase/failure")
    assert failure is not None and failure.text is not None
    message = failure.get("message")
    assert message is not None and message.endswith("; changed columns: amount, note, pin")
    assert "changed: 1000, region-0 (columns amount, note)" in failure.text.splitlines()
    assert "changed: 1004, NULL (columns pin, amount)" in failure.text.splitlines()
    assert "***" not in failure.text and "4.50" not in failure.text + message


def test_an_error_keeps_its_line_breaks_as_real_newlines() -> None:
    """Issue 38, item 6: the error was an attribute, so its newline showed as ``&#10;``."""
    message = "could not read shop.orders:\nconnection reset\n  at line 2"
    xml = build_junit(wrap([make_error("orders", message)]))
    assert "&#10;" not in xml
    error = ET.fromstring(xml).find("testsuite/testcase/error")
    assert error is not None and error.text is not None
    assert error.get("message") == "could not read shop.orders:"
    assert error.text.startswith(message + "\n")
