"""Oracle (the recorded LogMiner session, through the replay reader) into MariaDB: the
target tables are created from Oracle's types and hold the recording's final state."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest

from cdc_core.capture.filters import TableFilter
from cdc_core.pipeline.config import TargetOptions
from cdc_core.pipeline.loop import Pipeline, PipelineConfig
from connectors.database_target.sink import DatabaseSink
from connectors.registry import connector_for
from connectors.sql_target import build_engine
from tests.connectors.oracle.harness import DATA
from tests.connectors.oracle.replay import (
    ReplayConfig,
    ReplayLogReader,
    ReplaySnapshotReader,
    load_tables,
)
from tests.connectors.oracle.test_replay import EVT, O1, O3, O4, O7, ORD
from tests.private_servers import MariaDBServer

pytestmark = [pytest.mark.integration, pytest.mark.mariadb]


def test_the_recorded_session_replicates_into_mariadb(
    tmp_path: Path,
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
) -> None:
    database = mariadb_database(mariadb_full)
    url = mariadb_full.url(database)
    tables = load_tables(DATA / "shop_tables.json")
    repair = connector_for(url).repair
    engine = build_engine(url, None, repair)
    sink = DatabaseSink(
        engine, repair, "oracle-shop", tables.__getitem__, TargetOptions(database), "mariadb"
    )
    reader = ReplayLogReader(
        ReplayConfig(DATA / "shop_contents.jsonl", DATA / "shop_tables.json", "Europe/Berlin")
    )
    config = PipelineConfig(
        "oracle-shop", None, tmp_path / "state", TableFilter.of_tables([ORD, EVT]),
        batch_max_events=4,
    )  # fmt: skip
    try:
        reached = Pipeline(
            config, reader, ReplaySnapshotReader(reader), sink=sink
        ).run_until_caught_up()
    finally:
        engine.dispose()
    assert reached is not None and reached.value == 1062

    with contextlib.closing(mariadb_full.connect(database)) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT {', '.join(f'`{c}`' for c in O1)} FROM ORDERS ORDER BY ID")
        names = [d[0] for d in cur.description]
        orders = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
        cur.execute("SELECT COUNT(*) FROM EVENTS")
        events = cur.fetchone()[0]
    final = [O1 | {"AMOUNT": Decimal("130.5")}, O3 | {"STATUS": "PAID      "}, O4, O7]
    assert orders == final
    assert events == 0
