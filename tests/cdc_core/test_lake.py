"""How far a lake table has caught up, read while the pipeline creates or replaces it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa

from cdc_core.lake import LakeTable, append_changelog, high_water_mark, meta_fields


def test_the_mark_of_a_changelog_being_created_or_moved_aside_is_none(tmp_path: Path) -> None:
    # A validator waiting for the lake reads the mark while a reload moves the table's
    # changelog aside and writes a new one (postgres-default soak seed 5022 read a log
    # whose first commit had just gone): not there yet, so it waits, instead of failing.
    table = LakeTable(tmp_path / "lake", "shop.items")
    events = pa.Table.from_pylist([], pa.schema([pa.field("id", pa.int64()), *meta_fields()]))
    append_changelog(table, events, 120, "120", "test")
    assert high_water_mark(table) == 120

    shutil.move(str(table.changelog), str(tmp_path / "aside"))
    (table.changelog / "_delta_log").mkdir(parents=True)  # created, no commit yet
    assert table.exists()
    assert high_water_mark(table) is None

    shutil.rmtree(table.changelog / "_delta_log")
    shutil.copytree(tmp_path / "aside" / "_delta_log", table.changelog / "_delta_log")
    (table.changelog / "_delta_log" / "00000000000000000000.json").unlink()  # going
    assert high_water_mark(table) is None
