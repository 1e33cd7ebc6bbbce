"""``replication: mariadb`` and ``postgres``: a MariaDB replica (a second private server
replicating the first by GTID on loopback) and a PostgreSQL logical subscriber (a second
cluster) are compared with their source at an agreed position while a writer keeps
changing the source: no false difference, injected drift found exactly."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.live_writer import updating
from tests.private_servers import (
    MariaDBServer,
    PostgresServer,
    running_mariadb_replica,
    running_postgres,
    running_postgres_standby,
)
from validator.config import load_validator_config
from validator.demo.setup import found_differences
from validator.job import validate

pytestmark = [pytest.mark.integration, pytest.mark.mariadb, pytest.mark.spark]

ROWS = 300
WRITTEN = range(50, ROWS)  # the writer's keys; the drift is injected below them


INJECTED = {
    ("t", "changed", ("7",)),
    ("t", "missing_in_target", ("8",)),
    ("t", "extra_in_target", ("9999",)),
}
Server = MariaDBServer | PostgresServer


def _wait_for(condition: Callable[[], bool]) -> None:
    for _ in range(1200):
        if condition():
            return
        threading.Event().wait(0.05)
    raise AssertionError("the replica never caught up with its set-up")


def _replicated(replica: MariaDBServer, database: str) -> bool:
    with contextlib.closing(replica.connect(None)) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = %s", (database,)
        )
        return bool(cur.fetchone()[0])


def _validate_under_writes(
    spark: Any, tmp_path: Path, source: Server, replica: Server, database: str, kind: str
) -> dict[str, Any]:
    """Drift injected into the replica, then a validation while a writer runs."""
    check = tmp_path / "validate.yaml"
    check.write_text(
        f"connections:\n  primary: {{url: {json.dumps(source.url(database))}}}\n"
        f"  replica: {{url: {json.dumps(replica.url(database))}}}\n"
        "comparisons:\n  - {name: t, source: {connection: primary, table: t},"
        f" target: {{connection: replica, table: t}}, replication: {kind},"
        " options: {rows_per_leaf: 16}}\n"
        "validation: {recheck_lag_s: 0, replica_wait_timeout_s: 60}\n",
        encoding="utf-8",
    )
    with updating(source, database, WRITTEN, 3) as touched:
        with contextlib.closing(replica.connect(database)) as conn:
            cursor = conn.cursor()
            cursor.execute("UPDATE t SET v = -1 WHERE id = 7")  # drift on the replica
            cursor.execute("DELETE FROM t WHERE id = 8")
            cursor.execute("INSERT INTO t VALUES (9999, 0)")
            conn.commit()
        document = validate(spark, load_validator_config(check, environ={}))
    assert touched, "the writer wrote while the comparison ran"
    return document


@pytest.mark.parametrize("declared", ["mariadb", "unknown"])  # unknown: detected
def test_a_mariadb_replica_is_confirmed_at_the_primarys_gtid(
    declared: str,
    spark: Any,
    tmp_path: Path,
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
) -> None:
    with running_mariadb_replica(mariadb_full) as replica:
        database = mariadb_database(mariadb_full)
        with contextlib.closing(mariadb_full.connect(database)) as conn, conn.cursor() as cur:
            cur.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v INT)")
            cur.executemany("INSERT INTO t VALUES (%s, 0)", [(i,) for i in range(ROWS)])
            conn.commit()
        _wait_for(lambda: _replicated(replica, database))
        document = _validate_under_writes(
            spark, tmp_path, mariadb_full, replica, database, declared
        )

    assert found_differences(document) == INJECTED
    in_flight = {int(key[0]) for key in document["comparisons"][0]["in_flight"]}
    assert in_flight <= set(WRITTEN)


@contextlib.contextmanager
def _stalled(subscriber: PostgresServer, database: str) -> Iterator[None]:
    """A row of the writer's locked on the subscriber for a while: its apply worker waits
    (a lagging replica), then goes on (the lock is rolled back, nothing changes)."""
    locked = threading.Event()

    def hold() -> None:
        with contextlib.closing(subscriber.connect(database)) as conn:
            conn.execute(f"SELECT * FROM t WHERE id = {WRITTEN[0]} FOR UPDATE")
            locked.set()
            threading.Event().wait(4.0)
            conn.rollback()

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    locked.wait(30)
    try:
        yield
    finally:
        thread.join(30)


def _subscribed(subscriber: PostgresServer, name: str) -> bool:
    with contextlib.closing(subscriber.connect(name)) as conn:
        states = conn.execute("SELECT srsubstate FROM pg_subscription_rel").fetchall()
    return bool(states) and all(state == "r" for (state,) in states)


@pytest.mark.postgres
def test_a_postgres_subscriber_is_confirmed_at_the_sources_lsn(
    spark: Any,
    tmp_path: Path,
    postgres: PostgresServer,
    postgres_database: Callable[[PostgresServer], str],
) -> None:
    database = postgres_database(postgres)
    table = "CREATE TABLE t (id bigint PRIMARY KEY, v integer)"
    with contextlib.closing(postgres.connect(database)) as conn:
        conn.execute(table)
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO t VALUES (%s, 0)", [(i,) for i in range(ROWS)])
        conn.execute("CREATE PUBLICATION copy FOR TABLE t")
        conn.commit()
    with running_postgres() as subscriber:
        with contextlib.closing(subscriber.connect("postgres")) as conn:
            conn.autocommit = True
            conn.execute(f"CREATE DATABASE {database}")
        with contextlib.closing(subscriber.connect(database)) as conn:
            conn.autocommit = True
            conn.execute(table)
            conn.execute(
                f"CREATE SUBSCRIPTION copy CONNECTION 'host=127.0.0.1 port={postgres.port}"
                f" dbname={database} user=postgres' PUBLICATION copy"
            )
        try:
            _wait_for(lambda: _subscribed(subscriber, database))
            with _stalled(subscriber, database):  # the subscriber falls behind meanwhile
                document = _validate_under_writes(
                    spark, tmp_path, postgres, subscriber, database, "postgres"
                )
        finally:
            with contextlib.closing(subscriber.connect(database)) as conn:
                conn.autocommit = True
                conn.execute("DROP SUBSCRIPTION copy")  # its slot at the source too

    assert found_differences(document) == INJECTED
    in_flight = {int(key[0]) for key in document["comparisons"][0]["in_flight"]}
    assert in_flight <= set(WRITTEN)


@contextlib.contextmanager
def _replay_paused(standby: PostgresServer) -> Iterator[None]:
    """The standby stops replaying for a while (a lagging replica), then goes on."""
    paused = threading.Event()

    def pause() -> None:
        with contextlib.closing(standby.connect("test")) as conn:
            conn.autocommit = True
            conn.execute("SELECT pg_wal_replay_pause()")
            paused.set()
            threading.Event().wait(4.0)
            conn.execute("SELECT pg_wal_replay_resume()")

    thread = threading.Thread(target=pause, daemon=True)
    thread.start()
    paused.wait(30)
    try:
        yield
    finally:
        thread.join(30)


@pytest.mark.postgres
def test_a_postgres_standby_is_confirmed_at_the_sources_lsn(spark: Any, tmp_path: Path) -> None:
    """A physical standby cannot hold drift of its own (it is read-only): the comparison
    under a writer, with replay paused meanwhile, finds nothing."""
    with running_postgres() as primary:
        with contextlib.closing(primary.connect("test")) as conn:
            conn.execute("CREATE TABLE t (id bigint PRIMARY KEY, v integer)")
            with conn.cursor() as cur:
                cur.executemany("INSERT INTO t VALUES (%s, 0)", [(i,) for i in range(ROWS)])
            conn.commit()
        with running_postgres_standby(primary) as standby:
            check = tmp_path / "validate.yaml"
            check.write_text(
                f"connections:\n  primary: {{url: {json.dumps(primary.url('test'))}}}\n"
                f"  standby: {{url: {json.dumps(standby.url('test'))}}}\n"
                "comparisons:\n  - {name: t, source: {connection: primary, table: t},"
                " target: {connection: standby, table: t}, replication: unknown,"
                " options: {rows_per_leaf: 16}}\n"
                "validation: {recheck_lag_s: 0, replica_wait_timeout_s: 60}\n",
                encoding="utf-8",
            )
            with updating(primary, "test", WRITTEN, 3) as touched, _replay_paused(standby):
                document = validate(spark, load_validator_config(check, environ={}))

    assert touched
    comparison = document["comparisons"][0]
    assert (comparison["status"], comparison["differences"]) == ("in_sync", [])
    assert {int(key[0]) for key in comparison["in_flight"]} <= set(WRITTEN)
