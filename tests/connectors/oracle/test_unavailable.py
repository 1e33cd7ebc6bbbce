"""Values LogMiner cannot render (``Unsupported Type``): marked UNAVAILABLE by the parser,
read as of their commit SCN by the rebuild's hook, never taken stale from the row image store.

The recording updates a LONG column LogMiner shows as ``Unsupported Type``; a hook function
stands for the source as of each commit SCN (the Oracle SQL it would send is tested as text
and binds here, and against a server in ``test_live.py``).
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path

import pytest

from cdc_core.capture.events import ABSENT, UNAVAILABLE, RowChange
from cdc_core.capture.filters import TableFilter
from cdc_core.capture.position import Position
from cdc_core.errors import TerminalError
from cdc_core.lake.layout import LakeTable
from cdc_core.names import COMMIT_POS, OP, SEQ
from cdc_core.pipeline.loop import Pipeline, PipelineConfig
from cdc_core.rebuild.full_width import RebuildConfig, UnavailableValueError
from connectors.oracle.errors import FlashbackTooOldError, from_driver_error
from connectors.oracle.unavailable_columns import UnavailableColumns, as_of_row_query
from tests.connectors.oracle.harness import DATA, Core, Event, until_idle
from tests.connectors.oracle.replay import (
    ReplayConfig,
    ReplayLogReader,
    ReplaySnapshotReader,
    load_tables,
)

DOCS = "SHOP.DOCS"
R1 = "AAAR3sAAEAAAACXAAA"
T1, T2, T3, T4 = "01000100AA000000", "02000200BB000000", "03000300CC000000", "04000400DD000000"
TABLES = {
    DOCS: {
        "key": ["ID"],
        "columns": [
            ["ID", "NUMBER", 10, 0, "N"],
            ["TITLE", "VARCHAR2", None, None, "Y"],
            ["BODY", "LONG", None, None, "Y"],
        ],
    }
}
INSERT = 'insert into "SHOP"."DOCS"("ID","TITLE","BODY") values (\'1\',\'first\',Unsupported Type);'
RETITLE = 'update "SHOP"."DOCS" set "TITLE" = \'second\' where "TITLE" = \'first\';'
REWRITE = 'update "SHOP"."DOCS" set "BODY" = Unsupported Type where "BODY" = Unsupported Type;'
DELETE = 'delete from "SHOP"."DOCS" where "ID" = \'1\';'
UNDO = 'insert into "SHOP"."DOCS"("ID","TITLE","BODY") values (\'1\',\'second\',Unsupported Type);'
# The source as of each commit SCN: what a flashback read by ROWID would return.
AS_OF = {(R1, 102): "body v1", (R1, 108): "body v2"}


def _row(scn: int, xid: str, code: int, sql: str | None = None, undo: str | None = None) -> dict:
    row: dict[str, object] = {"SCN": scn, "TIMESTAMP": "2026-05-01 12:00:00", "XID": xid}
    row["OPERATION_CODE"] = code
    if sql is not None:
        row |= {"SEG_OWNER": "SHOP", "TABLE_NAME": "DOCS", "ROW_ID": R1, "SQL_REDO": sql}
        row |= {"SQL_UNDO": undo, "RS_ID": f" 0x000001.{scn:08x}.0010 ", "SSN": 0}
    return row


RECORDING = [
    _row(100, T1, 6), _row(101, T1, 1, INSERT), _row(102, T1, 7),
    _row(103, T2, 6), _row(104, T2, 3, RETITLE), _row(105, T2, 7),
    _row(106, T3, 6), _row(107, T3, 3, REWRITE), _row(108, T3, 7),
    _row(109, T4, 6), _row(110, T4, 2, DELETE, UNDO), _row(111, T4, 7),
]  # fmt: skip


class AsOfSource:
    """A fetch_unavailable hook answering from ``AS_OF``; records how it was called."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Hashable, int, tuple[str, ...]]] = []

    def __call__(
        self, table: str, locator: Hashable, position: Position, columns: Sequence[str]
    ) -> Mapping[str, object] | None:
        self.calls.append((table, locator, position.value, tuple(columns)))
        value = AS_OF.get((locator, position.value))  # type: ignore[arg-type]
        return None if value is None else {"BODY": value}


@pytest.fixture
def reader(tmp_path: Path) -> ReplayLogReader:
    contents, tables = tmp_path / "docs.jsonl", tmp_path / "docs_tables.json"
    contents.write_text("".join(json.dumps(row) + "\n" for row in RECORDING), encoding="utf-8")
    tables.write_text(json.dumps(TABLES), encoding="utf-8")
    return ReplayLogReader(ReplayConfig(contents, tables))


