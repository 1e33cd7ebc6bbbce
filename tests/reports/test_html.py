"""The HTML report: escaped values, a truthful heat map, truncation, and no external links."""

from __future__ import annotations

import re
from functools import cache
from html.parser import HTMLParser
from typing import Any

import pytest

from reports.heatmap import GRID_PX, LEVELS, MAX_CELL_PX, MAX_CELLS, build_heatmap, level_of
from reports.html import build_html_report, clip
from reports.markdown import build_markdown
from reports.trend import build_trend
from tests.reports.sample import make_comparison, make_error, make_result, wrap

HOSTILE_SCRIPT = "<script>alert(1)</script>"
HOSTILE_ATTRIBUTE = '"><img src=x onerror=alert(1)>'
_RUN = re.compile(r"M(\d+) (\d+)h(\d+)v1h-\3z")


def drawn_cells(html: str) -> dict[int, set[int]]:
    """Cells coloured in each heat map of ``html``: figure index -> cell indexes."""
    maps: dict[int, set[int]] = {}
    figures = re.findall(r'<figure class="heatmap" data-cells="(\d+)".*?</figure>', html, re.S)
    bodies = re.findall(r'<figure class="heatmap".*?</figure>', html, re.S)
    for index, (cells, body) in enumerate(zip(figures, bodies, strict=True)):
        columns = int(re.search(r'viewBox="0 0 (\d+) \d+"', body).group(1))  # type: ignore[union-attr]
        maps[index] = set()
        for path in re.findall(r' d="([^"]*)"', body):
            for x, y, width in _RUN.findall(path):
                start = int(y) * columns + int(x)
                maps[index].update(range(start, start + int(width)))
        assert max(maps[index], default=0) < int(cells)
    return maps


def hostile_result() -> dict[str, Any]:
    drifted = make_comparison(HOSTILE_SCRIPT, 2)
    drifted["source"] = HOSTILE_ATTRIBUTE
    drifted["differences"][0]["key"] = [HOSTILE_ATTRIBUTE, None]
    drifted["differences"][0]["columns"] = [
        {"column": HOSTILE_SCRIPT, "source": HOSTILE_SCRIPT, "target": HOSTILE_ATTRIBUTE},
        {"column": "email", "source": "***", "target": "***"},
    ]
    drifted["schema_differences"] = [{"column": "x", "problem": HOSTILE_SCRIPT}]
    return wrap([drifted, make_error("gone", HOSTILE_ATTRIBUTE)])


def test_hostile_values_render_as_text() -> None:
    html = build_html_report(hostile_result())
    assert HOSTILE_SCRIPT not in html
    assert "<img" not in html
    assert html.count("<script") == 1  # the report's own inline script
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&#34;&gt;&lt;img src=x onerror=alert(1)&gt;" in html


def test_sensitive_values_stay_masked() -> None:
    html = build_html_report(hostile_result())
    assert html.count('title="sensitive column: value hidden">***</span>') == 2


@cache
def big_report() -> str:
    return build_html_report(make_result(50, differences=200))


def test_the_report_is_self_contained() -> None:
    for html in (big_report(), build_html_report(hostile_result())):
        assert "http://" not in html
        assert "https://" not in html
        assert not re.search(r"\b(src|href)=\"(?!#)", html)
        assert "<link" not in html and "@import" not in html and "url(" not in html


def test_a_url_in_a_value_is_text_not_a_reference() -> None:
    comparison = make_comparison("orders", 1)
    comparison["differences"][0]["columns"][0]["target"] = "https://example.invalid/x.js"
    html = build_html_report(wrap([comparison]))
    assert "https://example.invalid/x.js" in html
    assert not re.search(r"(src|href)=\"https://", html)


def test_fifty_comparisons_of_two_hundred_differences_stay_small() -> None:
    html = big_report()
    assert len(html.encode()) < 5_000_000
    assert html.count('<tr class="changed">') == 50 * 50


def test_the_summary_counts_comparisons_and_kinds() -> None:
    html = build_html_report(make_result(2, differences=8, errors=1))
    cards = {label: value for value, label in re.findall(r"<b>([\d,]+)</b>([\w ]+)</div>", html)}
    assert cards == {
        "comparisons": "3",
        "in_sync": "0",
        "differences": "2",
        "error": "1",
        "differences in total": "16",
    }
    assert "changed <b>4</b>" in html and "duplicate key <b>4</b>" in html
    assert "3 min 20 s" in html and "mariadb-bin.000003:1234" in html


def test_several_comparisons_get_a_searchable_index() -> None:
    html = build_html_report(make_result(3, differences=1, errors=1))
    assert '<input type="search" id="search"' in html
    assert '<select id="status-filter"' in html
    assert len(re.findall(r'<tr data-search="[^"]*" data-status="', html)) == 4
    assert (
        'data-search="broken_00 shop_src.broken_00 lake.shop.broken_00" data-status="error"' in html
    )
    single = build_html_report(make_result(1, differences=1))
    assert 'id="search"' not in single


