"""JUnit XML for CI systems: one test suite "replcheck", one test case per comparison.

A comparison with differences (rows or columns, or a failed data-quality expectation) is a
``<failure>`` whose message counts differences by kind and failed expectations and names the
changed columns (names only: values never reach JUnit); a comparison that could not run is
an ``<error>``, its message the error's first line and its text the whole error. Built with
ElementTree, so every value is XML-escaped; characters XML 1.0 cannot carry at all are
replaced first.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

from reports import model
from reports.visible import visible

SUITE = "replcheck"
MAX_KEYS = 20

# Characters outside the XML 1.0 Char production (https://www.w3.org/TR/xml/#charsets).
_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def build_junit(result: dict[str, Any]) -> str:
    """Render a validation result as JUnit XML.

    Args:
        result: A ``result.json`` document (see :func:`reports.model.read_result`).

    Returns:
        The XML text, with an XML declaration.
    """
    counts = model.status_counts(result)
    suites = ET.Element("testsuites", _attributes(result, counts))
    suite = ET.SubElement(suites, "testsuite", _attributes(result, counts))
    suite.set("timestamp", result["started"])
    for comparison in result["comparisons"]:
        suite.append(_testcase(comparison))
    ET.indent(suites)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def _attributes(result: dict[str, Any], counts: dict[str, int]) -> dict[str, str]:
    return {
        "name": SUITE,
        "tests": str(len(result["comparisons"])),
        "failures": str(counts["differences"]),
        "errors": str(counts["error"]),
        "skipped": "0",
        "time": f"{result['duration_s']:.3f}",
    }


def _testcase(comparison: dict[str, Any]) -> ET.Element:
    case = ET.Element(
        "testcase",
        {
            "name": _text(comparison["name"]),
            "classname": _text(f"{SUITE}.{comparison['name']}"),
            "time": f"{model.phase_seconds(comparison):.3f}",
        },
    )
    if comparison["status"] == "error":
        # An attribute cannot carry a line break (it is written as "&#10;"): the message is
        # the error's first line, the element's text the whole error.
        said = comparison["error"] or "comparison could not run"
        error = ET.SubElement(case, "error", {"type": "error"})
        first = next((line for line in said.splitlines() if line.strip()), said)
        error.set("message", _text(first))
        error.text = _text(f"{said}\n{_facts(comparison)}")
    elif comparison["status"] == "differences":
        failure = ET.SubElement(case, "failure", {"type": "differences"})
        failure.set("message", _text(_failure_message(comparison)))
        failure.text = _text(_failure_body(comparison))
    elif model.lake_findings(comparison):  # in sync, but the lake was written behind its back
        ET.SubElement(case, "system-out").text = _text("\n".join(model.lake_findings(comparison)))
    return case


def _failure_message(comparison: dict[str, Any]) -> str:
    total = model.total_differences(comparison)
    message = f"{total:,} difference{'' if total == 1 else 's'}"
    if total:
        message += f" ({model.describe_differences(comparison)})"
    if model.failed_expectations(comparison):
        message += f"; {model.describe_expectations(comparison)}"
    columns = model.changed_columns(comparison)
    if columns:
        message += f"; changed columns: {', '.join(columns)}"
    return message


def _facts(comparison: dict[str, Any]) -> str:
    compared = model.compared(comparison)
    lines = [
        f"{side}: {comparison[side]}{_at(comparison[f'{side}_position'])}"
        + (f", {model.rows(comparison[f'{side}_rows'])}" if compared else "")
        for side in ("source", "target")
    ]
    if not compared:
        lines.append(model.NOT_COMPARED)
    lines += [model.describe_schema_difference(s) for s in comparison["schema_differences"]]
    lines += model.lake_findings(comparison)
    coverage = model.describe_coverage(comparison)
    if coverage:
        lines.append(f"coverage: {coverage}")
    return "\n".join(lines)


def _at(position: str | None) -> str:
    return "" if position is None else f" at {position}"


def _failure_body(comparison: dict[str, Any]) -> str:
    lines = [_facts(comparison)]
    lines += [
        f"expectation failed: {e['description']}: {model.describe_observed(e)}"
        for e in model.failed_expectations(comparison)
    ]
    shown = comparison["differences"][:MAX_KEYS]
    lines += [_describe(d) for d in shown]
    omitted = model.omitted_count(comparison, len(shown))
    if omitted > 0:
        lines.append(f"... {omitted:,} more")
    return "\n".join(lines)


def _describe(difference: dict[str, Any]) -> str:
    """``"changed: 7 (columns amount, note)"``: a differing key, and for a changed row the
    names of its changed columns (never their values: a column may be sensitive)."""
    line = f"{model.KIND_LABELS[difference['kind']]}: {model.format_key(difference['key'])}"
    columns = [c["column"] for c in difference.get("columns", ())]
    return f"{line} (columns {', '.join(columns)})" if columns else line


def _text(value: str) -> str:
    """XML-safe text whose lines show hidden or direction-changing characters escaped."""
    shown = "\n".join(visible(line) for line in value.split("\n"))
    return _NOT_XML.sub("\ufffd", shown)
