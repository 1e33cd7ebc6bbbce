"""MariaDB -> PostgreSQL: validate, re-sync (dry run, then applied), validate again.

A stand-in replication copies every MariaDB transaction to PostgreSQL right after its
commit (upserts and deletes, as a replication tool applies them). Drift of every kind is
injected into PostgreSQL behind its back. While the repair is applied, a writer keeps
changing the source -- drifted keys included -- and its replication competes with the
repair for the same target rows; the end state must be consistent.
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

import pytest

from tests.private_servers import MariaDBServer, PostgresServer
from tests.validator.resync.helpers import run_sql_file_postgres, write_config
from validator.config import ValidatorConfig, load_validator_config
from validator.demo.setup import found_differences
from validator.job import validate
from validator.resync.run import resync

pytestmark = [pytest.mark.integration, pytest.mark.mariadb, pytest.mark.postgres, pytest.mark.spark]

BASE = dt.datetime(2025, 3, 1, 12, 0, 0)
UPSERT = (
    "INSERT INTO orders VALUES (%s, %s, %s, %s) ON CONFLICT (id) DO UPDATE SET"
    " customer = EXCLUDED.customer, amount = EXCLUDED.amount, placed = EXCLUDED.placed"
)


class Replication:
    """Writes to MariaDB and applies each committed change to PostgreSQL."""

    def __init__(
        self, source: MariaDBServer, source_db: str, target: PostgresServer, target_db: str
    ) -> None:
        self.source = source.connect(source_db)
        self.target = target.connect(target_db)
        self.rng = random.Random(11)

    def row(self, key: int) -> tuple[Any, ...]:
        return (
            key,
            f"c-{self.rng.randrange(1000)} 'q'",
            decimal.Decimal(self.rng.randrange(100_000)) / 100,
            BASE + dt.timedelta(microseconds=self.rng.randrange(10**12)),
        )

    def upsert(self, rows: list[tuple[Any, ...]]) -> None:
        with self.source.cursor() as cur:
            cur.executemany("REPLACE INTO orders VALUES (%s, %s, %s, %s)", rows)
        with self.target.cursor() as cur:
            cur.executemany(UPSERT, rows)

    def delete(self, key: int) -> None:
        with self.source.cursor() as cur:
            cur.execute("DELETE FROM orders WHERE id = %s", (key,))
        self.target.execute("DELETE FROM orders WHERE id = %s", (key,))

    def close(self) -> None:
        self.source.close()
        self.target.close()


@pytest.fixture
def setup(
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    postgres: PostgresServer,
    postgres_database: Callable[[PostgresServer], str],
    tmp_path: Path,
) -> Iterator[tuple[ValidatorConfig, Callable[[], Replication], PostgresServer, str]]:
    source_db, target_db = mariadb_database(mariadb_full), postgres_database(postgres)
    with contextlib.closing(mariadb_full.connect(source_db)) as conn, conn.cursor() as cur:
        cur.execute(
            "CREATE TABLE orders (id INT PRIMARY KEY, customer VARCHAR(40), amount DECIMAL(10,2),"
            " placed DATETIME(6))"
        )
    with contextlib.closing(postgres.connect(target_db)) as conn:
        conn.execute(
            "CREATE TABLE orders (id int PRIMARY KEY, customer varchar(40),"
            " amount numeric(10,2), placed timestamp(6))"
        )
    comparison = """\
  - name: orders
    source: {connection: src, table: orders}
    target: {connection: pg, table: orders}"""
    path = write_config(
        tmp_path / "replcheck.yaml",
        {"src": mariadb_full.url(source_db), "pg": postgres.url(target_db)},
        comparison,
        "validation: {recheck_lag_s: 1}\nresync: {batch_size: 3}",
    )
    opened: list[Replication] = []

    def replication() -> Replication:
        opened.append(Replication(mariadb_full, source_db, postgres, target_db))
        return opened[-1]

    yield load_validator_config(path, environ={}), replication, postgres, target_db
    for item in opened:
        item.close()


def _drift(server: PostgresServer, database: str) -> None:
    with contextlib.closing(server.connect(database)) as conn:
        conn.execute("DELETE FROM orders WHERE id IN (7, 8)")
        conn.execute("UPDATE orders SET customer = 'drifted' WHERE id = 20")
        conn.execute("UPDATE orders SET amount = amount + 1, placed = NULL WHERE id = 21")
        conn.execute("INSERT INTO orders VALUES (9000, 'extra', 1.00, NULL)")


@contextlib.contextmanager
def writing(replication: Replication, hot: list[int]) -> Iterator[list[int]]:
    """Random changes to the source (replicated), again and again to the ``hot`` keys.

    Hot keys are only updated: one deleted at the source during the repair would be found on
    neither side, which a re-sync rightly counts as no success (``not_found``, exit 1)."""
    stop = threading.Event()
    written: list[int] = []

    def write() -> None:
        rng = random.Random(5)
        while not stop.is_set():
            key = rng.choice([*hot, *range(30, 200)])
            if key not in hot and rng.random() < 0.2:
                replication.delete(key)
            else:
                replication.upsert([replication.row(key)])
            written.append(key)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    try:
        yield written
    finally:
        stop.set()
        thread.join(timeout=60)


def test_validate_resync_validate_ends_in_sync_while_the_source_is_written(
    spark: Any,
    setup: tuple[ValidatorConfig, Callable[[], Replication], PostgresServer, str],
    tmp_path: Path,
) -> None:
    config, replication, postgres, target_db = setup
    replicated = replication()
    replicated.upsert([replicated.row(key) for key in range(1, 200)])
    _drift(postgres, target_db)
    first = validate(spark, config)
    assert found_differences(first) == {
        ("orders", "missing_in_target", ("7",)),
        ("orders", "missing_in_target", ("8",)),
        ("orders", "changed", ("20",)),
        ("orders", "changed", ("21",)),
        ("orders", "extra_in_target", ("9000",)),
    }

    proposed = resync(config, first, out_dir=tmp_path / "dry")
    assert proposed.comparisons[0].action_counts == {"insert": 2, "update": 2, "delete": 1}
    assert found_differences(validate(spark, config)) == found_differences(first)  # untouched

    with writing(replication(), hot=[8, 21]) as written:
        outcome = resync(config, first, apply=True, out_dir=tmp_path / "applied")
    assert {8, 21} & set(written)  # drifted keys changed at the source during the repair

    (done,) = outcome.comparisons
    assert done.error is None and done.mode.value == "applied"
    assert done.revalidation.value == "keys"
    assert done.remaining_total == 0 and outcome.exit_code == 0
    second = validate(spark, config)
    assert second["status"] == "in_sync", found_differences(second)


def test_the_reviewed_file_and_a_full_revalidation(
    spark: Any,
    setup: tuple[ValidatorConfig, Callable[[], Replication], PostgresServer, str],
    tmp_path: Path,
) -> None:
    config, replication, postgres, target_db = setup
    replicated = replication()
    replicated.upsert([replicated.row(key) for key in range(1, 60)])
    _drift(postgres, target_db)
    first = validate(spark, config)
    proposed = resync(config, first, out_dir=tmp_path)
    run_sql_file_postgres(postgres, target_db, Path(proposed.comparisons[0].sql_file or ""))

    checked = resync(
        config, first, apply=True, full_revalidation=True, spark=spark, out_dir=tmp_path
    )
    (done,) = checked.comparisons
    assert done.actions == () and done.unchanged == 5  # the file repaired everything
    assert done.revalidation.value == "full" and done.remaining_total == 0
    assert checked.full_revalidation["orders"]["status"] == "in_sync"