def test_a_failed_comparison_shows_its_error() -> None:
    html = build_html_report(wrap([make_error("gone", "table shop.gone does not exist")]))
    assert '<div class="err"><b>Error:</b> <span class="v">table shop.gone does not exist' in html
    assert 'class="heatmap"' not in html


def test_the_heat_map_marks_exactly_the_mismatched_leaves() -> None:
    comparison = make_comparison("orders", 0, depth=6)
    comparison.update(status="differences", mismatched_leaves={"0": 1, "5": 3, "6": 2, "63": 9})
    html = build_html_report(wrap([comparison]))
    assert 'data-cells="64" data-leaves-per-cell="1"' in html
    assert drawn_cells(html) == {0: {0, 5, 6, 63}}
    assert 'viewBox="0 0 8 8"' in html
    assert "Busiest leaves: 63 (9), 5 (3), 6 (2), 0 (1)" in html


def test_deep_trees_are_bucketed_to_at_most_4096_cells() -> None:
    comparison = make_comparison("orders", 0, depth=20)
    leaves = {"0": 1, "255": 1, "256": 4, str((1 << 20) - 1): 2}
    comparison.update(status="differences", mismatched_leaves=leaves)
    html = build_html_report(wrap([comparison]))
    assert f'data-cells="{MAX_CELLS}" data-leaves-per-cell="256"' in html
    assert drawn_cells(html) == {0: {0, 1, MAX_CELLS - 1}}
    heatmap = build_heatmap(20, leaves)
    assert (heatmap.columns, heatmap.rows) == (64, 64)
    assert dict(heatmap.counts) == {0: 2, 1: 4, MAX_CELLS - 1: 2}


@pytest.mark.parametrize(
    ("depth", "shape"), [(0, (1, 1)), (1, (2, 1)), (5, (8, 4)), (12, (64, 64))]
)
def test_the_grid_covers_every_leaf(depth: int, shape: tuple[int, int]) -> None:
    heatmap = build_heatmap(depth, {})
    assert (heatmap.columns, heatmap.rows) == shape
    assert heatmap.cells == 1 << depth


def rendered_cell_px(html: str) -> tuple[float, float]:
    """(width, height) in CSS pixels of one cell of the only heat map in ``html``: the SVG's
    size over its viewBox (one unit per cell)."""
    (svg,) = re.findall(r'<svg class="heat"[^>]*>', html)
    size = re.search(r'width="(\d+)" height="(\d+)" viewBox="0 0 (\d+) (\d+)"', svg)
    assert size, svg
    width, height, columns, rows = map(int, size.groups())
    return width / columns, height / rows


@pytest.mark.parametrize(
    ("depth", "cell_px", "width_px"),
    [
        (0, MAX_CELL_PX, MAX_CELL_PX),  # one leaf: one small square
        (1, MAX_CELL_PX, 2 * MAX_CELL_PX),
        (2, MAX_CELL_PX, 2 * MAX_CELL_PX),
        (8, MAX_CELL_PX, GRID_PX),  # 16 x 16 cells: the first grid as wide as the map
        (12, GRID_PX / 64, GRID_PX),
        (20, GRID_PX / 64, GRID_PX),  # bucketed to 64 x 64 cells
    ],
)
def test_small_trees_render_small_square_cells(depth: int, cell_px: float, width_px: int) -> None:
    comparison = make_comparison("orders", 0, depth=depth)
    comparison.update(status="differences", mismatched_leaves={"0": 3})
    html = build_html_report(wrap([comparison]))
    assert rendered_cell_px(html) == (cell_px, cell_px)
    assert re.search(rf'<svg class="heat" width="{width_px}" ', html)
    assert "svg.heat{width:" not in html  # no stylesheet rule stretches the grid again


def test_runs_of_neighbouring_cells_share_one_rectangle() -> None:
    heatmap = build_heatmap(4, {"1": 1, "2": 1, "3": 1, "4": 1})
    assert [level.path for level in heatmap.levels] == ["M1 0h3v1h-3zM0 1h1v1h-1z"]


def test_colour_levels_grow_with_the_count() -> None:
    levels = [level_of(count, 1000) for count in (1, 5, 30, 200, 1000)]
    assert levels == sorted(levels)
    assert (levels[0], levels[-1]) == (1, LEVELS)
    heatmap = build_heatmap(4, {"0": 1, "1": 1000})
    assert [(lv.level, lv.low, lv.high, lv.cells) for lv in heatmap.levels] == [
        (1, 1, 1, 1),
        (LEVELS, 1000, 1000, 1),
    ]


def test_leaves_beyond_the_tree_are_not_drawn() -> None:
    assert dict(build_heatmap(2, {"1": 1, "9": 5}).counts) == {1: 1}


