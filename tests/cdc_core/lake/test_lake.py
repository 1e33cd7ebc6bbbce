"""How far a lake table has caught up, and its files, read while the pipeline creates or
replaces it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake.exceptions import DeltaError

from cdc_core.errors import TerminalError, TransientError
from cdc_core.lake.layout import (
    ChangelogMoved,
    LakeTable,
    append_changelog,
    changelog_files,
    high_water_mark,
    meta_fields,
    retired_dir,
)


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


def _changelog(table: LakeTable, columns: list[str], position: int) -> None:
    fields = [pa.field(name, pa.int64()) for name in columns]
    events = pa.Table.from_pylist([], pa.schema([*fields, *meta_fields()]))
    append_changelog(table, events, position, str(position), "test")


def test_a_changelog_moved_aside_under_a_read_is_read_again_not_a_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # postgres-default soak seed 8245: the validator listed a changelog's log files, then a
    # reload after `ADD COLUMN` moved the table aside and the read failed with a bare
    # DeltaError. It is a move (the table comes back), told apart from a damaged log.
    import deltalake

    table = LakeTable(tmp_path / "lake", "shop.items")
    _changelog(table, ["id"], 120)
    opened = deltalake.DeltaTable

    def moved_under_the_read(path: str, *args: Any, **kwargs: Any) -> Any:
        if not (tmp_path / "aside").exists():  # the pipeline's reload, at this instant
            shutil.move(str(table.root), str(tmp_path / "aside"))
            _changelog(table, ["id", "v"], 130)
            path = str(tmp_path / "aside" / "changelog")
            shutil.rmtree(Path(path) / "_delta_log")  # gone as the read reaches it
        return opened(path, *args, **kwargs)

    monkeypatch.setattr(deltalake, "DeltaTable", moved_under_the_read)
    with pytest.raises(ChangelogMoved, match=r"shop\.items.*moved aside.*validate again"):
        changelog_files(table)
    assert changelog_files(table)[1].names[:2] == ["id", "v"]  # the new generation


def test_a_damaged_changelog_is_a_terminal_error_naming_the_table(tmp_path: Path) -> None:
    table = LakeTable(tmp_path / "lake", "shop.items")
    _changelog(table, ["id"], 120)
    _changelog(table, ["id"], 130)
    (table.changelog / "_delta_log" / "00000000000000000001.json").write_text("{not json")
    with pytest.raises(TerminalError, match=r"shop\.items.*cannot be read.*Delta log") as info:
        changelog_files(table)
    assert not isinstance(info.value, TransientError)
    with pytest.raises(DeltaError):
        high_water_mark(table)  # not mistaken for a table being created: it would wait


def test_a_changelog_gone_because_a_reload_moved_it_is_read_again_not_missing(
    tmp_path: Path,
) -> None:
    lake = tmp_path / "lake"
    table = LakeTable(lake, "shop.it[ems]")  # glob characters in the name are names
    _changelog(table, ["id"], 120)
    other = LakeTable(lake, "shop.other")
    moved = retired_dir(lake, "p") / f"{table.root.relative_to(lake)}@130"
    moved.parent.mkdir(parents=True)
    shutil.move(str(table.root), str(moved))  # as PipelineSink.retire_table does
    with pytest.raises(ChangelogMoved, match=r"shop\.it\[ems\].*validate again"):
        changelog_files(table)
    with pytest.raises(TerminalError, match=r"shop\.other has no changelog") as info:
        changelog_files(other)
    assert not isinstance(info.value, TransientError)