def test_new_unrenderable_values_are_unavailable_old_ones_absent(reader: ReplayLogReader) -> None:
    changes = [c for c in until_idle(reader.iter_changes(None)) if isinstance(c, RowChange)]
    insert, retitle, rewrite, delete = changes
    assert insert.after == {"ID": 1, "TITLE": "first", "BODY": UNAVAILABLE}
    assert retitle.after is not None and retitle.after["BODY"] is ABSENT  # not set: unchanged
    assert rewrite.after is not None and rewrite.after["BODY"] is UNAVAILABLE
    assert rewrite.before is not None and rewrite.before["BODY"] is ABSENT
    assert delete.before == {"ID": 1, "TITLE": "second", "BODY": ABSENT}  # from SQL_UNDO


def test_the_rebuild_reads_them_as_of_the_commit_scn_never_stale(
    reader: ReplayLogReader, tmp_path: Path
) -> None:
    source = AsOfSource()
    config = RebuildConfig(fetch_unavailable_by_table={DOCS: source})
    core = Core(tmp_path, budget=0, rebuild=config)
    first = {"ID": 1, "TITLE": "first", "BODY": "body v1"}
    second = first | {"TITLE": "second"}
    rewritten = second | {"BODY": "body v2"}
    assert core.run(reader) == [
        Event(T1, 102, 0, "c", DOCS, R1, first, None),
        Event(T2, 105, 0, "u", DOCS, R1, second, first),
        Event(T3, 108, 0, "u", DOCS, R1, rewritten, second),
        Event(T4, 111, 0, "d", DOCS, R1, None, rewritten),
    ]
    # Read at the commit's SCN (not the change's), once per change that set the value.
    assert source.calls == [(DOCS, R1, 102, ("BODY",)), (DOCS, R1, 108, ("BODY",))]


def test_without_a_hook_the_rebuild_stops_naming_table_column_locator_and_position(
    reader: ReplayLogReader, tmp_path: Path
) -> None:
    with pytest.raises(UnavailableValueError) as caught:
        Core(tmp_path).run(reader)
    message = str(caught.value)
    for part in ("['BODY']", DOCS, R1, "position 102", "fetch_unavailable", "ignore_columns"):
        assert part in message


def _pipeline_config(tmp_path: Path, **hooks: object) -> PipelineConfig:
    tables = TableFilter.of_tables([DOCS])
    return PipelineConfig("docs", tmp_path / "lake", tmp_path / "state", tables, **hooks)  # type: ignore[arg-type]


def test_the_pipeline_without_a_hook_stops_before_writing_a_stale_value(
    reader: ReplayLogReader, tmp_path: Path
) -> None:
    pipeline = Pipeline(_pipeline_config(tmp_path), reader, ReplaySnapshotReader(reader))
    with pytest.raises(UnavailableValueError, match=r"columns \['BODY'\] of table SHOP.DOCS"):
        pipeline.run_until_caught_up()
    assert _changelog(tmp_path) == []  # the initial load's empty table, no stale event


def _changelog(tmp_path: Path) -> list[tuple[object, object]]:
    from deltalake import DeltaTable

    rows = DeltaTable(str(LakeTable(tmp_path / "lake", DOCS).changelog)).to_pyarrow_table()
    ordered = sorted(rows.to_pylist(), key=lambda row: (row[COMMIT_POS], row[SEQ]))
    return [(row[OP], row["BODY"]) for row in ordered]


def test_the_pipeline_writes_the_values_read_as_of_each_commit(
    reader: ReplayLogReader, tmp_path: Path
) -> None:
    config = _pipeline_config(tmp_path, fetch_unavailable={DOCS: AsOfSource()})
    Pipeline(config, reader, ReplaySnapshotReader(reader)).run_until_caught_up()
    assert _changelog(tmp_path) == [
        ("c", "body v1"), ("u", "body v1"), ("u", "body v2"), ("d", "body v2"),
    ]  # fmt: skip


def test_the_flashback_read_by_rowid_as_of_the_commit_scn() -> None:
    events = load_tables(DATA / "shop_tables.json")["SHOP.EVENTS"]
    query, binds = as_of_row_query(events, ["PAYLOAD", "AT"], R1, 108)
    assert query == (
        'SELECT "PAYLOAD", SYS_EXTRACT_UTC("AT") AS "AT" FROM "SHOP"."EVENTS"'
        " AS OF SCN :scn WHERE ROWID = CHARTOROWID(:rid)"
    )
    assert binds == {"scn": 108, "rid": R1}


def test_a_flashback_past_the_undo_is_terminal_and_names_the_fix() -> None:
    for code in (1555, 8180, 1466):
        error = from_driver_error(code, "snapshot too old", "read table T as of SCN 7", {"scn": 7})
        assert isinstance(error, FlashbackTooOldError)
        assert f"ORA-{code:05d}" in str(error) and "SCN 7" in str(error)
        assert "UNDO_RETENTION" in str(error) and "re-snapshot" in str(error)


def test_the_hook_refuses_a_locator_that_is_not_a_rowid() -> None:
    def connect() -> None:
        raise AssertionError("no connection may be opened for a bad locator")

    hook = UnavailableColumns(connect, {})
    with pytest.raises(TerminalError, match="not captured by ROWID"):
        hook(DOCS, (1,), Position(108, "108"), ["BODY"])
