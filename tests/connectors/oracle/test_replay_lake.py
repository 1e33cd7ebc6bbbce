"""The shop recording through the whole pipeline into the lake: the changelog holds every
committed event in commit order and the mirror the tables' final state."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

from cdc_core.filters import TableFilter
from cdc_core.lake import COMMIT_POS, OP, SEQ, TXID, LakeTable
from cdc_core.pipeline import Pipeline, PipelineConfig
from connectors.oracle.replay import ReplayConfig, ReplayLogReader, ReplaySnapshotReader
from tests.connectors.oracle.harness import DATA
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
