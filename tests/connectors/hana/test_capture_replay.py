"""HANA trigger capture replayed from recorded sessions (``data/capture_*.json``, see
``recorded_session``) through the real generic reader and pipeline: transactions come in
position order, a gap stays open while its transaction is in ``M_TRANSACTIONS`` and its
transaction comes behind later ones when it commits, a rolled-back transaction never comes."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from cdc_core.capture.position import Position
from connectors.hana.trigger_dialect import HanaTriggerDialect
from connectors.trigger_capture.log_reader import TriggerLogReader, TriggerReaderConfig
from tests.connectors.hana.recorded_session import (
    RecordedHanaConnector,
    Recording,
    UnrecordedStatement,
)
from tests.connectors.trigger_capture.helpers import read_to_idle, show, transactions

DATA = Path(__file__).parent / "data"
URL = "hana+hdbcli://repl@hana.example:30015/?currentSchema=SHOP"
PLACED = dt.datetime(2026, 11, 27, 9)


def _dialect(recording: Recording) -> HanaTriggerDialect:
    return HanaTriggerDialect(RecordedHanaConnector(URL, recording), ["ORDERS"])


def _row(id_: int, amount: str, note: str, placed: dt.datetime | None = PLACED) -> dict[str, Any]:
    return {"ID": id_, "AMOUNT": Decimal(amount), "NOTE": note, "PLACED": placed}


def test_the_reader_holds_an_open_gap_and_yields_its_transaction_after_later_ones() -> None:
    recording = Recording(DATA / "capture_reader.json")
    reader = TriggerLogReader(_dialect(recording), TriggerReaderConfig(("SHOP.ORDERS",), 0.01))
    changes = reader.iter_changes(Position.of(10))
    first, at_first = read_to_idle(changes)
    held, while_open = read_to_idle(changes)  # B (13) and D (15) still run
    rest, at_end = read_to_idle(changes)  # D rolled back, B committed
    assert [show(c) for c in first] == [
        ("begin", 12),
        ("c", 12, "SHOP.ORDERS", (1,), _row(1, "10.00", "first")),
        ("c", 12, "SHOP.ORDERS", (2,), _row(2, "20.00", "second")),
        ("commit", 12),
    ]
    assert at_first == Position.of(12)
    assert held == [] and while_open == Position.of(12)  # C (14) and E (17) wait behind 13
    # B began first but committed last: it comes after C and E, at its last value 18.
    assert transactions(rest) == [("503", 14, 1), ("505", 17, 2), ("502", 18, 2)]
    assert [show(c) for c in rest if c.__class__.__name__ == "RowChange"] == [
        ("u", 14, "SHOP.ORDERS", (1,), _row(1, "11.00", "first")),
        ("d", 17, "SHOP.ORDERS", (2,), _row(2, "20.00", "second")),  # the key move: 2 -> 20
        ("c", 17, "SHOP.ORDERS", (20,), _row(20, "20.00", "second")),
        ("c", 18, "SHOP.ORDERS", (3,), _row(3, "30.00", "long transaction", None)),
        ("d", 18, "SHOP.ORDERS", (1,), _row(1, "11.00", "first")),
    ]
    assert at_end == Position.of(18)
    assert "504" not in {txid for txid, _, _ in transactions(first + rest)}  # rolled back
    assert recording.unanswered() == []


def test_a_statement_the_recording_does_not_hold_fails_naming_it() -> None:
    recording = Recording(DATA / "capture_reader.json")
    with pytest.raises(UnrecordedStatement, match="OTHER"):
        HanaTriggerDialect(RecordedHanaConnector(URL, recording), ["OTHER"]).check_installed(
            ["OTHER"]
        )


def test_the_pipeline_loads_at_a_capture_position_and_writes_the_transactions_in_order(
    tmp_path: Path,
) -> None:
    from deltalake import DeltaTable

    from cdc_core.capture.filters import TableFilter
    from cdc_core.lake.layout import LakeTable
    from cdc_core.names import COMMIT_POS, OP, SEQ, TXID
    from cdc_core.pipeline.loop import Pipeline, PipelineConfig

    recording = Recording(DATA / "capture_pipeline.json")
    dialect = _dialect(recording)
    reader = TriggerLogReader(dialect, TriggerReaderConfig(dialect.tables, 0.01, 0))
    config = PipelineConfig(
        "hana", tmp_path / "lake", tmp_path / "state", TableFilter.of_tables(dialect.tables)
    )
    pipeline = Pipeline(config, reader, dialect.snapshots(dialect.tables))
    done = [(t.txid, t.commit_pos.value) for t in pipeline.iter_transactions(Position.of(18))]
    lake = LakeTable(tmp_path / "lake", "SHOP.ORDERS")
    changelog = sorted(
        DeltaTable(str(lake.changelog)).to_pyarrow_table().to_pylist(),
        key=lambda row: (row[COMMIT_POS], row[SEQ]),
    )
    assert [(r[OP], r[COMMIT_POS], r[TXID], r["ID"]) for r in changelog] == [
        ("r", 10, None, 7), ("r", 10, None, 8),
        ("c", 12, "501", 1), ("c", 12, "501", 2),
        ("u", 14, "503", 1),
        ("d", 17, "505", 2), ("c", 17, "505", 20),
        ("c", 18, "502", 3), ("d", 18, "502", 1),
    ]  # fmt: skip
    mirror = DeltaTable(str(lake.mirror)).to_pyarrow_table().to_pylist()
    assert sorted((row["ID"], row["NOTE"]) for row in mirror) == [
        (3, "long transaction"),
        (7, "before"),
        (8, None),
        (20, "second"),
    ]
    assert done == [("501", 12), ("503", 14), ("505", 17), ("502", 18)]
    assert recording.unanswered() == []


def test_the_initial_snapshot_gives_its_locks_back_and_tries_again_while_a_table_is_written() -> (
    None
):
    from connectors.hana import sql
    from connectors.hana import trigger_sql as tsql
    from connectors.model import Partition

    source = tsql.Located("SHOP", "ORDERS")
    catalog = Recording(DATA / "capture_reader.json").exchanges[2:4]  # columns, primary key
    exchanges = [
        *catalog,
        {"call": "setautocommit", "args": [False]},
        {"sql": tsql.BEGIN_SNAPSHOT},
        {"call": "setautocommit", "args": [False]},
        {"sql": tsql.lock_exclusive(source), "error": "lock not available (NOWAIT)"},
        {"call": "rollback"},  # every lock given back before the next try
        {"sql": tsql.lock_exclusive(source)},
        {"sql": tsql.SEQUENCE_VALUE, "params": list(tsql.SEQUENCE_PARAMS), "rows": [[42]]},
        {"call": "rollback"},
        {
            "sql": sql.partition_select("SHOP", "ORDERS", ["ID", "AMOUNT", "NOTE", "PLACED"],
                                        Partition(0))[0],
            "rows": [[5, {"decimal": "5.00"}, "five", None]],
        },
        {"call": "rollback"},
    ]  # fmt: skip
    recording = Recording(Path("snapshot.json"), exchanges)
    dialect = _dialect(recording)
    with dialect.snapshots(dialect.tables).snapshot(dialect.tables) as (position, tables):
        rows = [row for table in tables for batch in table.batches for row in batch.to_pylist()]
    assert position == Position.of(42)
    assert rows == [_row(5, "5.00", "five", None)]
    assert recording.unanswered() == []


def test_a_session_recorded_through_the_recorder_is_the_recording_it_ran_on() -> None:
    """The recorder (used on a live server, see ``recorded_session``) writes what replay
    reads: recording the replayed reader session gives back the same exchanges."""
    import json

    from tests.connectors.hana.recorded_session import RecordingHanaConnector

    replayed = Recording(DATA / "capture_reader.json")
    recorded: list[dict[str, Any]] = []
    connector = RecordingHanaConnector(RecordedHanaConnector(URL, replayed), recorded)
    dialect = HanaTriggerDialect(connector, ["ORDERS"])
    reader = TriggerLogReader(dialect, TriggerReaderConfig(dialect.tables, 0.01))
    changes = reader.iter_changes(Position.of(10))
    for _ in range(3):
        read_to_idle(changes)
    assert replayed.unanswered() == []

    def key(exchange: dict[str, Any]) -> str:
        return json.dumps(exchange, sort_keys=True)

    assert sorted(map(key, recorded)) == sorted(map(key, replayed.exchanges))
