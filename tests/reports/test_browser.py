"""The HTML report in a real browser: Debian's headless Chromium renders it without errors.

Two reports are rendered to files and opened with ``/usr/bin/chromium --headless`` (no
Playwright: nothing is downloaded; ``bash scripts/install-system-deps.sh`` installs the
``chromium`` package, and without it these tests fail rather than skip):

* a demo-like report (the demo's three tables and the differences it injects, with three
  earlier nightly runs as history), and
* a large one: 50 comparisons of 200 differences each, 10,000 in all, every one shown, with
  history. It must stay under ``MAX_LARGE_REPORT_BYTES`` = 5 MB (5,000,000 bytes), the
  documented limit of what a report mailed or archived as a CI artefact may weigh.

Per report, Chromium runs twice, each time with a fresh profile directory:

* ``--dump-dom`` on a copy of the report with a probe script appended after the report's
  own: the probe measures key elements (``getBoundingClientRect`` and computed style) and
  writes what it saw into the DOM, which Chromium prints after the page has loaded. The
  dumped ``<body data-ready="1">`` shows the report's own script ran to its end. The same
  run logs with ``--enable-logging=stderr``; every message the page writes to its console
  (``console.*``, uncaught exceptions, failed loads) appears as an ``INFO:CONSOLE`` line,
  and there must be none. Chromium's other stderr lines are the browser process talking
  about its environment (no D-Bus or GPU in a container, the Debian wrapper's memory
  check), never about the page, so only ``:CONSOLE`` lines are considered.
* ``--screenshot`` of the unmodified report at 1280x2000 into the test's ``tmp_path``;
  the PNG must have that size and not be blank.

A last test feeds the same harness a broken page, so the checks are shown to fail.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import re
import struct
import subprocess
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from reports.html import build_html_report
from tests.reports.sample import make_comparison, make_result, wrap

CHROMIUM = Path("/usr/bin/chromium")
MAX_LARGE_REPORT_BYTES = 5_000_000
WINDOW = (1280, 2000)
FLAGS = (
    "--headless",
    "--no-sandbox",  # tests run as root in a container; Chromium refuses the sandbox there
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
# Guards against a hung browser only; nothing is asserted about speed.
HANG_GUARD_S = 120
KEY_ELEMENTS = (
    "h1",
    "header .badge",
    ".cards",
    "#totals-by-kind",
    "#index table",
    "#search",
    "#status-filter",
    "#c0 > summary",
    "#c0 .facts",
    "#c0 svg.heat",
    "#c0 .legend .muted",
    "#c0 svg.trend",
    "#c0 .drift",
    "#c0 table.rows",
    "footer",
)
LAST_OF_FIFTY = ("#c49 > summary", "#c49 svg.heat", "#c49 svg.trend", "#c49 table.rows")
PROBE = """<script>
(function () {
  var seen = {};
  SELECTORS.forEach(function (selector) {
    var el = document.querySelector(selector);
    if (!el) { seen[selector] = "missing"; return; }
    var box = el.getBoundingClientRect();
    var style = getComputedStyle(el);
    var shown = box.width > 0 && box.height > 0 && style.visibility === "visible" &&
      !el.closest("[hidden]");
    // Content spilling out of its own box (e.g. text in a fixed-size block) overlaps others.
    var spills = el.clientHeight > 0 && el.scrollHeight > el.clientHeight + 1;
    seen[selector] = !shown ? "hidden" : spills ? "overflowing" : "visible";
  });
  var out = document.createElement("pre");
  out.id = "probe";
  out.textContent = JSON.stringify(seen);
  document.body.appendChild(out);
})();
</script>"""


@dataclass(frozen=True, slots=True)
class Loaded:
    """What Chromium made of a page: the DOM after load, the probe's findings, console lines."""

    dom: str
    elements: dict[str, str]
    console: list[str]


@pytest.fixture(scope="module")
def chromium() -> Path:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(
            f"{CHROMIUM} is missing: the browser tests need Debian's chromium package; "
            "run: bash scripts/install-system-deps.sh"
        )
    return CHROMIUM


