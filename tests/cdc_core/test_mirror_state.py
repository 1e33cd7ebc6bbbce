"""Which mirror version holds a lake table's state at a position: only what the histories
prove, never an approximation."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable

from cdc_core.lake import COMMIT_POS, COMMIT_TS, OP, SEQ, TXID, LakeTable, append_changelog
from cdc_core.mirror_state import mirror_version_at
from cdc_core.position import Position
from cdc_core.sink import LakeEvent, LakeSink, TableBatch
from cdc_core.source import TableDescription

AT = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
TABLE = TableDescription("s.t", pa.schema([("id", pa.int64()), ("v", pa.int64())]), ("id",))


def _event(op: str, key: int, value: int | None, position: int, seq: int = 0) -> LakeEvent:
    return LakeEvent(op, {"id": key, "v": value}, position, seq, f"tx{position}", AT)


def _lake(tmp_path: Path) -> tuple[LakeSink, LakeTable]:
    """A lake the sink wrote: inserts at 5, an update and a delete at 9."""
    sink = LakeSink(tmp_path, "p")
    inserts = [_event("c", k, k * 10, 5, k) for k in (1, 2, 3)]
    sink.write([TableBatch(TABLE, inserts)], Position.of(5), ["s.t"])
    changes = [_event("u", 1, 11, 9, 0), _event("d", 2, 20, 9, 1)]
    sink.write([TableBatch(TABLE, changes)], Position.of(9), ["s.t"])
    return sink, LakeTable(tmp_path, "s.t")


def _newest(table: LakeTable) -> int:
    return DeltaTable(str(table.mirror)).version()


def test_the_mirror_holds_the_state_at_its_last_label_and_after_it(tmp_path: Path) -> None:
    _, table = _lake(tmp_path)

    for position in (9, 10, 10**12, None):
        found = mirror_version_at(table, position)
        assert found is not None and found.version == _newest(table), position
    mirror = DeltaTable(str(table.mirror)).to_pyarrow_table().to_pylist()
    assert {row["id"]: row["v"] for row in mirror} == {1: 11, 3: 30}


def test_not_below_the_last_label(tmp_path: Path) -> None:
    """At 8 the lake's state lies between two batches: the mirror holds the later one."""
    _, table = _lake(tmp_path)

    assert mirror_version_at(table, 8) is None
    assert mirror_version_at(table, 5) is None


def test_not_after_a_commit_to_the_changelog_behind_the_pipelines_back(tmp_path: Path) -> None:
    """Drift appended to the changelog at the lake's own position: only a replay shows it."""
    _, table = _lake(tmp_path)
    row = {"id": 7, "v": 70, OP: "c", COMMIT_POS: 9, SEQ: 99, TXID: "drift", COMMIT_TS: AT}
    schema = pa.schema(DeltaTable(str(table.changelog)).schema().to_arrow())
    append_changelog(table, pa.Table.from_pylist([row], schema), 9, "x", "drift")

    assert mirror_version_at(table, 9) is None


def test_a_schema_change_with_no_rows_keeps_the_pairing(tmp_path: Path) -> None:
    sink, table = _lake(tmp_path)
    wider = TableDescription("s.t", TABLE.schema.append(pa.field("w", pa.int64())), ("id",))
    sink.follow_schema(wider, Position.of(10))

    found = mirror_version_at(table, 10)

    assert found is not None and "w" in found.schema.names


def test_not_when_a_batch_reached_the_changelog_but_not_the_mirror(tmp_path: Path) -> None:
    """A crash between a batch's two commits: the mirror is behind its changelog."""
    _, table = _lake(tmp_path)
    row = {"id": 4, "v": 40, OP: "c", COMMIT_POS: 12, SEQ: 0, TXID: "t", COMMIT_TS: AT}
    schema = pa.schema(DeltaTable(str(table.changelog)).schema().to_arrow())
    append_changelog(table, pa.Table.from_pylist([row], schema), 12, "x", "replcheck.pipeline.p")

    assert mirror_version_at(table, 12) is None


def test_not_for_a_table_without_a_key_nor_a_table_not_in_the_lake(tmp_path: Path) -> None:
    table = LakeTable(tmp_path, "s.t")
    assert mirror_version_at(table, 5) is None
    keyless = TableDescription("s.t", TABLE.schema, ())
    LakeSink(tmp_path, "p").write(
        [TableBatch(keyless, [_event("c", 1, 1, 5)])], Position.of(5), ["s.t"]
    )
    assert table.exists()
    assert mirror_version_at(table, 5) is None
