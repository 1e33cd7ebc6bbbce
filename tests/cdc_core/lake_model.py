"""The reference model of what a pipeline must write, and readers of what it wrote."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from cdc_core.lake.layout import LakeTable
from cdc_core.lake_location import LakeLocation, as_location
from cdc_core.names import COMMIT_POS, META_COLUMNS, OP, SEQ
from connectors.synthetic.workload import COLUMNS, ExpectedEvent, Workload


def read_delta(path: Path | LakeLocation) -> list[dict[str, Any]]:
    """Every row of a Delta table's newest version (on local disk or in a store)."""
    return as_location(path).open_delta().to_pyarrow_table().to_pylist()


def changelog_events(lake: Path | LakeLocation, table: str) -> Counter[tuple[object, ...]]:
    """The changelog's stream events as a multiset: duplicates show as counts above 1."""
    rows = read_delta(LakeTable(lake, table).changelog_at)
    return Counter(
        (row[OP], row[COMMIT_POS], row[SEQ], *(row[c] for c in COLUMNS))
        for row in rows
        if row[OP] != "r"
    )


def expected_events(workload: Workload, table: str) -> Counter[tuple[object, ...]]:
    """What the changelog must hold: each committed change exactly once."""
    return Counter(_key(event) for event in workload.expected() if event.table == table)


def _key(event: ExpectedEvent) -> tuple[object, ...]:
    return (event.op, event.commit_pos, event.seq, *(event.row[c] for c in COLUMNS))


def mirror_rows(lake: Path | LakeLocation, table: str) -> dict[object, dict[str, object]]:
    """The mirror, by key, without bookkeeping columns."""
    rows = read_delta(LakeTable(lake, table).mirror_at)
    found = {}
    for row in rows:
        assert row["id"] not in found, f"key {row['id']} twice in the mirror of {table}"
        found[row["id"]] = {c: v for c, v in row.items() if c not in META_COLUMNS}
    return found


def final_state(workload: Workload, table: str) -> dict[object, dict[str, object]]:
    """The table's state after the whole log: initial rows with every commit applied."""
    state: dict[object, dict[str, object]] = {
        row["id"]: row for row in workload.initial_rows(table)
    }
    for event in workload.expected():
        if event.table != table:
            continue
        if event.op == "d":
            state.pop(event.row["id"])
        else:
            state[event.row["id"]] = dict(event.row)
    return state


def changelog_state(
    lake: Path, table: str, key: tuple[str, ...], position: int | None = None
) -> dict[tuple[object, ...], dict[str, object]]:
    """The table as of ``position`` from its changelog alone, as DESIGN.md defines it: per
    key its latest event (``_commit_pos``, then ``_seq``), gone when that is a delete or
    precedes the newest truncate at or before the position."""
    rows = [
        row
        for row in read_delta(LakeTable(lake, table).changelog)
        if position is None or row[COMMIT_POS] <= position
    ]
    truncates = [(row[COMMIT_POS], row[SEQ]) for row in rows if row[OP] == "t"]
    cut = max(truncates, default=(-1, -1))
    latest: dict[tuple[object, ...], dict[str, Any]] = {}
    for row in sorted((r for r in rows if r[OP] != "t"), key=lambda r: (r[COMMIT_POS], r[SEQ])):
        latest[tuple(row[column] for column in key)] = row
    return {
        found: {c: v for c, v in row.items() if c not in META_COLUMNS}
        for found, row in latest.items()
        if row[OP] != "d" and (row[COMMIT_POS], row[SEQ]) > cut
    }
