"""A mirror data file replaced behind the pipeline's back: the next batch's MERGE would
fail on it for good; the sink names it and rebuilds the mirror from the changelog."""

from __future__ import annotations

import datetime as dt
import logging
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from cdc_core.capture.position import Position
from cdc_core.capture.source import TableDescription
from cdc_core.errors import TerminalError
from cdc_core.lake.layout import LakeTable
from cdc_core.lake.mirror_state import audit_lake, mirror_read
from cdc_core.lake.sink import LakeSink
from cdc_core.lake.target import LakeEvent, TableBatch

AT = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
TABLE = TableDescription("s.t", pa.schema([("id", pa.int64()), ("v", pa.int64())]), ("id",))


def _event(op: str, key: int, value: int | None, position: int, seq: int = 0) -> LakeEvent:
    return LakeEvent(op, {"id": key, "v": value}, position, seq, f"tx{position}", AT)


def _mirror(table: LakeTable) -> dict[int, int]:
    rows = DeltaTable(str(table.mirror)).to_pyarrow_table().to_pylist()
    return {row["id"]: row["v"] for row in rows}


def _replace_mirror_file(table: LakeTable) -> str:
    """Write other rows over the mirror's one data file, under its name."""
    (uri,) = DeltaTable(str(table.mirror)).file_uris()
    rows = pq.read_table(uri)
    pq.write_table(rows.set_column(1, "v", pa.array([-1] * rows.num_rows, pa.int64())), uri)
    return uri


def test_the_next_batch_rebuilds_a_mirror_whose_file_was_replaced(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sink = LakeSink(tmp_path, "p")
    sink.write(
        [TableBatch(TABLE, [_event("c", k, k * 10, 5, k) for k in (1, 2, 3)])],
        Position.of(5),
        ["s.t"],
    )
    table = LakeTable(tmp_path, "s.t")
    uri = _replace_mirror_file(table)
    assert [f.table for f in audit_lake(table).changed] == ["mirror"]
    caplog.set_level(logging.WARNING)

    again = LakeSink(tmp_path, "p")  # a restarted pipeline, as after the error it gave
    again.write(
        [TableBatch(TABLE, [_event("u", 2, 22, 9), _event("d", 3, None, 9, 1)])],
        Position.of(9),
        ["s.t"],
    )

    assert _mirror(table) == {1: 10, 2: 22}
    assert Path(uri).name in caplog.text and "rebuilding the mirror" in caplog.text
    assert audit_lake(table).changed == () and audit_lake(table).foreign == ()
    assert mirror_read(table, 9).exact


def test_a_damaged_changelog_too_stops_the_pipeline_naming_its_files(tmp_path: Path) -> None:
    sink = LakeSink(tmp_path, "p")
    sink.write([TableBatch(TABLE, [_event("c", 1, 10, 5)])], Position.of(5), ["s.t"])
    table = LakeTable(tmp_path, "s.t")
    _replace_mirror_file(table)
    (changelog_file,) = DeltaTable(str(table.changelog)).file_uris()
    shutil.copyfile(DeltaTable(str(table.mirror)).file_uris()[0], changelog_file)

    with pytest.raises(TerminalError, match=Path(changelog_file).name) as raised:
        LakeSink(tmp_path, "p").write(
            [TableBatch(TABLE, [_event("u", 1, 11, 9)])], Position.of(9), ["s.t"]
        )
    assert "load the table again" in str(raised.value)


def test_a_deleted_mirror_file_is_rebuilt_too(tmp_path: Path) -> None:
    sink = LakeSink(tmp_path, "p")
    sink.write([TableBatch(TABLE, [_event("c", 1, 10, 5)])], Position.of(5), ["s.t"])
    table = LakeTable(tmp_path, "s.t")
    (uri,) = DeltaTable(str(table.mirror)).file_uris()
    Path(uri).unlink()

    LakeSink(tmp_path, "p").write(
        [TableBatch(TABLE, [_event("c", 2, 20, 9)])], Position.of(9), ["s.t"]
    )

    assert _mirror(table) == {1: 10, 2: 20}


def test_a_resync_into_a_mirror_whose_file_was_replaced_rebuilds_it(tmp_path: Path) -> None:
    from cdc_core.resync.rows import RefreshRequest, refresh

    sink = LakeSink(tmp_path, "p")
    sink.write(
        [TableBatch(TABLE, [_event("c", k, k * 10, 5, k) for k in (1, 2)])], Position.of(5), ["s.t"]
    )
    table = LakeTable(tmp_path, "s.t")
    _replace_mirror_file(table)  # every v is -1 in the lake now
    request = RefreshRequest(
        table=table,
        key=("id",),
        rows=pa.Table.from_pylist([{"id": 2, "v": 20}], TABLE.schema),
        deleted=pa.Table.from_pylist([], pa.schema([TABLE.schema.field("id")])),
        position=7,
        position_text="7",
        request_id="r1",
    )

    refresh(request)

    assert _mirror(table) == {1: 10, 2: 20}  # rebuilt from the changelog and the re-sync
    assert audit_lake(table).changed == ()
