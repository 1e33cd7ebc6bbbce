"""A lake table's state at a position, as the Spark engine reads it."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from cdc_core.lake import LakeTable
from cdc_core.mirror_state import mirror_read
from cdc_core.position import Position
from cdc_core.sink import LakeEvent, LakeSink, TableBatch
from cdc_core.source import TableDescription
from validator.engines.spark.lake_target import lake_state_at, replay_state_at

pytestmark = pytest.mark.spark


def test_a_column_added_with_no_event_since_reads_as_null(spark: Any, tmp_path: Path) -> None:
    """Soak seed 1013 (mariadb-full): ``ALTER TABLE t4 ADD COLUMN back`tick INT`` was the
    last statement; the table's schema had the column, no data file did, and the validator
    could not resolve it."""
    before = TableDescription("s.t", pa.schema([("id", pa.int64()), ("v", pa.int64())]), ("id",))
    after = TableDescription(
        "s.t", before.schema.append(pa.field("back`tick", pa.int64())), ("id",)
    )
    sink = LakeSink(tmp_path, "p")
    at = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    rows = [LakeEvent("c", {"id": 1, "v": 2}, 5, 0, "x", at)]
    sink.write([TableBatch(before, rows)], Position.of(5), ["s.t"])
    sink.follow_schema(after, Position.of(6))

    state = lake_state_at(spark, LakeTable(tmp_path, "s.t"), ("id",), 6)

    assert [tuple(r) for r in state.select("id", "v", "`back``tick`").collect()] == [(1, 2, None)]


def test_the_mirror_read_equals_the_changelogreplay_state_at(spark: Any, tmp_path: Path) -> None:
    """Inserts, updates, deletes, a truncate and a column added: where the histories prove
    a mirror version holds the state, reading it gives the rows a replay gives."""
    table = TableDescription("s.t", pa.schema([("id", pa.int64()), ("v", pa.string())]), ("id",))
    wider = TableDescription("s.t", table.schema.append(pa.field("w", pa.int64())), ("id",))
    sink = LakeSink(tmp_path, "p")
    at = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

    def event(op: str, row: dict[str, Any], position: int, seq: int) -> LakeEvent:
        return LakeEvent(op, row, position, seq, "x", at)

    first = [event("c", {"id": k, "v": f"v{k}"}, 5, k) for k in range(6)]
    sink.write([TableBatch(table, first)], Position.of(5), ["s.t"])
    sink.write([TableBatch(table, [event("t", {}, 7, 0)])], Position.of(7), ["s.t"])
    again = [event("c", {"id": k, "v": f"again{k}"}, 8, k) for k in range(4)]
    sink.write([TableBatch(table, again)], Position.of(8), ["s.t"])
    sink.follow_schema(wider, Position.of(9))
    later = [
        event("u", {"id": 1, "v": "u1", "w": 7}, 11, 0),
        event("d", {"id": 2, "v": "again2", "w": None}, 11, 1),
        event("c", {"id": 9, "v": None, "w": 9}, 12, 0),
    ]
    sink.write([TableBatch(wider, later)], Position.of(12), ["s.t"])
    lake = LakeTable(tmp_path, "s.t")
    assert mirror_read(lake, 12).exact

    def rows(frame: Any) -> set[tuple[Any, ...]]:
        return {tuple(r) for r in frame.select("id", "v", "w").collect()}

    expected = {(0, "again0", None), (1, "u1", 7), (3, "again3", None), (9, None, 9)}
    assert rows(lake_state_at(spark, lake, ("id",), 12)) == expected
    assert rows(replay_state_at(spark, lake, ("id",), 12)) == expected
    assert sorted(lake_state_at(spark, lake, ("id",), 12).columns) == ["id", "v", "w"]
    # Below the last label: an older mirror version with the later events laid over it.
    for position in (5, 6, 7, 8, 10, 11):
        assert mirror_read(lake, position).exact == (position != 11), position  # 11: in 12's batch
        laid = rows(lake_state_at(spark, lake, ("id",), position))
        assert laid == rows(replay_state_at(spark, lake, ("id",), position)), position
