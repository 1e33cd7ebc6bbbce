"""A lake table's state at a position, as the Spark engine reads it."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from cdc_core.capture.position import Position
from cdc_core.capture.source import TableDescription
from cdc_core.lake.layout import LakeTable
from cdc_core.lake.mirror_state import mirror_read
from cdc_core.lake.sink import LakeSink
from cdc_core.lake.target import LakeEvent, TableBatch
from tests.validator.lake_sample import AT_12, write_sample_lake
from validator.engines.sides.spark.lake_target import lake_state_at, replay_state_at

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
    """Inserts, updates, deletes, a truncate and a column added: at every position the
    mirror read (a version alone, or with the changelog's later events) gives the rows a
    replay of the changelog gives."""
    lake = write_sample_lake(tmp_path)
    assert mirror_read(lake, 12).exact

    def rows(frame: Any) -> set[tuple[Any, ...]]:
        return {tuple(r) for r in frame.select("id", "v", "w").collect()}

    expected = AT_12
    assert rows(lake_state_at(spark, lake, ("id",), 12)) == expected
    assert rows(replay_state_at(spark, lake, ("id",), 12)) == expected
    assert sorted(lake_state_at(spark, lake, ("id",), 12).columns) == ["id", "v", "w"]
    # Below the last label: an older mirror version with the later events laid over it.
    for position in (5, 6, 7, 8, 10, 11):
        assert mirror_read(lake, position).exact == (position != 11), position  # 11: in 12's batch
        laid = rows(lake_state_at(spark, lake, ("id",), position))
        assert laid == rows(replay_state_at(spark, lake, ("id",), position)), position
