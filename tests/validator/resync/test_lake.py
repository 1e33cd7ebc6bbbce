"""MariaDB -> lake: validate, re-sync, validate again -- while the source keeps changing.

The lake is kept up with MariaDB by the stand-in pipeline of test_concurrent_source.py
(each source transaction appended at its real binlog position). Drift of every kind is
injected into the lake behind its back; a writer thread keeps changing the source,
including a drifted key, while the re-sync and the second validation run.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from cdc_core.lake.layout import (
    RESYNC_POSITION_KEY,
    RESYNC_POSITION_TEXT_KEY,
    LakeTable,
    append_changelog,
    high_water_mark,
)
from cdc_core.names import COMMIT_POS, COMMIT_TS, OP, SEQ, TXID
from tests.private_servers import MariaDBServer
from tests.validator.resync.helpers import result_for
from tests.validator.test_concurrent_source import NOW, SCHEMA, Replicator
from validator.config import ValidatorConfig, load_validator_config
from validator.demo.setup import found_differences
from validator.job import validate
from validator.resync.audit import DeltaAudit, read_audit
from validator.resync.run import resync

pytestmark = [pytest.mark.integration, pytest.mark.mariadb, pytest.mark.spark]


@pytest.fixture
def replicated(
    mariadb_minimal: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    tmp_path: Path,
) -> tuple[Replicator, ValidatorConfig]:
    database = mariadb_database(mariadb_minimal)
    with contextlib.closing(mariadb_minimal.connect(database)) as conn, conn.cursor() as cur:
        cur.execute(
            "CREATE TABLE t (id BIGINT PRIMARY KEY, name VARCHAR(40), amount DECIMAL(10,2),"
            " updated DATETIME(6))"
        )
    lake = tmp_path / "lake"
    replicator = Replicator(mariadb_minimal, database, LakeTable(lake, "shop.t"))
    config = tmp_path / "replcheck.yaml"
    config.write_text(f"""\
connections:
  src: {{url: "{mariadb_minimal.url(database)}"}}
  lake: {{lake: "{lake}"}}
comparisons:
  - name: t
    source: {{connection: src, table: t}}
    target: {{connection: lake, table: shop.t}}
validation: {{lake_wait_timeout_s: 60}}
""")
    return replicator, load_validator_config(config, environ={})


def _drift(replicator: Replicator, rows: list[dict[str, Any]]) -> None:
    """Lose, change and invent rows in the lake at its current position, as a faulty
    pipeline would (see test_concurrent_source.py)."""
    position = high_water_mark(replicator.lake)
    assert position is not None
    lake_only = [
        ("d", rows[10]),
        ("u", {**rows[20], "amount": rows[20]["amount"] + 1}),
        ("u", {**rows[30], "name": "drifted"}),
        ("c", {**rows[40], "id": 999_999}),
    ]
    events = [
        {**row, OP: op, COMMIT_POS: position, SEQ: 10_000 + seq, TXID: "bad", COMMIT_TS: NOW}
        for seq, (op, row) in enumerate(lake_only)
    ]
    table = pa.Table.from_pylist(events, SCHEMA)
    append_changelog(replicator.lake, table, position, "corrupt", "corrupter")


@contextlib.contextmanager
def writing(
    replicator: Replicator, known: list[dict[str, Any]], hot: dict[str, Any]
) -> Iterator[list[int]]:
    """A writer thread: random transactions, and again and again the drifted key ``hot``."""
    stop = threading.Event()
    written: list[int] = []

    def write() -> None:
        while not stop.is_set():
            replicator.random_transaction(known)
            replicator.commit([("u", replicator._row(hot["id"]))])
            written.append(1)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    try:
        yield written
    finally:
        stop.set()
        thread.join(timeout=60)


def test_validate_resync_validate_ends_in_sync_while_the_source_is_written(
    spark: Any, replicated: tuple[Replicator, ValidatorConfig], tmp_path: Path
) -> None:
    replicator, config = replicated
    rows = replicator.insert_batch(600)
    _drift(replicator, rows)
    first = validate(spark, config)
    assert found_differences(first) == {
        ("t", "missing_in_target", (str(rows[10]["id"]),)),
        ("t", "changed", (str(rows[20]["id"]),)),
        ("t", "changed", (str(rows[30]["id"]),)),
        ("t", "extra_in_target", ("999999",)),
    }
    known = list(rows[50:])  # the writer leaves the other drifted keys alone
    with writing(replicator, known, rows[30]) as written:
        outcome = resync(config, first, apply=True, out_dir=tmp_path / "out")
        second = validate(spark, config)
    assert written  # the source really changed during the re-sync

    (done,) = outcome.comparisons
    assert done.error is None and done.mode.value == "refreshed"
    assert done.action_counts == {"refresh": 3, "delete": 1}
    assert (done.revalidation.value, done.remaining_total, outcome.exit_code) == ("keys", 0, 0)
    assert second["status"] == "in_sync", second["comparisons"][0]["counts_by_kind"]
    _assert_audited(config, done.source_position)


def _assert_audited(config: ValidatorConfig, position: str | None) -> None:
    lake = config.connections["lake"].lake
    assert lake is not None
    (record,) = read_audit(DeltaAudit(lake / "_replcheck" / "resync_audit"))
    assert record["comparison"] == "t" and record["mode"] == "refreshed"
    assert record["keys_count"] == 4 and record["source_position"] == position
    assert dict(record["actions"]) == {"refresh": 3, "delete": 1}  # type: ignore[call-overload]
    assert record["user"] and record["at"] is not None


def test_a_refresh_never_raises_the_lake_high_water_mark(
    replicated: tuple[Replicator, ValidatorConfig], tmp_path: Path
) -> None:
    replicator, config = replicated
    rows = replicator.insert_batch(50)
    before = high_water_mark(replicator.lake)
    changed = [("changed", (str(rows[3]["id"]),)), ("extra_in_target", ("424242",))]
    result = result_for(config.comparison("t"), changed)
    outcome = resync(config, result, apply=True, out_dir=tmp_path)
    # 424242 is on neither side: nothing to delete (a key the result says only the lake
    # has, gone from it, is as the repair would leave it).
    assert outcome.comparisons[0].action_counts == {"refresh": 1}
    assert outcome.comparisons[0].not_found == 0
    assert high_water_mark(replicator.lake) == before
    history = DeltaTable(str(replicator.lake.changelog)).history()
    positions = [
        (c[RESYNC_POSITION_KEY], c[RESYNC_POSITION_TEXT_KEY])
        for c in history
        if RESYNC_POSITION_KEY in c
    ]
    # The outcome and the lake's commit spell the position as every command does.
    [(value, text)] = positions
    assert int(value) > 0 and text == outcome.comparisons[0].source_position
    assert text.startswith("mariadb-bin.") and text.endswith(f":{int(value) & 0xFFFFFFFF}")
    assert json.loads(json.dumps(outcome.to_dict()))["exit_code"] == 0
