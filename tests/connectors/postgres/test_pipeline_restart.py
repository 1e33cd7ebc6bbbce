"""The pipeline stopped while a streamed transaction is open, then restarted: the slot sends
the transaction whole again, the pipeline's restored buffer drops its partial copy first
(``resume_transactions``), and the lake ends equal to the source; acknowledged positions
reach the slot."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from cdc_core.capture.filters import TableFilter
from cdc_core.lake.layout import LakeTable
from cdc_core.names import META_COLUMNS
from cdc_core.pipeline.loop import Pipeline, PipelineConfig
from connectors.postgres.position import lsn_to_int
from connectors.registry import log_source_for
from tests.connectors.postgres.helpers import PgCase

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

TABLE = "public.t"


def _pipeline(case: PgCase, work: Path) -> Pipeline:
    url = case.server.url(case.database) + "?idle_s=0.1&decoding_work_mem=64kB"
    source = log_source_for(url, None, [TABLE])
    config = PipelineConfig(
        "pg-restart",
        work / "lake",
        work / "state",
        TableFilter.of_tables([TABLE]),
        batch_max_events=200,
        batch_max_seconds=0.2,
    )
    return Pipeline(config, source.reader, source.snapshots)


def _lake(work: Path) -> dict[int, dict[str, Any]]:
    from deltalake import DeltaTable

    rows = DeltaTable(str(LakeTable(work / "lake", TABLE).mirror)).to_pyarrow_table().to_pylist()
    return {row["id"]: {k: v for k, v in row.items() if k not in META_COLUMNS} for row in rows}


def _source(case: PgCase) -> dict[int, dict[str, Any]]:
    rows = case.connection.execute("SELECT id, pad FROM t").fetchall()
    return {key: {"id": key, "pad": pad} for key, pad in rows}


def _stop_with_open_transaction(pipeline: Pipeline) -> None:
    """Run until the pipeline holds a (streamed) open transaction, then stop it."""
    thread = threading.Thread(target=pipeline.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while pipeline.metrics().open_transactions == 0:
        assert time.monotonic() < deadline, "the big transaction was never streamed"
        time.sleep(0.05)
    pipeline.stop()
    thread.join(timeout=60)
    assert not thread.is_alive()


@pytest.mark.parametrize("outcome", ["commit", "rollback"])
def test_restart_with_a_streamed_transaction_open(
    case: PgCase, tmp_path: Path, outcome: str
) -> None:
    case.sql("CREATE TABLE t (id int PRIMARY KEY, pad text)", "INSERT INTO t VALUES (1, 'a')")
    first = _pipeline(case, tmp_path)
    first.run_until_caught_up()
    big = case.session()
    big.execute("INSERT INTO t SELECT g, repeat('x', 100) FROM generate_series(1000, 2999) AS g")
    big.execute("UPDATE t SET pad = 'b' WHERE id = 1")
    _stop_with_open_transaction(first)  # its buffer checkpoint holds part of `big`
    case.sql("INSERT INTO t VALUES (2, 'c')")
    big.commit() if outcome == "commit" else big.rollback()
    case.sql("INSERT INTO t VALUES (3, 'd')")

    second = _pipeline(case, tmp_path)
    second.run_until_caught_up()
    assert _lake(tmp_path) == _source(case)
    assert len(_source(case)) == (2003 if outcome == "commit" else 3)
    assert second.metrics().open_transactions == 0  # the partial copy did not linger
    confirmed = case.connection.execute(
        "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = 'replcheck'"
    ).fetchone()
    position = second.metrics().position
    assert confirmed is not None and position is not None
    assert lsn_to_int(confirmed[0]) == position.value  # acknowledged once in the lake
