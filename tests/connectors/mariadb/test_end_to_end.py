"""Issue 5 end to end: binlog (MINIMAL images) -> CDC pipeline -> Delta lake -> validation.

A mixed workload runs at the source (multi-row inserts that omit defaulted columns, updates,
deletes, a large transaction that spills, a rollback, a savepoint rollback, an ALTER TABLE
ADD COLUMN) while the real pipeline runs in a thread. The validator then compares source and
lake at agreed positions *while the workload keeps writing*: zero differences. Then the lake
is corrupted behind the pipeline's back (a delete, a changed row, an extra row, appended to
the changelog) and the validator reports exactly those rows.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from cdc_core.lake.layout import LakeTable, append_changelog, high_water_mark
from cdc_core.names import COMMIT_POS, COMMIT_TS, OP, SEQ, TXID
from cdc_core.pipeline.loop import Pipeline
from tests.connectors.mariadb.pipeline_helpers import execute, lake_rows, mariadb_pipeline
from tests.private_servers import MariaDBServer
from validator.config import load_validator_config
from validator.demo.setup import found_differences
from validator.job import validate

pytestmark = [pytest.mark.integration, pytest.mark.mariadb, pytest.mark.spark]

SCHEMA = (
    "CREATE TABLE accounts (id INT PRIMARY KEY, owner VARCHAR(40) NOT NULL,"
    " balance DECIMAL(12,2) NOT NULL, tier TINYINT DEFAULT 1, opened DATE DEFAULT '2020-01-01',"
    " updated DATETIME(6), created TIMESTAMP(6) DEFAULT CURRENT_TIMESTAMP(6))",
    "CREATE TABLE events (id BIGINT PRIMARY KEY, account_id INT, kind ENUM('in','out','fee')"
    " DEFAULT 'in', amount DOUBLE, payload JSON)",
)
INITIAL_ACCOUNTS = 2000
BIG_TRANSACTION_ROWS = 10_000
PAUSE_S = 0.02  # between the workload's small transactions
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
WAIT_S = 300.0  # how long the test waits for the pipeline before failing


@dataclass
class Workload:
    """Writes the mixed workload to the source on its own thread."""

    server: MariaDBServer
    database: str
    rng: random.Random = field(default_factory=lambda: random.Random(5))
    accounts: set[int] = field(default_factory=lambda: set(range(1, INITIAL_ACCOUNTS + 1)))
    next_account: int = INITIAL_ACCOUNTS + 1
    next_event: int = 1
    committed: int = 0
    scripted: threading.Event = field(default_factory=threading.Event)
    stop: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None

    def run(self) -> None:
        try:
            with contextlib.closing(self.server.connect(self.database)) as connection:
                connection.autocommit(False)
                with connection.cursor() as cursor:
                    self._scripted(connection, cursor)
                    self.scripted.set()
                    # A steady trickle, as an application writes (not a flood on 2 cores).
                    while not self.stop.wait(PAUSE_S):
                        self._small_transaction(cursor)
                        connection.commit()
                        self.committed += 1
        except BaseException as exc:  # reported by the test, not lost in the thread
            self.error = exc
            self.scripted.set()

    def _scripted(self, connection: Any, cursor: Any) -> None:
        """One of each: the statements the issue lists, each its own transaction."""
        steps: list[Callable[[], None]] = [
            lambda: self._insert_accounts(cursor, 500),  # one multi-row statement
            lambda: cursor.execute("UPDATE accounts SET balance = balance + 1 WHERE id % 7 = 0"),
            lambda: self._delete_accounts(cursor, range(100, 151)),
            lambda: self._big_transaction(cursor),
            lambda: self._rolled_back(connection, cursor),
            lambda: self._savepoint(cursor),
            lambda: cursor.execute("ALTER TABLE accounts ADD COLUMN note VARCHAR(40)"),
            lambda: cursor.execute("UPDATE accounts SET note = 'vip' WHERE id % 10 = 1"),
            lambda: self._insert_accounts(cursor, 50, note="new"),
        ]
        for step in steps:
            step()
            connection.commit()

    def _insert_accounts(self, cursor: Any, count: int, note: str | None = None) -> None:
        ids = range(self.next_account, self.next_account + count)
        self.next_account += count
        columns = "id, owner, balance, updated" + (", note" if note else "")
        extra = f", '{note}'" if note else ""
        values = ", ".join(
            f"({i}, 'owner {i}', {self.rng.randrange(10**6)}.25,"
            f" '2025-0{i % 9 + 1}-01 12:00:00.{i:06d}'{extra})"
            for i in ids
        )
        cursor.execute(f"INSERT INTO accounts ({columns}) VALUES {values}")  # tier, opened omitted
        self.accounts.update(ids)

    def _delete_accounts(self, cursor: Any, ids: range) -> None:
        cursor.execute(f"DELETE FROM accounts WHERE id BETWEEN {ids[0]} AND {ids[-1]}")
        self.accounts.difference_update(ids)

    def _insert_events(self, cursor: Any, count: int) -> None:
        ids = range(self.next_event, self.next_event + count)
        self.next_event += count
        owners = sorted(self.accounts)
        values = ", ".join(
            f"({i}, {self.rng.choice(owners)}, {self.rng.random() * 100:.6f},"
            f' \'{{"n": {i}, "tags": ["a"]}}\')'
            for i in ids
        )
        cursor.execute(f"INSERT INTO events (id, account_id, amount, payload) VALUES {values}")

    def _big_transaction(self, cursor: Any) -> None:
        for _ in range(BIG_TRANSACTION_ROWS // 1000):
            self._insert_events(cursor, 1000)
        cursor.execute("UPDATE accounts SET tier = tier + 1 WHERE id <= 5000")

    def _rolled_back(self, connection: Any, cursor: Any) -> None:
        cursor.execute("INSERT INTO accounts (id, owner, balance) VALUES (900000, 'ghost', 1)")
        cursor.execute("UPDATE accounts SET balance = 0")
        connection.rollback()

    def _savepoint(self, cursor: Any) -> None:
        cursor.execute("UPDATE accounts SET owner = 'kept' WHERE id = 1")
        cursor.execute("SAVEPOINT s")
        cursor.execute("DELETE FROM accounts WHERE id = 2")
        cursor.execute("ROLLBACK TO SAVEPOINT s")

    def _small_transaction(self, cursor: Any) -> None:
        choice = self.rng.random()
        if choice < 0.4:
            self._insert_accounts(cursor, self.rng.randrange(1, 4))
            self._insert_events(cursor, 2)
        elif choice < 0.8:
            picked = self.rng.sample(sorted(self.accounts), 3)
            cursor.execute(
                "UPDATE accounts SET balance = balance - 0.5, updated = NOW(6)"
                f" WHERE id IN ({', '.join(map(str, picked))})"
            )
        else:
            victim = self.rng.choice(sorted(self.accounts))
            self._delete_accounts(cursor, range(victim, victim + 1))


def _config(tmp_path: Path, server: MariaDBServer, database: str) -> Path:
    config = tmp_path / "replcheck.yaml"
    comparisons = "".join(
        f"  - name: {table}\n"
        f"    source: {{connection: src, table: {table}}}\n"
        f"    target: {{connection: lake, table: {database}.{table}}}\n"
        for table in ("accounts", "events")
    )
    config.write_text(
        "connections:\n"
        f'  src: {{url: "{server.url(database)}"}}\n'
        f'  lake: {{lake: "{tmp_path / "lake"}"}}\n'
        f"comparisons:\n{comparisons}"
        "validation: {lake_wait_timeout_s: 300}\n",
        encoding="utf-8",
    )
    return config


@contextlib.contextmanager
def _running(pipeline: Pipeline) -> Iterator[None]:
    """Run the pipeline on a thread until the block ends (``Pipeline.run`` + ``stop``)."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            pipeline.run()
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=run, name="pipeline", daemon=True)
    thread.start()
    try:
        yield
    finally:
        pipeline.stop()
        thread.join(timeout=300)
    assert not thread.is_alive(), "the pipeline did not stop"
    if failure:
        raise failure[0]


