"""The lake sink's pieces: value fitting, a batch's net effect on the mirror, idempotence."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from cdc_core.capture.position import Position
from cdc_core.capture.source import TableDescription
from cdc_core.lake.layout import LakeTable, RefreshMarks, high_water_mark, read_progress
from cdc_core.lake.sink import LakeSink, SchemaChangeError, fit_to_lake, net_effect
from cdc_core.lake.target import LakeEvent, TableBatch
from tests.cdc_core.lake_model import read_delta

TS = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
DESCRIPTION = TableDescription(
    "s.t", pa.schema([pa.field("id", pa.int64()), pa.field("at", pa.int64())]), ("id",)
)


def _event(op: str, key: int, position: int, seq: int, at: object = 0) -> LakeEvent:
    row = {} if op == "t" else {"id": key, "at": at}
    return LakeEvent(op, row, position, seq, f"x{position}", TS)


def test_times_from_a_log_are_stored_as_microseconds(tmp_path: Path) -> None:
    events = [
        _event("c", 1, 5, 0, dt.time(1, 2, 3, 4)),
        _event("c", 2, 5, 1, dt.timedelta(hours=-1)),
    ]

    LakeSink(tmp_path, "p").write([TableBatch(DESCRIPTION, events)], Position.of(5), ["s.t"])

    rows = read_delta(LakeTable(tmp_path, "s.t").changelog)
    assert sorted((r["id"], r["at"]) for r in rows) == [(1, 3_723_000_004), (2, -3_600_000_000)]


def test_writing_a_batch_again_writes_nothing_and_records_progress(tmp_path: Path) -> None:
    sink = LakeSink(tmp_path, "p")
    batch = TableBatch(DESCRIPTION, [_event("c", 1, 5, 0), _event("u", 1, 7, 0, 3)])
    assert sink.write([batch], Position.of(7), ["s.t", "s.quiet"]) == 2

    assert LakeSink(tmp_path, "p").write([batch], Position.of(7), ["s.t", "s.quiet"]) == 0

    assert len(read_delta(LakeTable(tmp_path, "s.t").changelog)) == 2
    assert read_delta(LakeTable(tmp_path, "s.t").mirror)[0]["at"] == 3
    assert read_progress(tmp_path)["p"] == (Position.of(7), frozenset({"s.t", "s.quiet"}))
    assert high_water_mark(LakeTable(tmp_path, "s.quiet")) == 7  # no changes, yet current


def test_net_effect_keeps_the_latest_event_per_key_after_the_last_truncate() -> None:
    events = [
        _event("c", 1, 5, 0),
        _event("t", 0, 6, 0),
        _event("c", 2, 7, 0),
        _event("u", 2, 8, 0, 9),
        _event("d", 3, 8, 1),
    ]

    truncated, latest = net_effect(events, ("id",))

    assert truncated
    assert [(e.op, e.row["id"], e.commit_pos) for e in latest] == [("u", 2, 8), ("d", 3, 8)]
    assert net_effect(events[:1], ("id",)) == (False, events[:1])


def test_fit_to_lake_casts_losslessly_or_names_column_and_fix() -> None:
    lake = pa.schema([pa.field("id", pa.int32())])
    fits = pa.table({"id": pa.array([1, 2], pa.int64())})
    assert fit_to_lake(fits, lake, "s.t").schema.field("id").type == pa.int32()

    with pytest.raises(SchemaChangeError, match="re-snapshot the table"):
        fit_to_lake(pa.table({"id": pa.array([2**40], pa.int64())}), lake, "s.t")

    # Integers into a narrow decimal: Arrow refuses the type, whatever the values; the values
    # decide here (NULLs only: postgres-default seed 4157, a column added again as integer).
    narrow = pa.schema([pa.field("d", pa.decimal128(18, 4))])
    for values in ([None, None], [5, None, -7]):
        fitted = fit_to_lake(pa.table({"d": pa.array(values, pa.int64())}), narrow, "s.t")
        assert fitted.column("d").to_pylist() == [v if v is None else Decimal(v) for v in values]
    with pytest.raises(SchemaChangeError, match=r"column d of table s\.t"):
        fit_to_lake(pa.table({"d": pa.array([10**15], pa.int64())}), narrow, "s.t")

    # Numbers are not times: Arrow casts -274 into a timestamp as 1969-12-31 23:59:59.999726
    # (mariadb-full seed 6054, a DATETIME column dropped and added again as an INT).
    times = pa.schema([pa.field("c0", pa.timestamp("us")), pa.field("n", pa.int64())])
    numbers = pa.table({"c0": pa.array([-274], pa.int32()), "n": pa.array([1], pa.int64())})
    with pytest.raises(SchemaChangeError, match=r"column c0 of table s\.t"):
        fit_to_lake(numbers, times, "s.t")
    clock = pa.table({"c0": pa.array([None], pa.timestamp("us")), "n": pa.array([0], pa.date32())})
    with pytest.raises(SchemaChangeError, match=r"column n of table s\.t"):
        fit_to_lake(clock, times, "s.t")


def test_lists_and_structs_are_written_and_merged_as_they_are(tmp_path: Path) -> None:
    """Array and time_tz columns (lists, a struct): created, then appended and merged into
    tables whose Delta schema names a list's item differently from Arrow's default."""
    clock = pa.struct([("micros", pa.int64()), ("offset_seconds", pa.int32())])
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("tags", pa.list_(pa.string())),
            ("at", clock),
            ("clocks", pa.list_(clock)),
            ("nums", pa.list_(pa.decimal128(10, 2))),
        ]
    )
    description = TableDescription("s.a", schema, ("id",))
    noon = {"micros": 43_200_000_000, "offset_seconds": -12_600}
    first = {"id": 1, "tags": ["a", None], "at": noon, "clocks": [noon, None], "nums": []}
    second = {"id": 1, "tags": [], "at": None, "clocks": None, "nums": [Decimal("1.10")]}
    sink = LakeSink(tmp_path, "p")
    for position, row in ((5, first), (7, second)):
        event = LakeEvent("c" if position == 5 else "u", row, position, 0, "x", TS)
        sink.write([TableBatch(description, [event])], Position.of(position), ["s.a"])

    table = LakeTable(tmp_path, "s.a")
    stored = [{k: r[k] for k in schema.names} for r in read_delta(table.changelog)]
    assert sorted(stored, key=lambda r: r["tags"]) == [second, first]
    assert [{k: r[k] for k in schema.names} for r in read_delta(table.mirror)] == [second]


def test_a_refresh_is_announced_before_the_batch_that_follows_its_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Soak seed 2105 (mariadb-full): between a changelog commit above a refresh's start and
    the progress file naming the refresh, a validator took the table as exact at a position
    whose rows the refresh had not rewritten yet (false differences)."""
    sink = LakeSink(tmp_path, "p")
    sink.write([TableBatch(DESCRIPTION, [_event("c", 1, 5, 0)])], Position.of(5), ["s.t"])
    seen = []
    write_table = LakeSink._write_table

    def observed(self: LakeSink, batch: TableBatch, position: Position) -> int:
        written = write_table(self, batch, position)
        seen.append(high_water_mark(LakeTable(tmp_path, "s.t")))  # a reader, mid-batch
        return written

    monkeypatch.setattr(LakeSink, "_write_table", observed)
    refreshing = RefreshMarks(refreshing={"s.t": 7})
    batch = TableBatch(DESCRIPTION, [_event("u", 1, 9, 0, 3)])
    sink.write([batch], Position.of(9), ["s.t"], refreshing)

    assert seen == [6]  # never 9: the refresh that began at 7 holds the mark below it
