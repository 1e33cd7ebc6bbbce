"""Drift made in a lake behind its pipeline's back, as another writer makes it: one Delta
commit of its own to the mirror, the table users read, so a validation has exactly those
rows to find (and the lake's self-consistency check names the commit)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from cdc_core.errors import TerminalError
from cdc_core.lake.layout import LakeTable
from cdc_core.names import COMMIT_POS, OP, SEQ, merge_assignments, merge_key_predicate
from validator.demo.setup import Expected

Change = tuple[str, Any, Mapping[str, Any]]  # (op, key value, columns): "c", "u" or "d"


def inject_drift(lake: Path, lake_name: Callable[[str], str]) -> Expected:
    """Delete customer 17, rename customer 99, add order 999999 — in the lake only.

    Args:
        lake: The lake directory.
        lake_name: The lake table name of the demo's ``customers`` and ``orders``.
    """
    customers = LakeTable(lake, lake_name("customers"))
    change_mirror(customers, "id", [("d", 17, {}), ("u", 99, {"name": "Renamed"})])
    change_mirror(LakeTable(lake, lake_name("orders")), "id", [("c", 999_999, {})])
    return {
        ("customers", "missing_in_target", ("17",)),
        ("customers", "changed", ("99",)),
        ("orders", "extra_in_target", ("999999",)),
    }


def change_mirror(table: LakeTable, key: str, changes: Sequence[Change]) -> None:
    """Change ``table``'s mirror in one MERGE commit without replcheck's labels: ``d``
    deletes the key's row, ``u`` sets columns of it, ``c`` adds a row (the key's, or else a
    copy of the mirror's oldest row) with the key and columns given."""
    import pyarrow as pa
    from deltalake import DeltaTable

    if not (table.mirror / "_delta_log").is_dir():
        raise TerminalError(f"the pipeline wrote no mirror for lake table {table.table}")
    delta = DeltaTable(str(table.mirror))
    rows = sorted(delta.to_pyarrow_table().to_pylist(), key=lambda r: (r[COMMIT_POS], r[SEQ]))
    latest = {row[key]: row for row in rows}
    merged = [
        {**latest.get(value, rows[0]), **columns, key: value, OP: op}
        for op, value, columns in changes
    ]
    schema = pa.schema(delta.schema().to_arrow())
    merger = delta.merge(
        pa.Table.from_pylist(merged, schema),
        merge_key_predicate([key]),
        source_alias="s",
        target_alias="t",
    )
    columns = merge_assignments(schema.names)
    merger = merger.when_matched_delete(f"s.`{OP}` = 'd'")
    merger = merger.when_matched_update(columns, f"s.`{OP}` <> 'd'")
    merger.when_not_matched_insert(columns, f"s.`{OP}` <> 'd'").execute()
