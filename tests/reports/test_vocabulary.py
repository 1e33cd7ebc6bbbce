"""One vocabulary of verdicts (issue 38, item 6): a comparison is ``in_sync``, has
``differences`` or is an ``error`` -- the words of result.json and the terminal -- in the HTML
report, the Markdown summary and JUnit too, never ``drifted``, ``failed`` or ``in sync``."""

from __future__ import annotations

import re
from typing import Any

import pytest

from reports.html import build_html_report
from reports.junit import build_junit
from reports.markdown import build_markdown
from tests.reports.sample import make_comparison, make_error, wrap
from validator import cli

OTHER_WORDS = re.compile(r"\b(drifted|failed|in sync)\b", re.IGNORECASE)
STYLE = re.compile(r"<style>.*?</style>", re.DOTALL)


def _run() -> dict[str, Any]:
    return wrap([make_comparison("calm"), make_comparison("orders", 3), make_error("gone")])


def _terminal(document: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> str:
    cli._print_summary(document)
    return capsys.readouterr().out


def test_every_output_says_in_sync_differences_and_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    document = _run()
    outputs = {
        "terminal": _terminal(document, capsys),
        "html": STYLE.sub("", build_html_report(document)),  # its CSS styles failed expectations
        "markdown": build_markdown(document),
        "junit": build_junit(document),
    }
    for name, text in outputs.items():
        assert not OTHER_WORDS.findall(text), name
    html = outputs["html"]
    for status in ("in_sync", "differences", "error"):
        assert f'<span class="badge {status}">{status}</span>' in html
        assert f'<option value="{status}">{status} (1)</option>' in html
    assert "<title>replcheck: error (" in html
    markdown = outputs["markdown"]
    assert markdown.startswith(
        "❌ **replcheck: error** — 3 comparisons (in\\_sync 1, differences 1"
    )
    assert "| calm | ✅ in\\_sync |" in markdown and "| orders | ⚠️ differences |" in markdown
    assert "| gone | ❌ error |" in markdown
    assert "overall: error" in outputs["terminal"]
    junit = outputs["junit"]
    assert '<failure type="differences"' in junit and '<error type="error"' in junit