def run_chromium(chromium: Path, workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium with a fresh profile (and HOME) under ``workdir``."""
    profile = workdir / f"profile-{len(list(workdir.glob('profile-*')))}"
    profile.mkdir(parents=True)
    command = [str(chromium), *FLAGS, f"--user-data-dir={profile}", *args]
    env = {**os.environ, "HOME": str(profile)}
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=HANG_GUARD_S, env=env, check=False
    )
    assert done.returncode == 0, f"chromium exited {done.returncode}:\n{done.stderr[-3000:]}"
    return done


def _allow_script(page: str, script: str) -> str:
    """The page's Content-Security-Policy, extended by the hash of one more inline script
    (the probe): the report's own policy allows only the report's own script."""
    body = script.removeprefix("<script>").removesuffix("</script>")
    digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
    quote = "&#39;"  # the report's attributes are HTML-escaped
    return page.replace(
        f"script-src {quote}sha256-", f"script-src {quote}sha256-{digest}{quote} {quote}sha256-", 1
    )


def load(chromium: Path, page: Path, selectors: tuple[str, ...]) -> Loaded:
    """Open a probed copy of ``page`` and collect the DOM, the probe and console lines."""
    probe = PROBE.replace("SELECTORS", json.dumps(list(selectors)))
    probed = page.with_name(f"probed-{page.name}")
    text = _allow_script(page.read_text(encoding="utf-8"), probe)
    probed.write_text(text.replace("</body>", f"{probe}</body>"))
    done = run_chromium(
        chromium,
        page.parent,
        "--enable-logging=stderr",
        "--v=0",
        "--dump-dom",
        probed.as_uri(),
    )
    found = re.search(r'<pre id="probe">(.*?)</pre>', done.stdout, re.S)
    elements = json.loads(html.unescape(found.group(1))) if found else {}
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    return Loaded(done.stdout, elements, console)


def screenshot(chromium: Path, page: Path) -> Path:
    """A PNG of ``page`` at ``WINDOW`` size, next to it."""
    png = page.with_suffix(".png")
    size = f"--window-size={WINDOW[0]},{WINDOW[1]}"
    run_chromium(chromium, page.parent, f"--screenshot={png}", size, page.as_uri())
    return png


def png_facts(png: Path) -> tuple[int, int, int]:
    """(width, height, distinct byte values of the decoded pixel rows) of an 8-bit PNG."""
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{png} is not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    chunks, offset = [], 8
    while offset < len(data):
        length, kind = struct.unpack(">I4s", data[offset : offset + 8])
        if kind == b"IDAT":
            chunks.append(data[offset + 8 : offset + 8 + length])
        offset += 12 + length
    return width, height, len(set(zlib.decompress(b"".join(chunks))))


def with_differences(name: str, differences: list[dict[str, Any]]) -> dict[str, Any]:
    """A sample comparison carrying exactly ``differences``, its counts to match."""
    comparison = make_comparison(name, 0, depth=10)
    by_kind: dict[str, int] = {}
    leaves: dict[str, int] = {}
    for i, difference in enumerate(differences):
        by_kind[difference["kind"]] = by_kind.get(difference["kind"], 0) + 1
        leaves[str((97 * i + 13) % 1024)] = 1
    comparison.update(
        status="differences",
        differences=differences,
        differences_total=len(differences),
        counts_by_kind=by_kind,
        mismatched_leaves=leaves,
        leaves_mismatched=len(leaves),
        source="shop." + name,
        target="lake.shop." + name,
    )
    return comparison


def changed(key: list[str | None], column: str, source: str, target: str) -> dict[str, Any]:
    return {
        "kind": "changed",
        "key": key,
        "columns": [{"column": column, "source": source, "target": target}],
    }


def demo_like_result() -> dict[str, Any]:
    """The differences ``replcheck demo`` injects, as its result would report them."""
    customers = [
        {"kind": "missing_in_target", "key": ["17"]},
        {"kind": "missing_in_target", "key": ["404"]},
        changed(["99"], "name", "Ada Lovelace", "Renamed Behind The Back"),
        changed(["123"], "email", "***", "***"),
        {"kind": "extra_in_target", "key": ["99999"]},
    ]
    orders = [
        {"kind": "missing_in_target", "key": ["3"]},
        {"kind": "missing_in_target", "key": ["10000"]},
        {"kind": "missing_in_target", "key": ["19999"]},
        changed(["5"], "amount", "118.40", "118.41"),
        changed(["777"], "placed_at", "2026-03-01 10:00:00.123", "2026-03-01 10:00:01.123"),
    ]
    shipments = [
        {"kind": "missing_in_target", "key": ["eu", "42"]},
        changed(["us", "7"], "cost", "12.5", "14.0"),
        {"kind": "extra_in_target", "key": ["ap", "9999"]},
    ]
    return wrap(
        [
            with_differences("customers", customers),
            with_differences("orders", orders),
            with_differences("shipments", shipments),
        ]
    )


def nightly_history(names: list[str], runs: int) -> list[dict[str, Any]]:
    """``runs`` earlier nights of trend input, oldest first, with moving counts."""
    return [
        {
            "finished": f"2026-11-{22 - runs + night:02d}T02:03:20+00:00",
            "comparisons": {name: (index * 7 + night * 3) % 11 for index, name in enumerate(names)},
        }
        for night in range(runs)
    ]


def render(result: dict[str, Any], history: list[dict[str, Any]], path: Path) -> Path:
    path.write_text(build_html_report(result, history), encoding="utf-8")
    return path


def assert_renders(chromium: Path, page: Path, selectors: tuple[str, ...]) -> Loaded:
    """The checks every report must pass in the browser."""
    loaded = load(chromium, page, selectors)
    assert loaded.console == [], "the page wrote to the console:\n" + "\n".join(loaded.console)
    assert "Uncaught" not in loaded.dom
    assert re.search(r'<body data-ready="1"', loaded.dom), "report.js did not run to its end"
    assert loaded.elements == dict.fromkeys(selectors, "visible")
    width, height, distinct = png_facts(screenshot(chromium, page))
    assert (width, height) == WINDOW
    assert distinct > 32, "the screenshot is (nearly) blank"
    return loaded


def test_the_demo_report_renders_in_chromium(chromium: Path, tmp_path: Path) -> None:
    result = demo_like_result()
    history = nightly_history(["customers", "orders", "shipments"], runs=3)
    page = render(result, history, tmp_path / "demo-report.html")
    assert 'data-ready="1"' not in page.read_text(encoding="utf-8")  # only the script sets it
    loaded = assert_renders(chromium, page, KEY_ELEMENTS)
    assert loaded.dom.count('<details class="cmp"') == 3
    assert loaded.dom.count('<tr class="missing_in_target">') == 6
    assert "Renamed Behind The Back" in loaded.dom
    assert (tmp_path / "demo-report.png").stat().st_size > 10_000


def test_a_large_report_stays_small_and_renders_in_chromium(chromium: Path, tmp_path: Path) -> None:
    result = make_result(50, differences=200)
    assert sum(c["differences_total"] for c in result["comparisons"]) == 10_000
    history = nightly_history([c["name"] for c in result["comparisons"]], runs=5)
    page = render(result, history, tmp_path / "large-report.html")
    assert page.stat().st_size < MAX_LARGE_REPORT_BYTES
    loaded = assert_renders(chromium, page, KEY_ELEMENTS + LAST_OF_FIFTY)
    assert loaded.dom.count('<details class="cmp"') == 50
    assert loaded.dom.count('<svg class="trend"') == 50
    assert (
        len(
            re.findall(
                r'<tr class="(?:changed|missing_in_target|extra_in_target|duplicate_key)"',
                loaded.dom,
            )
        )
        == 10_000
    )


def test_the_harness_catches_errors_and_hidden_elements(chromium: Path, tmp_path: Path) -> None:
    page = tmp_path / "broken.html"
    page.write_text(
        "<!DOCTYPE html><html><body><h1>shown</h1><p id='gone' hidden>hidden</p>"
        "<script>null.crash();</script></body></html>",
        encoding="utf-8",
    )
    loaded = load(chromium, page, ("h1", "#gone", "#absent"))
    assert loaded.elements == {"h1": "visible", "#gone": "hidden", "#absent": "missing"}
    assert len(loaded.console) == 1 and "Uncaught TypeError" in loaded.console[0]
    assert "data-ready" not in loaded.dom
    with pytest.raises(AssertionError, match="wrote to the console"):
        assert_renders(chromium, page, ("h1",))
