"""Re-sync of the embedded demo: a source without a log (DuckDB) and a drifted lake.

Without a log the refresh position is the lake's high-water mark. The demo's drift spans
integer and composite (text, integer) keys, a sensitive column, JSON, UUIDs, timestamps
with a zone, and a lake that keeps milliseconds where the source has microseconds.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from cdc_core.lake.layout import LakeTable, high_water_mark
from tests.reports.sample import make_comparison, wrap
from validator.config import ValidatorConfig, load_validator_config
from validator.demo.duckdb import build_demo
from validator.demo.setup import Expected
from validator.resync.audit import LAKE_AUDIT, DeltaAudit, read_audit
from validator.resync.context import prepare
from validator.resync.lake import lake_rows_at
from validator.resync.run import resync


def _result(expected: Expected, config: ValidatorConfig) -> dict[str, Any]:
    comparisons = []
    for name in ("customers", "orders", "shipments"):
        comparison = make_comparison(name)
        configured = config.comparison(name)
        comparison.update(source=configured.source_label, target=configured.target_label)
        found = sorted((kind, key) for table, kind, key in expected if table == name)
        comparison.update(
            status="differences",
            differences=[{"key": list(key), "kind": kind, "columns": []} for kind, key in found],
            differences_total=len(found),
        )
        comparisons.append(comparison)
    document = wrap(comparisons)
    document["finished"] = dt.datetime.now(dt.UTC).isoformat()
    return document


def test_every_demo_difference_is_repaired_in_the_lake(tmp_path: Path) -> None:
    setup = build_demo(tmp_path / "demo")
    config = load_validator_config(setup.config, environ={})
    lake = config.connections["lake"].lake
    assert lake is not None
    mark = high_water_mark(LakeTable(lake, "shop.orders"))

    outcome = resync(config, _result(setup.expected, config), apply=True, out_dir=tmp_path / "out")

    counts = {c.name: c.action_counts for c in outcome.comparisons}
    assert counts == {
        "customers": {"refresh": 4, "delete": 1},
        "orders": {"refresh": 5},
        "shipments": {"refresh": 2, "delete": 1},
    }
    assert all(c.repaired and c.remaining_total == 0 for c in outcome.comparisons)
    assert {c.source_position for c in outcome.comparisons} == {str(mark)}
    assert high_water_mark(LakeTable(lake, "shop.orders")) == mark
    records = read_audit(DeltaAudit(lake.joinpath(*LAKE_AUDIT)))
    assert sorted(str(r["comparison"]) for r in records) == ["customers", "orders", "shipments"]


def test_a_second_resync_finds_the_lake_already_equal(tmp_path: Path) -> None:
    setup = build_demo(tmp_path / "demo")
    config = load_validator_config(setup.config, environ={})
    expected = _result(setup.expected, config)
    resync(config, expected, comparisons=["shipments"], apply=True, out_dir=tmp_path)
    context = prepare(config, config.comparison("shipments"))
    rows = lake_rows_at(context, [("eu", 42), ("us", 7), ("ap", 9999)], None)
    assert len(rows) == 2  # eu/42 back, us/7 refreshed, ap/9999 deleted
    again = resync(config, expected, comparisons=["shipments"], apply=True, out_dir=tmp_path)
    assert again.comparisons[0].repaired and again.exit_code == 0
