"""Re-sync never waits for itself, and every wait that can block ends with a clear error.

Source and target are two databases of one PostgreSQL cluster: the source's exact snapshot
(a replication slot) waits for every transaction running in the cluster, so a repair
transaction held open on the target while the source is read would wait for itself. The
waits a stranger can cause -- a transaction left open in the cluster, a locked target row --
end after their limit with a message that says what to look for.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cdc_core.errors import TransientError
from connectors.postgres import exported_snapshot as exported
from tests.private_servers import MariaDBServer, PostgresServer
from tests.validator.resync.helpers import result_for, write_config
from validator.config import ValidatorConfig, load_validator_config
from validator.resync import database as resync_database
from validator.resync.run import resync

pytestmark = [pytest.mark.integration, pytest.mark.postgres, pytest.mark.mariadb]

SOURCE = [(1, "one"), (2, "two"), (3, "three")]
TARGET = [(1, "one"), (2, "TWO"), (4, "four")]
DIFFERENCES = [("changed", ("2",)), ("missing_in_target", ("3",)), ("extra_in_target", ("4",))]


@pytest.fixture
def pair(
    tmp_path: Path, postgres: PostgresServer, postgres_database: Callable[[PostgresServer], str]
) -> Iterator[tuple[ValidatorConfig, str]]:
    names = []
    for rows in (SOURCE, TARGET):
        name = postgres_database(postgres)
        with contextlib.closing(postgres.connect(name)) as conn:
            conn.execute("CREATE TABLE t (id int PRIMARY KEY, note text)")
            conn.cursor().executemany("INSERT INTO t VALUES (%s, %s)", rows)
        names.append(name)
    path = write_config(
        tmp_path / "replcheck.yaml",
        {"src": postgres.url(names[0]), "tgt": postgres.url(names[1])},
        "  - name: t\n    source: {connection: src, table: t}\n"
        "    target: {connection: tgt, table: t}",
        "validation: {recheck_lag_s: 0}\nresync: {audit: file}",
    )
    yield load_validator_config(path, environ={}), names[1]


def _rows(server: PostgresServer, database: str) -> list[tuple[object, ...]]:
    with contextlib.closing(server.connect(database)) as conn:
        return [tuple(r) for r in conn.execute("SELECT * FROM t ORDER BY id").fetchall()]


def test_apply_on_one_cluster_repairs_without_waiting_for_itself(
    pair: tuple[ValidatorConfig, str], postgres: PostgresServer, tmp_path: Path
) -> None:
    config, target = pair
    outcome = resync(
        config, result_for(config.comparison("t"), DIFFERENCES), apply=True, out_dir=tmp_path
    )
    assert outcome.exit_code == 0 and outcome.comparisons[0].repaired
    assert _rows(postgres, target) == SOURCE


def test_a_snapshot_behind_an_open_transaction_gives_up_naming_it(
    pair: tuple[ValidatorConfig, str],
    postgres: PostgresServer,
    postgres_database: Callable[[PostgresServer], str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(exported, "SLOT_WAIT_S", 1.0)
    other = postgres_database(postgres)
    with contextlib.closing(postgres.connect(other)) as idle:
        idle.execute("CREATE TABLE x (i int)")
        idle.execute("BEGIN")
        idle.execute("INSERT INTO x VALUES (1)")  # holds an xid until rolled back
        snapshot = exported.exported_snapshot(postgres.dsn(other), "the test database")
        with pytest.raises(TransientError, match="pg_stat_activity"), snapshot:
            pass
        idle.execute("ROLLBACK")


def test_a_locked_target_row_fails_the_batch_after_the_lock_limit(
    postgres: PostgresServer,
    postgres_database: Callable[[PostgresServer], str],
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The target is MariaDB: a lock held in the source's cluster would stop the snapshot
    # first (the test above), not the repair's lock wait.
    source = postgres_database(postgres)
    with contextlib.closing(postgres.connect(source)) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, note text)")
        conn.cursor().executemany("INSERT INTO t VALUES (%s, %s)", SOURCE)
    target = mariadb_database(mariadb_full)
    with contextlib.closing(mariadb_full.connect(target)) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, note TEXT)")
        cur.executemany("INSERT INTO t VALUES (%s, %s)", TARGET)
        conn.commit()
    path = write_config(
        tmp_path / "replcheck.yaml",
        {"src": postgres.url(source), "tgt": mariadb_full.url(target)},
        "  - name: t\n    source: {connection: src, table: public.t}\n"
        "    target: {connection: tgt, table: t}",
        "validation: {recheck_lag_s: 0}\nresync: {audit: file}",
    )
    config = load_validator_config(path, environ={})
    monkeypatch.setattr(resync_database, "LOCK_WAIT_S", 1.0)
    with contextlib.closing(mariadb_full.connect(target)) as holder, holder.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute("SELECT * FROM t WHERE id = 2 FOR UPDATE")
        result = result_for(config.comparison("t"), DIFFERENCES)
        outcome = resync(config, result, apply=True, out_dir=tmp_path)
        cur.execute("ROLLBACK")
    (done,) = outcome.comparisons
    assert outcome.exit_code == 2 and "stayed locked" in (done.error or "")
    with contextlib.closing(mariadb_full.connect(target)) as conn, conn.cursor() as cur:
        cur.execute("SELECT * FROM t ORDER BY id")
        assert [tuple(r) for r in cur.fetchall()] == TARGET
