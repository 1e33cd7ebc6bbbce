"""The lake's self-consistency findings in every report, beside the comparison's verdict,
never instead of it."""

from __future__ import annotations

from typing import Any

from reports.html import build_html_report
from reports.json_schema import validate_result
from reports.junit import build_junit
from reports.markdown import build_markdown
from tests.reports.sample import make_result

DETAIL = "version 4 of the mirror of shop.orders (UPDATE, written by delta-rs:py-1.6.6)"


def _with_finding(status: str) -> dict[str, Any]:
    document = make_result(1, differences=3 if status == "differences" else 0)
    document["comparisons"][0]["lake_findings"] = [{"kind": "foreign_commit", "detail": DETAIL}]
    validate_result(document)
    assert document["status"] == status
    return document


def test_every_report_names_a_foreign_commit() -> None:
    for status in ("in_sync", "differences"):
        document = _with_finding(status)
        assert DETAIL in build_html_report(document)
        assert DETAIL in build_markdown(document)
        assert DETAIL in build_junit(document)


def test_a_result_written_before_the_check_existed_still_renders() -> None:
    document = make_result(2, differences=3)
    assert all("lake_findings" not in c for c in document["comparisons"])
    validate_result(document)
    assert "Lake self-consistency" not in build_html_report(document)
