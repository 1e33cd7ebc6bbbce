"""The Markdown summary: one table row per comparison; no value can break the table."""

from __future__ import annotations

import re

from reports.markdown import build_markdown, escape
from tests.reports.sample import make_comparison, make_result, wrap

_UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")


def table_lines(markdown: str) -> list[str]:
    return [line for line in markdown.splitlines() if line.startswith("|")]


def test_one_table_row_per_comparison() -> None:
    markdown = build_markdown(make_result(4, differences=3, errors=1))
    lines = table_lines(markdown)
    assert len(lines) == 2 + 5
    assert all(len(_UNESCAPED_PIPE.findall(line)) == 6 for line in lines)
    assert markdown.startswith("❌ **replcheck: error** — 5 comparisons (differences 4, error 1)")
    assert "| table\\_00 | ⚠️ differences | 10,000 | 9,999 | 3 (missing in target 1," in markdown


def test_pipes_newlines_and_markup_in_values_cannot_break_the_table() -> None:
    comparison = make_comparison("a|b\nc", 2)
    comparison["differences"][0]["key"] = ["x|y\r\nz", "<b>*bold*</b>"]
    markdown = build_markdown(wrap([comparison]))
    lines = table_lines(markdown)
    assert len(lines) == 3
    assert all(len(_UNESCAPED_PIPE.findall(line)) == 6 for line in lines)
    assert "| a\\|b c |" in lines[2]
    assert "- changed: x\\|y z, \\<b\\>\\*bold\\*\\</b\\> (columns amount, note)" in markdown


def test_a_few_keys_per_drifted_comparison() -> None:
    markdown = build_markdown(make_result(2, differences=30), max_rows=5)
    keys = [
        line for line in markdown.splitlines() if re.match(r"- (changed|missing|extra|dup)", line)
    ]
    assert len(keys) == 2 * 5
    assert markdown.count("- … and 25 more") == 2


def test_one_comparison_is_singular() -> None:
    assert "— 1 comparison (in\\_sync 1)," in build_markdown(make_result(1))


def test_an_in_sync_run_is_just_the_table() -> None:
    markdown = build_markdown(make_result(2))
    assert markdown.startswith("✅ **replcheck: in\\_sync** — 2 comparisons (in\\_sync 2)")
    assert "\n- " not in markdown


def test_escape_keeps_text_on_one_literal_line() -> None:
    assert escape("a\\b`c*d_e[f]g<h>i|j~k&l#m\nn") == (
        "a\\\\b\\`c\\*d\\_e\\[f\\]g\\<h\\>i\\|j\\~k\\&l\\#m n"
    )
