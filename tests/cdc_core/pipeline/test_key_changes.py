"""Updates that change a row's key: the old key leaves the lake, and the changelog says so.

Issue 14, class 1: the mirror merged on the after-image's key only, so the old key stayed.
Each test checks the exact changelog events of the key-changing transaction, the mirror, and
the state the changelog alone gives (what the validator reads).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from cdc_core.capture.events import ABSENT
from cdc_core.capture.filters import TableFilter
from cdc_core.capture.source import TableDescription
from cdc_core.lake.layout import LakeTable
from cdc_core.names import COMMIT_POS, OP, SEQ
from cdc_core.pipeline.loop import Pipeline, PipelineConfig
from tests.cdc_core.lake_model import changelog_state, read_delta
from tests.cdc_core.scripted_source import ScriptedSource

TABLE = "shop.items"
SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("name", pa.string())])


def _row(key: int, name: str) -> dict[str, object]:
    return {"id": key, "name": name}


def _run(tmp_path: Path, source: ScriptedSource) -> Path:
    config = PipelineConfig(
        "keys", tmp_path / "lake", tmp_path / "state", TableFilter.of_tables([TABLE])
    )
    Pipeline(config, source, source).run_until_caught_up()
    return tmp_path / "lake"


def _events_at(lake: Path, position: int) -> list[tuple[str, int, int]]:
    """(op, id, seq) of the changelog events of one transaction, in changelog order."""
    rows = [
        row for row in read_delta(LakeTable(lake, TABLE).changelog) if row[COMMIT_POS] == position
    ]
    rows.sort(key=lambda row: row[SEQ])
    return [(row[OP], row["id"], row[SEQ]) for row in rows]


def _mirror(lake: Path) -> dict[int, str]:
    return {row["id"]: row["name"] for row in read_delta(LakeTable(lake, TABLE).mirror)}


def _keyed_source() -> ScriptedSource:
    """A table located by its key (MariaDB, PostgreSQL) holding rows 1, 2, 3."""
    source = ScriptedSource({TABLE: TableDescription(TABLE, SCHEMA, ("id",))})
    source.commit([("c", TABLE, _row(key, f"row{key}")) for key in (1, 2, 3)])
    return source


def _state(lake: Path) -> dict[int, str]:
    return {key[0]: row["name"] for key, row in changelog_state(lake, TABLE, ("id",)).items()}  # type: ignore[misc]


@pytest.mark.parametrize("minimal", [False, True], ids=["full-images", "minimal-images"])
def test_a_key_shift_moves_every_row_and_leaves_no_old_key(tmp_path: Path, minimal: bool) -> None:
    """``UPDATE items SET id = id + 1 ORDER BY id DESC`` as MariaDB logs it."""
    source = _keyed_source()
    moves = []
    for key in (3, 2, 1):
        before = {"id": key, "name": ABSENT} if minimal else _row(key, f"row{key}")
        after = {"id": key + 1, "name": ABSENT} if minimal else _row(key + 1, f"row{key}")
        moves.append(("u", TABLE, (key,), after, before))
    shift = source.commit_changes(moves)

    lake = _run(tmp_path, source)

    assert _events_at(lake, shift.value) == [
        ("d", 3, 0), ("c", 4, 0), ("d", 2, 1), ("c", 3, 1), ("d", 1, 2), ("c", 2, 2)
    ]  # fmt: skip
    expected = {2: "row1", 3: "row2", 4: "row3"}
    assert _mirror(lake) == expected
    assert _state(lake) == expected


def test_a_row_inserted_then_moved_in_one_transaction_keeps_only_its_new_key(
    tmp_path: Path,
) -> None:
    source = _keyed_source()
    moved = source.commit_changes(
        [
            ("c", TABLE, (7,), _row(7, "new"), None),
            ("u", TABLE, (7,), _row(8, "new"), _row(7, "new")),
        ]
    )

    lake = _run(tmp_path, source)

    assert _events_at(lake, moved.value) == [("c", 7, 0), ("d", 7, 1), ("c", 8, 1)]
    assert _mirror(lake) == _state(lake) == {1: "row1", 2: "row2", 3: "row3", 8: "new"}


def _rowid_source() -> ScriptedSource:
    """A table with a primary key whose rows the log locates by ROWID (Oracle)."""
    source = ScriptedSource({TABLE: TableDescription(TABLE, SCHEMA, ("id",))})
    source.commit_changes(
        [("c", TABLE, f"AAA{key}", _row(key, f"row{key}"), None) for key in (1, 2, 3)]
    )
    return source


def test_an_ascending_key_shift_by_rowid_keeps_the_rows_that_took_the_old_keys(
    tmp_path: Path,
) -> None:
    """Oracle checks keys at the end of the statement: row 1 moves onto key 2 while row 2
    still holds it. Deleting key 2 for row 2's move would delete row 1's new image."""
    source = _rowid_source()
    shift = source.commit_changes(
        [
            ("u", TABLE, f"AAA{key}", _row(key + 1, f"row{key}"), _row(key, f"row{key}"))
            for key in (1, 2, 3)
        ]
    )

    lake = _run(tmp_path, source)

    assert _events_at(lake, shift.value) == [("d", 1, 0), ("c", 2, 0), ("c", 3, 1), ("c", 4, 2)]
    expected = {2: "row1", 3: "row2", 4: "row3"}
    assert _mirror(lake) == expected
    assert _state(lake) == expected


def test_a_key_swap_by_rowid_keeps_both_rows(tmp_path: Path) -> None:
    """``UPDATE items SET id = 3 - id`` on rows 1 and 2 (Oracle)."""
    source = _rowid_source()
    source.commit_changes(
        [
            ("u", TABLE, "AAA1", _row(2, "row1"), _row(1, "row1")),
            ("u", TABLE, "AAA2", _row(1, "row2"), _row(2, "row2")),
        ]
    )

    lake = _run(tmp_path, source)

    expected = {1: "row2", 2: "row1", 3: "row3"}
    assert _mirror(lake) == expected
    assert _state(lake) == expected


def test_a_row_deleted_after_another_row_took_its_key_leaves_that_row(tmp_path: Path) -> None:
    """Row 1 moves onto key 2 in the statement that deletes row 2 (both by ROWID)."""
    source = _rowid_source()
    source.commit_changes(
        [
            ("u", TABLE, "AAA1", _row(2, "row1"), _row(1, "row1")),
            ("d", TABLE, "AAA2", None, _row(2, "row2")),
        ]
    )

    lake = _run(tmp_path, source)

    assert _mirror(lake) == _state(lake) == {2: "row1", 3: "row3"}
