"""Drift injected into a demo's lake behind its pipeline's back: three rows, at the lake's own
position, so a validation has exactly those to find."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cdc_core.errors import TerminalError
from cdc_core.lake import COMMIT_POS, COMMIT_TS, OP, SEQ, TXID, LakeTable, append_changelog
from validator.demo.setup import Expected

DRIFT_TIME = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def inject_drift(lake: Path, lake_name: Callable[[str], str]) -> Expected:
    """Delete customer 17, rename customer 99, add order 999999 — in the lake only.

    Args:
        lake: The lake directory.
        lake_name: The lake table name of the demo's ``customers`` and ``orders``.
    """
    customers = _drift_table(
        lake, lake_name("customers"), [("d", 17, {}), ("u", 99, {"name": "Renamed"})]
    )
    _drift_table(lake, lake_name("orders"), [("c", 5, {"id": 999_999})])
    return {
        ("customers", "missing_in_target", (str(customers[0]),)),
        ("customers", "changed", (str(customers[1]),)),
        ("orders", "extra_in_target", ("999999",)),
    }


def _drift_table(
    lake: Path, table: str, changes: list[tuple[str, int, dict[str, Any]]]
) -> list[int]:
    import pyarrow as pa
    from deltalake import DeltaTable

    from cdc_core.lake import high_water_mark

    lake_table = LakeTable(lake, table)
    position = high_water_mark(lake_table)
    if position is None:
        raise TerminalError(f"the pipeline wrote nothing to lake table {lake_table.table}")
    mirror = DeltaTable(str(lake_table.mirror)).to_pyarrow_table().to_pylist()
    rows = {row["id"]: {k: v for k, v in row.items() if not k.startswith("_")} for row in mirror}
    events = [
        {
            **rows[key],
            **override,
            OP: op,
            COMMIT_POS: position,
            SEQ: 1_000_000 + seq,
            TXID: "demo-drift",
            COMMIT_TS: DRIFT_TIME,
        }
        for seq, (op, key, override) in enumerate(changes)
    ]
    schema = pa.schema(DeltaTable(str(lake_table.changelog)).schema().to_arrow())
    append_changelog(
        lake_table,
        pa.Table.from_pylist(events, schema),
        position,
        "demo-drift",
        "replcheck-demo-drift",
    )
    return [int(events[i]["id"]) for i in range(len(events))]
