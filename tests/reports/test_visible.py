"""Control and direction-changing characters from data are shown escaped in every report.

Issue 19, item 7: NUL, ESC, BEL and U+202E (right-to-left override) in keys, values and
names were written raw into the HTML and the Markdown, so a reviewer could be shown
``rtl‮gnp.exe`` as ``rtlexe.png``. The HTML also carries a Content-Security-Policy.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re

import pytest

from reports.html import build_html_report
from reports.junit import build_junit
from reports.markdown import build_markdown
from reports.visible import visible
from tests.reports.sample import make_comparison, wrap

HIDDEN = ["\x00", "\x1b", "\x07", "\u202e", "\u2066", "\u200f", "\u2028", "\ufeff", "\x85"]
SPOOF = "rtl\u202egnp.exe\x1b[31m\x00\x07"


def _spoofed() -> dict[str, object]:
    comparison = make_comparison("orders\u202e", 4)
    comparison["differences"][0]["key"] = [SPOOF, "k\x00ey"]
    comparison["differences"][0]["columns"][0].update(column="amo\u2066unt", source=SPOOF)
    comparison["error"] = None
    return wrap([comparison])


@pytest.mark.parametrize(
    "render", [build_html_report, build_markdown, build_junit], ids=["html", "markdown", "junit"]
)
def test_no_hidden_character_reaches_a_report(render: object) -> None:
    text = render(_spoofed())  # type: ignore[operator]
    found = [hex(ord(char)) for char in HIDDEN if char in text]
    assert found == []
    assert "\\u202e" in text and "\\u0000" in text  # shown, not dropped


def test_visible_escapes_exactly_the_hidden_characters() -> None:
    assert visible("a\tb\nc") == "a\\u0009b\\u000ac"
    assert visible("données ☃ 𝄞") == "données ☃ 𝄞"  # ordinary text stays as it is
    assert visible("".join(HIDDEN)) == "".join(f"\\u{ord(c):04x}" for c in HIDDEN)


def test_the_html_report_allows_only_its_own_script() -> None:
    page = build_html_report(_spoofed())
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    assert policy is not None
    text = html.unescape(policy[1])
    directives = dict(part.strip().split(" ", 1) for part in text.split(";") if part.strip())
    assert directives["default-src"] == "'none'"
    (script,) = re.findall(r"<script>(.*?)</script>", page, re.S)
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert directives["script-src"] == f"'sha256-{digest}'"
