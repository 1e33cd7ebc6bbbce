"""Run history: both stores round-trip, order and survive damage; the trend and drift labels."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest

from reports.history import (
    ComparisonSummary,
    DeltaHistory,
    Drift,
    HistoryStore,
    JsonLinesHistory,
    RunSummary,
    classify,
    history_for,
    record_run,
    summarize,
    to_trend_input,
    trend_before,
)
from reports.html import build_html_report
from tests.reports.sample import make_comparison, make_error, wrap


def run(day: int, **differences: int) -> RunSummary:
    """A run finished on November ``day`` with ``name=total`` drifted comparisons."""
    comparisons = {
        name: ComparisonSummary(
            "differences" if total else "in_sync", total, {"changed": total} if total else {}
        )
        for name, total in differences.items()
    }
    status = "differences" if any(differences.values()) else "in_sync"
    return RunSummary(f"2026-11-{day:02d}T02:03:20+00:00", status, comparisons)


def result_on(day: int, **differences: int) -> dict[str, Any]:
    """A ``result.json`` document finished on November ``day``."""
    document = wrap([make_comparison(name, total) for name, total in differences.items()])
    document["finished"] = f"2026-11-{day:02d}T02:03:20+00:00"
    return document


@pytest.fixture(params=["jsonl", "delta"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> HistoryStore:
    if request.param == "jsonl":
        return JsonLinesHistory(tmp_path / "history.jsonl")
    return DeltaHistory(tmp_path / "lake" / "_replcheck" / "history")


def test_summarize_keeps_counts_per_comparison() -> None:
    document = wrap([make_comparison("orders", 6), make_comparison("customers"), make_error("x")])
    summary = summarize(document)
    assert summary.finished == "2026-11-22T02:03:20+00:00"
    assert summary.status == "error"
    assert list(summary.comparisons) == ["orders", "customers", "x"]
    assert summary.comparisons["orders"].to_dict() == {
        "status": "differences",
        "differences_total": 6,
        "counts_by_kind": {
            "changed": 2,
            "missing_in_target": 2,
            "extra_in_target": 1,
            "duplicate_key": 1,
        },
    }
    assert summary.comparisons["x"].status == "error"


def test_finished_times_are_normalised_to_utc() -> None:
    summary = RunSummary("2026-11-22T03:03:20+01:00", "in_sync", {})
    assert summary.finished == "2026-11-22T02:03:20+00:00"
    with pytest.raises(ValueError, match="time zone"):
        RunSummary("2026-11-22T02:03:20", "in_sync", {})


def test_a_summary_cannot_be_changed_through_the_callers_dict() -> None:
    counts = {"changed": 1}
    comparison = ComparisonSummary("differences", 1, counts)
    counts["changed"] = 99
    assert comparison.counts_by_kind == {"changed": 1}
    with pytest.raises(TypeError):
        comparison.counts_by_kind["changed"] = 5  # type: ignore[index]
    with pytest.raises(ValueError, match="status"):
        ComparisonSummary("drifted", 1)


def test_a_store_round_trips_runs(store: HistoryStore) -> None:
    assert store.read_last(5) == []
    first = summarize(wrap([make_comparison("orders", 6), make_error("gone")]))
    second = RunSummary("2026-11-23T02:03:20.123456+00:00", "in_sync", {})
    store.append(first)
    store.append(second)
    assert store.read_last(5) == [first, second]


def test_the_last_runs_come_oldest_first_by_finish_time(store: HistoryStore) -> None:
    for day in (3, 1, 5, 2, 4):  # appended out of order: a back-filled or late run
        store.append(run(day, orders=day))
    assert [s.comparisons["orders"].differences_total for s in store.read_last(3)] == [3, 4, 5]
    assert [s.finished[:10] for s in store.read_last(10)] == [
        f"2026-11-0{day}" for day in (1, 2, 3, 4, 5)
    ]
    assert store.read_last(0) == []


def test_runs_finished_at_the_same_time_stay_apart(store: HistoryStore) -> None:
    store.append(run(5, orders=1))
    store.append(run(6, orders=2))
    store.append(run(6, customers=3))  # e.g. two jobs over different comparisons
    last = store.read_last(2)
    assert sorted(name for s in last for name in s.comparisons) == ["customers", "orders"]
    assert {s.finished[:10] for s in last} == {"2026-11-06"}


def test_delta_history_reads_only_the_files_of_the_runs_asked_for(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    from deltalake import DeltaTable

    store = DeltaHistory(tmp_path / "history")
    for day in (4, 1, 7, 2, 9, 3, 5, 8, 6):  # a file a run, appended out of order
        store.append(run(day, orders=day))
    for uri in DeltaTable(str(store.path)).file_uris():
        if pq.read_table(uri).column("finished")[0].as_py().day <= 3:
            Path(uri).write_bytes(b"not parquet")  # the oldest runs' files: never opened
    last = store.read_last(6)
    assert [s.comparisons["orders"].differences_total for s in last] == [4, 5, 6, 7, 8, 9]
    with pytest.raises(pa.ArrowInvalid):
        store.read_last(7)


def test_delta_history_has_one_row_per_run_and_comparison(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    store = DeltaHistory(tmp_path / "history")
    store.append(run(1, orders=2, customers=0))
    store.append(run(2, orders=3, customers=1))
    rows = DeltaTable(str(tmp_path / "history")).to_pyarrow_table().to_pylist()
    assert sorted((r["finished"].day, r["comparison"], r["differences_total"]) for r in rows) == [
        (1, "customers", 0),
        (1, "orders", 2),
        (2, "customers", 1),
        (2, "orders", 3),
    ]
    assert len({r["run_id"] for r in rows}) == 2


def test_a_truncated_last_line_is_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = JsonLinesHistory(tmp_path / "history.jsonl")
    store.append(run(1, orders=1))
    store.append(run(2, orders=2))
    text = store.path.read_text(encoding="utf-8")
    store.path.write_text(text[: len(text) - 25], encoding="utf-8")  # a crash mid-append
    with caplog.at_level(logging.WARNING, logger="reports.history"):
        assert store.read_last(5) == [run(1, orders=1)]
    assert "skipping unreadable line 2" in caplog.text
    assert "orders" not in caplog.text  # the line's content is not logged

    store.append(run(3, orders=3))  # starts a fresh line after the fragment
    assert store.read_last(5) == [run(1, orders=1), run(3, orders=3)]
    assert len(store.path.read_text(encoding="utf-8").splitlines()) == 3


def test_lines_of_the_wrong_shape_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    good = json.dumps(run(2, orders=1).to_dict())
    path.write_text(f'[1, 2]\n{{"finished": "yesterday"}}\n\n{good}\n\xff\n', encoding="utf-8")
    assert JsonLinesHistory(path).read_last(5) == [run(2, orders=1)]


def test_the_store_follows_the_lake(tmp_path: Path) -> None:
    assert history_for(tmp_path / "lake", tmp_path / "out") == DeltaHistory(
        tmp_path / "lake" / "_replcheck" / "history"
    )
    assert history_for(None, tmp_path / "runs" / "2026-11-22") == JsonLinesHistory(
        tmp_path / "runs" / "history.jsonl"
    )


def test_trend_input_counts_differences_and_leaves_out_failures() -> None:
    failed = run(2, orders=4)
    failed = RunSummary(
        failed.finished, "error", {**failed.comparisons, "gone": ComparisonSummary("error", 0)}
    )
    assert to_trend_input([failed, run(1, orders=0)]) == [
        {"finished": "2026-11-01T02:03:20+00:00", "comparisons": {"orders": 0}},
        {"finished": "2026-11-02T02:03:20+00:00", "comparisons": {"orders": 4}},
    ]


@pytest.mark.parametrize(
    ("counts", "drift"),
    [
        ([0, 0, 5], Drift.NEW),
        ([9, 0, 1], Drift.NEW),
        ([1, 2, 3], Drift.GROWING),
        ([0, 7, 4], Drift.SHRINKING),
        ([4, 4], Drift.STEADY),
        ([3, 0, 0], Drift.STEADY),
        ([0, 6, 0], Drift.RESOLVED),
        ([5], None),
        ([], None),
    ],
)
def test_classify(counts: list[int], drift: Drift | None) -> None:
    assert classify(counts) == drift


def test_record_run_appends_once_and_returns_only_earlier_runs(store: HistoryStore) -> None:
    assert record_run(store, result_on(1, orders=0)) == []
    assert record_run(store, result_on(2, orders=4)) == [
        {"finished": "2026-11-01T02:03:20+00:00", "comparisons": {"orders": 0}}
    ]
    # Recording day 2 again (a retried step) neither duplicates it nor counts it as its past.
    again = record_run(store, result_on(2, orders=4))
    assert [r["finished"][:10] for r in again] == ["2026-11-01"]
    assert len(store.read_last(10)) == 2
    past = record_run(store, result_on(3, orders=2), runs=1)
    assert past == [{"finished": "2026-11-02T02:03:20+00:00", "comparisons": {"orders": 4}}]


def test_re_rendering_reads_the_runs_before_without_appending(store: HistoryStore) -> None:
    for day in (1, 2, 3):
        store.append(run(day, orders=day))
    past = trend_before(store, result_on(2, orders=2))
    assert past == [{"finished": "2026-11-01T02:03:20+00:00", "comparisons": {"orders": 1}}]
    assert len(store.read_last(10)) == 3


def labels(html: str) -> dict[str, list[str]]:
    """Drift labels of ``html`` per comparison section: name -> labels in that section."""
    sections = re.findall(r'<details class="cmp".*?<h2>(.*?)</h2>(.*?)</details>', html, re.S)
    return {name: re.findall(r'data-drift="(\w+)"', body) for name, body in sections}


def test_the_report_labels_each_trend_with_its_drift() -> None:
    history = to_trend_input(
        [
            run(20, new=0, growing=2, shrinking=9, steady=3, resolved=5),
            run(21, new=0, growing=3, shrinking=8, steady=3, resolved=5, unseen=0),
        ]
    )
    current = {"new": 4, "growing": 6, "shrinking": 2, "steady": 3, "resolved": 0, "fresh": 1}
    comparisons = [make_comparison(name, total) for name, total in current.items()]
    html = build_html_report(wrap([*comparisons, make_error("growing_but_failed")]), history)
    assert html.count('<svg class="trend"') == 5
    assert labels(html) == {
        "new": ["new"],
        "growing": ["growing"],
        "shrinking": ["shrinking"],
        "steady": ["steady"],
        "resolved": ["resolved"],
        "fresh": [],  # no earlier run: no trend, no label
        "growing_but_failed": [],
    }
    # The index repeats each label next to the comparison's count.
    index = html.split('<section id="index">')[1].split("</section>")[0]
    assert re.findall(r'data-drift="(\w+)"', index) == list(current)[:5]
    assert 'title="no differences in the run before, some now">new</span>' in html


def test_a_failed_comparison_gets_no_trend() -> None:
    history = [{"finished": "2026-11-21T02:03:20+00:00", "comparisons": {"gone": 7}}]
    html = build_html_report(wrap([make_error("gone")]), history)
    assert '<svg class="trend"' not in html
    assert "data-drift" not in html