# A live MySQL too, when REPLCHECK_MYSQL_URL names one (tests/live_servers.py, issue 40).
@pytest.fixture(params=["mariadb_minimal", "mysql_live"])
def shop(
    request: pytest.FixtureRequest, mariadb_database: Callable[[MariaDBServer], str]
) -> tuple[MariaDBServer, str]:
    server: MariaDBServer = request.getfixturevalue(request.param)
    database = mariadb_database(server)
    rows = ", ".join(
        f"({i}, 'owner {i}', {i}.50, {i % 3}, '2019-05-05', '2024-01-01 00:00:00.{i:06d}',"
        " '2024-06-01 10:00:00')"
        for i in range(1, INITIAL_ACCOUNTS + 1)
    )
    execute(server, database, *SCHEMA, f"INSERT INTO accounts VALUES {rows}")
    return server, database


def test_validation_while_writing_finds_nothing_then_finds_exactly_the_corruption(
    spark: Any, shop: tuple[MariaDBServer, str], tmp_path: Path
) -> None:
    server, database = shop
    config = load_validator_config(_config(tmp_path, server, database), environ={})
    workload = Workload(server, database)
    writer = threading.Thread(target=workload.run, name="workload", daemon=True)
    # A small memory budget: the 10,000-change transaction spills to disk.
    with (
        mariadb_pipeline(
            server, database, ["accounts", "events"], tmp_path, memory_budget_bytes=1 << 20
        ) as (pipeline, _),
        _running(pipeline),
    ):
        lakes = [LakeTable(tmp_path / "lake", f"{database}.{t}") for t in ("accounts", "events")]
        _wait_for(lambda: all(lake.exists() for lake in lakes), "the initial load")
        writer.start()  # so that the workload reaches the lake through the binlog
        workload.scripted.wait(timeout=600)
        assert workload.error is None, workload.error
        before = workload.committed
        try:
            document = validate(spark, config)
        finally:
            during = workload.committed - before
            workload.stop.set()
            writer.join(timeout=120)
        assert workload.error is None, workload.error
        assert during > 0  # the source really changed while it was validated
        for comparison in document["comparisons"]:
            assert comparison["error"] is None, comparison["error"]
        assert document["status"] == "in_sync", [
            c["counts_by_kind"] for c in document["comparisons"]
        ]
        accounts = LakeTable(tmp_path / "lake", f"{database}.accounts")
        end = pipeline.reader.end_position().value  # the writer has stopped
        _wait_for(lambda: (high_water_mark(accounts) or 0) >= end, "the log's end")
        expected = _corrupt_lake(accounts, workload)
        found = found_differences(validate(spark, config, ["accounts"]))
    assert found == expected


