"""Issue 37, item 1: a re-sync lasts. The keys a re-sync repaired are left in the lake as a
request; the pipeline reads them again from the source (a keyed refresh), so its row image
store learns the repaired rows and a later partial change (a MINIMAL image, a key move)
completes from them, not from the images of before the drift.

The source is test_table_refresh.py's ``MovingSource``; drift behind the log's back is an
edit of its rows that no log change shows (as MariaDB's ``SET sql_log_bin=0`` makes).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc_core.capture.events import ABSENT, RowChange
from cdc_core.capture.filters import TableFilter
from cdc_core.capture.position import Position
from cdc_core.capture.source import TableChanged
from cdc_core.ddl.table_refresh import RefreshState, TableRefresher
from cdc_core.lake.layout import LakeTable, read_marks
from cdc_core.pipeline.loop import Pipeline, PipelineConfig
from cdc_core.resync.requests import (
    ResyncRequest,
    read_requests,
    requests_dir,
    write_request,
)
from cdc_core.state.document import StateFileCorruptError
from tests.cdc_core.ddl.test_table_refresh import OTHER, TABLE, MovingSource, _transaction
from tests.cdc_core.lake_model import changelog_state, read_delta


def _config(tmp_path: Path) -> PipelineConfig:
    return PipelineConfig(
        "resync", tmp_path / "lake", tmp_path / "state", TableFilter.of_tables(["shop.*"]),
        refresh_chunk_rows=10,
    )  # fmt: skip


def _mirror(lake: Path) -> dict[tuple[object, ...], dict[str, object]]:
    rows = read_delta(LakeTable(lake, TABLE).mirror)
    return {(r["id"],): {"id": r["id"], "name": r["name"]} for r in rows}


def _move(txid: str, position: int, old: int, new: int) -> RowChange:
    """A key move whose log carries only the key (MINIMAL images)."""
    return RowChange(
        txid, Position.of(position), "u", TABLE, (old,),
        {"id": new, "name": ABSENT}, {"id": old, "name": ABSENT},
    )  # fmt: skip


def test_rows_a_resync_repaired_complete_later_partial_changes(tmp_path: Path) -> None:
    insert = RowChange("o", Position.of(41), "c", OTHER, (1,), {"id": 1, "name": "x"})
    created = TableChanged(Position.of(10), TABLE, "refresh", "CREATE TABLE items", "created")
    log = [created, *_transaction("o", 40, insert)]
    source = MovingSource({key: f"row{key}" for key in range(1, 6)}, log)
    config = _config(tmp_path)
    Pipeline(config, source, source, tables=[OTHER]).run_until_caught_up()
    lake = tmp_path / "lake"
    assert _mirror(lake)[(3,)] == {"id": 3, "name": "row3"}

    # Drift no log shows: row 3 changed, row 4 deleted, row 7 inserted. A re-sync wrote
    # them into the lake at the source's position and left the keys for the pipeline.
    source.initial[(3,)] = {"id": 3, "name": "drifted"}
    del source.initial[(4,)]
    source.initial[(7,)] = {"id": 7, "name": "new7"}
    keys = ({"id": 3}, {"id": 4}, {"id": 7})
    write_request(lake, ResyncRequest(TABLE, source.reached, keys, "r1"))
    source.log += _transaction("m", 50, _move("m", 51, 3, 300), _move("m", 52, 7, 700))
    Pipeline(config, source, source, tables=[OTHER, TABLE]).run_until_caught_up()

    expected = {(key,): {"id": key, "name": f"row{key}"} for key in (1, 2, 5)}
    expected[(300,)] = {"id": 300, "name": "drifted"}  # not row3: the store learned it
    expected[(700,)] = {"id": 700, "name": "new7"}
    assert _mirror(lake) == changelog_state(lake, TABLE, ("id",)) == expected
    assert [keys for _, keys in source.chunks][-1] == [3, 4, 7]  # one read, by key
    assert read_requests(lake, [TABLE]) == []  # taken, and gone once checkpointed
    assert TABLE not in read_marks(lake).refreshing


def test_a_request_for_another_pipelines_table_is_left_alone(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    write_request(lake, ResyncRequest("other.table", Position.of(5), ({"id": 1},), "r2"))
    assert read_requests(lake, [TABLE]) == []
    (request,) = read_requests(lake, ["other.table"])
    assert (request.table, request.position.value, request.keys) == (
        "other.table",
        5,
        ({"id": 1},),
    )


def test_a_truncated_request_names_the_file_and_the_fix(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    path = write_request(lake, ResyncRequest(TABLE, Position.of(5), ({"id": 1},), "r3"))
    path.write_bytes(path.read_bytes()[:20])
    with pytest.raises(StateFileCorruptError) as caught:
        read_requests(lake, [TABLE])
    assert str(path) in str(caught.value) and "resync --apply" in str(caught.value)
    assert path.parent == requests_dir(lake).local_path


def test_a_keyed_refresh_reads_keys_remembered_after_its_read_and_follows_moves() -> None:
    refresher = TableRefresher((), {})
    keyed = RefreshState(TABLE, Position.of(10), False, scanned=True, keyed=True)
    refresher.start_keys(RefreshState(**{**_fields(keyed), "pending": ((3,), (4,))}))
    assert refresher.rewriting() == {}  # other rows stay exact: the rebuild goes on as usual
    refresher.asked = refresher.states[0].pending  # as fetch() records the held chunk's keys
    refresher.moved(TABLE, (1,), (100,))  # not one of its keys: not followed
    refresher.moved(TABLE, (3,), (300,))  # its row moved after the read: read once more
    state, done = refresher.written(None, 2)  # type: ignore[arg-type]
    assert (done, state.pending) == (False, ((300,),))
    refresher.asked = state.pending
    state, done = refresher.written(None, 1)  # type: ignore[arg-type]
    assert (done, state.rows) == (True, 3)
    again = RefreshState.from_dict(keyed.to_dict())
    assert again.keyed and again.scanned


def _fields(state: RefreshState) -> dict[str, object]:
    return {name: getattr(state, name) for name in state.__slots__}  # type: ignore[attr-defined]


def test_a_keyed_refresh_gives_way_to_a_whole_one() -> None:
    refresher = TableRefresher((), {})
    keyed = RefreshState(TABLE, Position.of(10), False, scanned=True, pending=((3,),), keyed=True)
    refresher.start_keys(keyed)
    refresher.start(RefreshState(TABLE, Position.of(20), False, reason="DDL"))
    (state,) = refresher.states
    assert (state.keyed, state.since.value) == (False, 10)  # exact again only from the start
    assert refresher.rewriting() == {TABLE: state.since}
    refresher.start_keys(RefreshState(**{**_fields(keyed), "pending": ((8,),)}))
    assert not refresher.states[0].keyed and refresher.states[0].pending == ((8,),)
