"""The shop recording through the whole pipeline into the lake: the changelog holds every
committed event in commit order and the mirror the tables' final state."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

from cdc_core.capture.filters import TableFilter
from cdc_core.lake.layout import LakeTable
from cdc_core.names import COMMIT_POS, OP, SEQ, TXID
from cdc_core.pipeline.loop import Pipeline, PipelineConfig
from tests.connectors.oracle.harness import DATA
from tests.connectors.oracle.replay import ReplayConfig, ReplayLogReader, ReplaySnapshotReader
from tests.connectors.oracle.test_replay import EVT, EXPECTED, O1, O3, O4, O7, ORD


def _read(path: Path) -> list[dict[str, object]]:
    from deltalake import DeltaTable

    return DeltaTable(str(path)).to_pyarrow_table().to_pylist()


def test_the_lake_holds_the_recorded_changes(tmp_path: Path) -> None:
    reader = ReplayLogReader(
        ReplayConfig(DATA / "shop_contents.jsonl", DATA / "shop_tables.json", "Europe/Berlin")
    )
    config = PipelineConfig(
        "oracle-shop", tmp_path / "lake", tmp_path / "state",
        TableFilter.of_tables([ORD, EVT]), batch_max_events=4,
    )  # fmt: skip
    reached = Pipeline(config, reader, ReplaySnapshotReader(reader)).run_until_caught_up()
    assert reached is not None and reached.value == 1062

    for table in (ORD, EVT):
        changelog = sorted(
            _read(LakeTable(tmp_path / "lake", table).changelog),
            key=lambda row: (row[COMMIT_POS], row[SEQ]),
        )
        expected = [e for e in EXPECTED if e.table == table]
        assert [(r[TXID], r[COMMIT_POS], r[SEQ], r[OP]) for r in changelog] == [
            (e.txid, e.commit_scn, e.seq, e.op) for e in expected
        ]
        for row, event in zip(changelog, expected, strict=True):
            image = event.after if event.op != "d" else event.before
            assert image is not None
            assert {column: row[column] for column in image} == image

    mirror = _read(LakeTable(tmp_path / "lake", ORD).mirror)
    final = [O1 | {"AMOUNT": Decimal("130.5")}, O3 | {"STATUS": "PAID      "}, O4, O7]
    assert sorted(({c: r[c] for c in O1} for r in mirror), key=lambda r: r["ID"]) == final  # type: ignore[arg-type, return-value]
    assert _read(LakeTable(tmp_path / "lake", EVT).mirror) == []


def test_a_truncate_of_a_table_with_not_null_columns_reaches_the_lake(tmp_path: Path) -> None:
    """Found by the generative tester (seed 1): the truncate's event has no row values, and
    the lake refused NULL in the NOT NULL key column."""
    import json

    def row(scn: int, code: int, **fields: object) -> str:
        record = {
            "SCN": scn,
            "TIMESTAMP": "2026-05-01 12:00:00",
            "XID": "0A0001",
            "OPERATION_CODE": code,
        }
        return json.dumps(record | fields) + "\n"

    table = {"SEG_OWNER": "SHOP", "TABLE_NAME": "ORDERS"}
    insert = 'insert into "SHOP"."ORDERS"("ID","CUSTOMER") values (\'1\',\'a\');'
    contents = tmp_path / "truncate.jsonl"
    contents.write_text(
        row(10, 6) + row(11, 1, ROW_ID="AAAA", SQL_REDO=insert, **table) + row(12, 7)
        + row(13, 6) + row(14, 5, SQL_REDO='truncate table "SHOP"."ORDERS"', **table) + row(15, 7),
        encoding="utf-8",
    )  # fmt: skip
    reader = ReplayLogReader(ReplayConfig(contents, DATA / "shop_tables.json"))
    config = PipelineConfig(
        "trunc", tmp_path / "lake", tmp_path / "state", TableFilter.of_tables([ORD])
    )
    assert (
        Pipeline(config, reader, ReplaySnapshotReader(reader)).run_until_caught_up()
        == reader.end_position()
    )
    changelog = sorted(
        _read(LakeTable(tmp_path / "lake", ORD).changelog), key=lambda r: int(str(r[COMMIT_POS]))
    )
    assert [(r[OP], r[COMMIT_POS], r["ID"]) for r in changelog] == [("c", 12, 1), ("t", 15, None)]
    assert _read(LakeTable(tmp_path / "lake", ORD).mirror) == []
    assert all(field.nullable for field in reader.describe(ORD).schema)