def _wait_for(done: Callable[[], bool], what: str) -> None:
    """Wait until ``done()``; fail naming ``what`` after ``WAIT_S``."""
    deadline = time.monotonic() + WAIT_S
    while not done():
        assert time.monotonic() < deadline, f"the pipeline did not reach {what} in {WAIT_S} s"
        time.sleep(0.2)


def _corrupt_lake(
    lake_table: LakeTable, workload: Workload
) -> set[tuple[str, str, tuple[str, ...]]]:
    """Append a delete, a changed row and an extra row at the lake's own position, so the
    changelog says the lake holds them at a position the pipeline has already written."""
    import pyarrow as pa
    from deltalake import DeltaTable

    position = high_water_mark(lake_table)
    assert position is not None
    rows = lake_rows(lake_table.lake, lake_table.table, ["id"])
    victims = sorted(key[0] for key in rows)[:3]
    extra = max(workload.next_account, 10**6) + 1
    changes = [
        ("d", rows[(victims[0],)]),
        ("u", {**rows[(victims[1],)], "owner": "changed behind the back"}),
        ("c", {**rows[(victims[2],)], "id": extra}),
    ]
    events = [
        {**row, OP: op, COMMIT_POS: position, SEQ: 10_000 + seq, TXID: "corrupt", COMMIT_TS: NOW}
        for seq, (op, row) in enumerate(changes)
    ]
    schema = pa.schema(DeltaTable(str(lake_table.changelog)).schema().to_arrow())
    append_changelog(
        lake_table, pa.Table.from_pylist(events, schema), position, "corrupt", "corrupter"
    )
    return {
        ("accounts", "missing_in_target", (str(victims[0]),)),
        ("accounts", "changed", (str(victims[1]),)),
        ("accounts", "extra_in_target", (str(extra),)),
    }
