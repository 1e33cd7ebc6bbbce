"""Validation at agreed positions while the source keeps changing: no false differences.

A writer thread changes MariaDB continuously and appends each committed transaction to the
lake's changelog at that transaction's real binlog position (what a CDC pipeline does, with
some lag). Each source partition is read in its own consistent snapshot at its own position
and compared with the lake as of that position, so the rows written meanwhile are never
reported. Then the lake is corrupted behind the "pipeline's" back and exactly that is found.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import random
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from cdc_core.lake.layout import LakeTable, append_changelog, meta_fields
from cdc_core.names import COMMIT_POS, COMMIT_TS, OP, SEQ, TXID
from connectors.mariadb.position import to_position
from tests.private_servers import MariaDBServer
from validator.config import load_validator_config
from validator.demo.setup import found_differences
from validator.job import validate

pytestmark = [pytest.mark.integration, pytest.mark.mariadb, pytest.mark.spark]

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("name", pa.string()),
        pa.field("amount", pa.decimal128(10, 2)),
        pa.field("updated", pa.timestamp("us")),
        *meta_fields(),
    ]
)
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


class Replicator:
    """Writes to MariaDB and mirrors each committed transaction into the lake."""

    def __init__(self, server: MariaDBServer, database: str, lake: LakeTable) -> None:
        self.server, self.database, self.lake = server, database, lake
        self.rng = random.Random(7)
        self.next_id = 1

    def _row(self, key: int) -> dict[str, Any]:
        return {
            "id": key,
            "name": f"name-{key}-{self.rng.randrange(1000)}",
            "amount": decimal.Decimal(self.rng.randrange(100_000)) / 100,
            "updated": dt.datetime(2025, 1, 1)
            + dt.timedelta(microseconds=self.rng.randrange(10**12)),
        }

    def commit(self, changes: list[tuple[str, dict[str, Any]]]) -> None:
        """Apply changes in one source transaction, then append them at its position."""
        with contextlib.closing(self.server.connect(self.database)) as conn:
            conn.autocommit(False)
            with conn.cursor() as cur:
                for op, row in changes:
                    if op == "d":
                        cur.execute("DELETE FROM t WHERE id = %s", (row["id"],))
                    else:
                        cur.execute(
                            "REPLACE INTO t VALUES (%s, %s, %s, %s)",
                            (row["id"], row["name"], row["amount"], row["updated"]),
                        )
                cur.execute("SHOW MASTER STATUS")
                conn.commit()
                cur.execute("SHOW MASTER STATUS")  # the end of this transaction's XID event
                log_file, offset = cur.fetchone()[:2]
        position = to_position(log_file, int(offset))
        events = [
            {**row, OP: op, COMMIT_POS: position, SEQ: seq, TXID: str(position), COMMIT_TS: NOW}
            for seq, (op, row) in enumerate(changes)
        ]
        append_changelog(
            self.lake,
            pa.Table.from_pylist(events, SCHEMA),
            position,
            f"{log_file}:{offset}",
            "test-replicator",
        )

    def insert_batch(self, count: int) -> list[dict[str, Any]]:
        rows = [self._row(self.next_id + i) for i in range(count)]
        self.next_id += count
        self.commit([("c", row) for row in rows])
        return rows

    def random_transaction(self, known: list[dict[str, Any]]) -> None:
        changed = self._row(self.rng.choice(known)["id"])
        victim = known.pop(self.rng.randrange(len(known)))
        fresh = self._row(self.next_id)
        self.next_id += 1
        known.append(fresh)
        self.commit([("u", changed), ("d", victim), ("c", fresh)])


@pytest.fixture
def replicated(
    mariadb_minimal: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    tmp_path: Path,
) -> Iterator[tuple[Replicator, Path]]:
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
    yield replicator, config


def test_no_false_differences_while_the_source_is_written(
    spark: Any, replicated: tuple[Replicator, Path]
) -> None:
    replicator, config_path = replicated
    known: list[dict[str, Any]] = []
    for _ in range(4):
        known += replicator.insert_batch(500)
    stop = threading.Event()
    written = []

    def write() -> None:
        while not stop.is_set():
            replicator.random_transaction(known)
            written.append(1)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        document = validate(spark, load_validator_config(config_path, environ={}))
    finally:
        stop.set()
        writer.join(timeout=60)
    comparison = document["comparisons"][0]
    assert comparison["error"] is None, comparison["error"]
    assert document["status"] == "in_sync", comparison["counts_by_kind"]
    assert len(written) > 0  # the source really changed during the run
    assert comparison["source_position"] is not None


def test_drift_behind_the_pipelines_back_is_found_exactly(
    spark: Any, replicated: tuple[Replicator, Path]
) -> None:
    replicator, config_path = replicated
    rows = replicator.insert_batch(1000)
    # Corrupt the lake only: a delete, a changed value and an extra row, at a later position.
    lake_only = [
        ("d", rows[10]),
        ("u", {**rows[20], "amount": rows[20]["amount"] + 1}),
        ("c", {**rows[30], "id": 999_999}),
    ]
    events = [
        {**row, OP: op, COMMIT_POS: 1 << 62, SEQ: seq, TXID: "corrupt", COMMIT_TS: NOW}
        for seq, (op, row) in enumerate(lake_only)
    ]
    # Positions far ahead would be ignored for a snapshot at P: write them at P itself, as a
    # faulty pipeline would have (same position as the last real transaction).
    mark = replicator.lake
    from cdc_core.lake.layout import high_water_mark

    position = high_water_mark(mark)
    assert position is not None
    for event in events:
        event[COMMIT_POS] = position
        event[SEQ] += 10_000
    append_changelog(mark, pa.Table.from_pylist(events, SCHEMA), position, "corrupt", "corrupter")
    document = validate(spark, load_validator_config(config_path, environ={}))
    assert found_differences(document) == {
        ("t", "missing_in_target", (str(rows[10]["id"]),)),
        ("t", "changed", (str(rows[20]["id"]),)),
        ("t", "extra_in_target", ("999999",)),
    }