def test_truncation_counts_rows_left_out_here_and_in_the_result() -> None:
    comparison = make_comparison("orders", 30)
    comparison.update(differences_total=45)
    html = build_html_report(wrap([comparison]), max_rows=10)
    assert html.count('<tr class="') == 10
    assert "35 more differences not shown." in html
    complete = build_html_report(wrap([make_comparison("orders", 30)]), max_rows=30)
    assert "not shown" not in complete


def test_the_default_shows_two_hundred_rows() -> None:
    html = build_html_report(wrap([make_comparison("orders", 201)]))
    assert html.count('<tr class="') == 200
    assert "1 more difference not shown." in html


def test_changed_columns_show_both_values() -> None:
    html = build_html_report(wrap([make_comparison("orders", 1)]))
    assert (
        '<span class="col">amount</span><span class="s"><span class="v">0.50</span></span>'
        ' → <span class="t"><span class="v">0.05</span></span>'
    ) in html
    assert '<span class="s"><span class="null">NULL</span></span>' in html


def test_history_draws_a_trend_line() -> None:
    history = [
        {"finished": "2026-11-20T02:03:00+00:00", "comparisons": {"table_00": 0}},
        {"finished": "2026-11-21T02:03:00+00:00", "comparisons": {"table_00": 8, "other": 1}},
    ]
    html = build_html_report(make_result(2, differences=4), history)
    assert html.count("<polyline") == 1
    assert "differences, last 3 runs: 0 → 4" in html
    assert "<polyline" not in build_html_report(make_result(2, differences=4))


def test_long_values_are_clipped() -> None:
    assert clip("x" * 600) == "x" * 500 + "… (100 more characters)"
    assert clip("short") == "short"


def test_a_negative_row_limit_is_refused() -> None:
    with pytest.raises(ValueError, match="max_rows"):
        build_html_report(make_result(1), max_rows=-1)


class _TagBalance(HTMLParser):
    """Records every end tag that does not close the innermost open element."""

    VOID = frozenset({"meta", "input", "br", "img", "link", "rect", "circle", "polyline"})

    def __init__(self) -> None:
        super().__init__()
        self.open: list[str] = []
        self.mismatched: list[tuple[str, tuple[int, int]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in self.VOID:
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self.VOID:
            return
        if self.open and self.open[-1] == tag:
            self.open.pop()
        else:
            self.mismatched.append((tag, self.getpos()))


def test_the_markup_is_balanced() -> None:
    history = [{"finished": "2026-11-20T02:03:00+00:00", "comparisons": {"table_00": 3}}]
    checker = _TagBalance()
    checker.feed(build_html_report(make_result(3, differences=10, errors=1), history))
    checker.feed(build_html_report(hostile_result()))
    assert checker.mismatched == []
    assert checker.open == []


def test_a_trend_needs_two_runs() -> None:
    assert build_trend("orders", ("2026-11-22", 4), []) is None
    history = [{"finished": "2026-11-21", "comparisons": {"orders": 8}}]
    trend = build_trend("orders", ("2026-11-22", 0), history)
    assert trend is not None
    assert trend.values == (("2026-11-21", 8), ("2026-11-22", 0))
    assert trend.points == "3.0,3.0 157.0,29.0"


def test_the_engine_that_computed_the_digests_is_named() -> None:
    in_databases = make_comparison("pair", 1)
    in_databases["engine"] = "database"
    html = build_html_report(wrap([in_databases, make_comparison("lake", 1)]))
    assert html.count("digests computed by the two databases") == 1


def test_a_comparison_its_error_stopped_is_not_compared_not_empty() -> None:
    """Issue 38, item 8: a failed run's page said "0 rows" and "0 of 0 mismatched", which
    reads like two empty tables; it says the comparison was not compared, and why."""
    failed = make_error("gone", "source table shop.gone does not exist")
    failed.update(source_rows=0, target_rows=0)  # as the validator writes a failed one
    result = wrap([failed, make_comparison("orders", 1)])
    html = build_html_report(result)
    assert not re.search(r"(?<![\d,])0 rows", html) and "0 of 0 mismatched" not in html
    assert '<dd class="not-compared">not compared: the comparison stopped at its error' in html
    assert '<td class="n muted" colspan="2">not compared</td>' in html  # the index
    assert '<div class="err"><b>Error:</b> <span class="v">source table shop.gone' in html
    markdown = build_markdown(result)
    assert "| gone | ❌ error | not compared | not compared | error: source table" in markdown
    # Readers disagreeing on a value fail a comparison after it counted: its counts stand.
    late = make_comparison("orders", 0)
    late.update(status="error", error="2 key(s) hash differently", source_rows=7)
    html = build_html_report(wrap([late]))
    assert "7 rows" in html and "of 256 mismatched" in html and "not compared" not in html
