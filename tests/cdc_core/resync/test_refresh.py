"""Re-sync events in the lake: ordering against the pipeline, the guarded mirror, no
high-water mark movement, idempotent retries."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from cdc_core.capture.position import Position
from cdc_core.capture.source import TableDescription
from cdc_core.errors import ContractError, TransientError
from cdc_core.lake.layout import RESYNC_POSITION_KEY, LakeTable, high_water_mark
from cdc_core.lake.sink import LakeSink
from cdc_core.lake.target import LakeEvent, TableBatch
from cdc_core.names import COMMIT_POS, OP, SEQ
from cdc_core.resync.rows import (
    REFRESH_SEQ_BASE,
    RefreshRequest,
    refresh,
)
from tests.cdc_core.lake_model import read_delta

TABLE = "shop.orders"
SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("qty", pa.int32())])
DESCRIPTION = TableDescription(TABLE, SCHEMA, ("id",))
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _event(op: str, row: Mapping[str, object], position: int, seq: int = 0) -> LakeEvent:
    return LakeEvent(op, row, position, seq, f"tx{position}", NOW)


def _pipeline_write(lake: Path, events: list[LakeEvent], position: int) -> None:
    LakeSink(lake, "shop").write([TableBatch(DESCRIPTION, events)], Position.of(position), [TABLE])


def _request(
    lake: Path, rows: list[dict[str, object]], gone: list[int], position: int
) -> RefreshRequest:
    return RefreshRequest(
        table=LakeTable(lake, TABLE),
        key=("id",),
        rows=pa.Table.from_pylist(rows, SCHEMA),
        deleted=pa.Table.from_pylist([{"id": k} for k in gone], pa.schema([SCHEMA.field("id")])),
        position=position,
        position_text=f"pos {position}",
        request_id="test-1",
    )


def _mirror(lake: Path) -> dict[object, object]:
    return {row["id"]: row["qty"] for row in read_delta(LakeTable(lake, TABLE).mirror)}


def _state_at(lake: Path, position: int) -> dict[object, object]:
    """Latest changelog event per key at or below ``position`` (deletes dropped)."""
    events = sorted(
        (e for e in read_delta(LakeTable(lake, TABLE).changelog) if e[COMMIT_POS] <= position),
        key=lambda e: (e[COMMIT_POS], e[SEQ]),
    )
    state: dict[object, object] = {}
    for event in events:
        if event[OP] == "d":
            state.pop(event["id"], None)
        else:
            state[event["id"]] = event["qty"]
    return state


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    lake = tmp_path / "lake"
    rows = [{"id": i, "qty": i} for i in range(1, 6)]
    _pipeline_write(lake, [_event("c", row, 100, seq) for seq, row in enumerate(rows)], 100)
    return lake


def test_refresh_orders_after_the_pipeline_at_its_position_and_keeps_the_mark(lake: Path) -> None:
    # Drift behind the pipeline's back: 1 lost, 2 changed, 9 extra -- at the same position.
    _pipeline_write(
        lake, [_event("d", {"id": 1}, 200), _event("u", {"id": 2, "qty": 99}, 200, 1)], 200
    )
    report = refresh(_request(lake, [{"id": 1, "qty": 1}, {"id": 2, "qty": 2}], [9], 200))

    assert (report.refreshed, report.deleted, report.mirror_skipped) == (2, 1, 0)
    assert _state_at(lake, 200) == {i: i for i in range(1, 6)}
    assert _mirror(lake) == {i: i for i in range(1, 6)}
    assert high_water_mark(LakeTable(lake, TABLE)) == 200  # not moved by the re-sync
    events = read_delta(LakeTable(lake, TABLE).changelog)
    resynced = [e for e in events if e["_txid"] == "resync:test-1"]
    assert sorted(e[SEQ] - REFRESH_SEQ_BASE for e in resynced) == [0, 1, 2]
    assert {e[OP] for e in resynced} == {"r", "d"}
    deletes = [e for e in resynced if e[OP] == "d"]
    assert deletes == [{**deletes[0], "id": 9, "qty": None}]


def test_newer_pipeline_events_win_in_changelog_and_mirror(lake: Path) -> None:
    # The pipeline wrote key 3 at 300 and deleted key 4 at 300; the re-sync read at 250.
    newer = [_event("u", {"id": 3, "qty": 33}, 300), _event("d", {"id": 4}, 300, 1)]
    _pipeline_write(lake, newer, 300)
    report = refresh(_request(lake, [{"id": 3, "qty": 3}, {"id": 4, "qty": 4}], [], 250))

    assert report.mirror_skipped == 2
    assert _state_at(lake, 300) == {1: 1, 2: 2, 3: 33, 5: 5}
    assert _state_at(lake, 250) == {1: 1, 2: 2, 3: 3, 4: 4, 5: 5}
    assert _mirror(lake) == {1: 1, 2: 2, 3: 33, 5: 5}  # no resurrected key 4, no stale 3


def test_the_mirror_guard_keeps_a_newer_row_the_search_did_not_see(lake: Path) -> None:
    # A mirror row newer than the refresh whose changelog event is not visible (as if the
    # pipeline raced): the MERGE's own guard t._commit_pos <= s._commit_pos keeps it.
    mirror = DeltaTable(str(LakeTable(lake, TABLE).mirror))
    mirror.update({"qty": "77", COMMIT_POS: "400"}, predicate="id = 5")
    refresh(_request(lake, [{"id": 5, "qty": 5}], [], 250))
    assert _mirror(lake)[5] == 77


def test_a_retried_refresh_writes_nothing_twice(lake: Path) -> None:
    request = _request(lake, [{"id": 2, "qty": 20}], [3], 150)
    refresh(request)
    refresh(request)
    events = read_delta(LakeTable(lake, TABLE).changelog)
    assert len([e for e in events if e["_txid"] == "resync:test-1"]) == 2
    history = DeltaTable(str(LakeTable(lake, TABLE).changelog)).history()
    assert [c[RESYNC_POSITION_KEY] for c in history if RESYNC_POSITION_KEY in c] == ["150"]
    assert _mirror(lake) == {1: 1, 2: 20, 4: 4, 5: 5}


def test_bad_requests_are_refused(tmp_path: Path, lake: Path) -> None:
    with pytest.raises(TransientError, match="run the CDC pipeline"):
        refresh(_request(tmp_path / "empty", [{"id": 1, "qty": 1}], [], 1))
    wrong = pa.table({"id": [1], "colour": ["red"]})
    request = _request(lake, [], [], 150)
    with pytest.raises(ContractError, match="columns the lake table lacks"):
        refresh(RefreshRequest(**{**_fields(request), "rows": wrong}))
    with pytest.raises(ContractError, match="lack key columns"):
        RefreshRequest(**{**_fields(request), "deleted": pa.table({"qty": [1]})})


def _fields(request: RefreshRequest) -> dict[str, object]:
    return {name: getattr(request, name) for name in RefreshRequest.__dataclass_fields__}
