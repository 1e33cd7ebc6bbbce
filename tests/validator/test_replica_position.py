"""``replication: mariadb``: a MariaDB replica (a second private server replicating the
first by GTID on loopback) is compared with its primary at an agreed position while a
writer keeps changing the primary: no false difference, injected drift found exactly."""

from __future__ import annotations

import contextlib
import json
import random
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.private_servers import MariaDBServer, running_mariadb_replica
from validator.config import load_validator_config
from validator.demo.setup import found_differences
from validator.job import validate

pytestmark = [pytest.mark.integration, pytest.mark.mariadb, pytest.mark.spark]

ROWS = 300
WRITTEN = range(50, ROWS)  # the writer's keys; the drift is injected below them


@contextlib.contextmanager
def _writer(server: MariaDBServer, database: str) -> Iterator[list[int]]:
    stop, touched = threading.Event(), []

    def write() -> None:
        chance = random.Random(3)
        with contextlib.closing(server.connect(database)) as conn, conn.cursor() as cur:
            while not stop.is_set():
                key = chance.choice(WRITTEN)
                cur.execute("UPDATE t SET v = v + 1 WHERE id = %s", (key,))
                conn.commit()
                touched.append(key)
                stop.wait(0.005)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    try:
        yield touched
    finally:
        stop.set()
        thread.join(30)


def _wait_replicated(replica: MariaDBServer, database: str) -> None:
    with contextlib.closing(replica.connect(None)) as conn, conn.cursor() as cur:
        for _ in range(600):
            cur.execute(
                "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = %s",
                (database,),
            )
            if cur.fetchone()[0]:
                return
            threading.Event().wait(0.05)
    raise AssertionError("the replica never got the table")


def test_a_mariadb_replica_is_confirmed_at_the_primarys_gtid(
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
        _wait_replicated(replica, database)
        check = tmp_path / "validate.yaml"
        check.write_text(
            f"connections:\n  primary: {{url: {json.dumps(mariadb_full.url(database))}}}\n"
            f"  replica: {{url: {json.dumps(replica.url(database))}}}\n"
            "comparisons:\n  - {name: t, source: {connection: primary, table: t},"
            " target: {connection: replica, table: t}, replication: mariadb,"
            " options: {rows_per_leaf: 16}}\n"
            "validation: {recheck_lag_s: 0, replica_wait_timeout_s: 60}\n",
            encoding="utf-8",
        )
        with _writer(mariadb_full, database) as touched:
            with contextlib.closing(replica.connect(database)) as conn, conn.cursor() as cur:
                cur.execute("UPDATE t SET v = -1 WHERE id = 7")  # drift on the replica
                cur.execute("DELETE FROM t WHERE id = 8")
                cur.execute("INSERT INTO t VALUES (9999, 0)")
                conn.commit()
            document = validate(spark, load_validator_config(check, environ={}))

    assert touched, "the writer wrote while the comparison ran"
    assert found_differences(document) == {
        ("t", "changed", ("7",)),
        ("t", "missing_in_target", ("8",)),
        ("t", "extra_in_target", ("9999",)),
    }
    in_flight = {int(key[0]) for key in document["comparisons"][0]["in_flight"]}
    assert in_flight <= set(WRITTEN)
