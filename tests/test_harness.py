"""The test harness itself: private servers and Spark are set up as the other tests assume."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests import private_servers as servers
from tests.private_servers import (
    LOOPBACK,
    SERVER_TIME_ZONE,
    MariaDBServer,
    PostgresServer,
    running_mariadb,
    running_postgres,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

REPO_ROOT = Path(__file__).resolve().parent.parent
GONE_TIMEOUT_S = 30.0
SYSTEM_PORTS = {3306, 5432}


def _mariadb_row(server: MariaDBServer, sql: str, database: str = "test") -> tuple[Any, ...]:
    with contextlib.closing(server.connect(database)) as conn, conn.cursor() as cur:
        cur.execute(sql)
        row = cur.fetchone()
    assert row is not None
    return tuple(row)


def _postgres_row(server: PostgresServer, sql: str, database: str = "test") -> tuple[Any, ...]:
    with contextlib.closing(server.connect(database)) as conn:
        row = conn.execute(sql).fetchone()
    assert row is not None
    return tuple(row)


def _is_alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _children(pid: int) -> set[int]:
    return {int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}


def _still_alive(pids: set[int]) -> set[int]:
    """Poll (bounded) until none of ``pids`` is alive; return those still alive."""
    deadline = time.monotonic() + GONE_TIMEOUT_S
    while (alive := {pid for pid in pids if _is_alive(pid)}) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive


@pytest.fixture(params=["mariadb_full", "mariadb_minimal"])
def any_mariadb(request: pytest.FixtureRequest) -> MariaDBServer:
    """Each session MariaDB server in turn."""
    server: MariaDBServer = request.getfixturevalue(request.param)
    return server


# --- MariaDB ----------------------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.mariadb
def test_mariadb_fixtures_have_their_row_images(
    mariadb_full: MariaDBServer, mariadb_minimal: MariaDBServer
) -> None:
    assert _mariadb_row(mariadb_full, "SELECT @@binlog_row_image") == ("FULL",)
    assert _mariadb_row(mariadb_minimal, "SELECT @@binlog_row_image") == ("MINIMAL",)
    assert (mariadb_full.binlog_row_image, mariadb_minimal.binlog_row_image) == ("FULL", "MINIMAL")


@pytest.mark.integration
@pytest.mark.mariadb
def test_mariadb_binlog_is_row_based_with_column_names(any_mariadb: MariaDBServer) -> None:
    sql = "SELECT @@log_bin, @@binlog_format, @@binlog_row_metadata, @@binlog_row_image"
    assert _mariadb_row(any_mariadb, sql) == (1, "ROW", "FULL", any_mariadb.binlog_row_image)


@pytest.mark.integration
@pytest.mark.mariadb
def test_mariadb_writes_gtids(
    mariadb_full: MariaDBServer, mariadb_database: Callable[[MariaDBServer], str]
) -> None:
    database = mariadb_database(mariadb_full)
    with contextlib.closing(mariadb_full.connect(database)) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY)")
        cur.execute("SELECT @@gtid_binlog_pos, @@server_id")
        gtid_position, server_id = cur.fetchone()
    domain, server, sequence = (int(part) for part in gtid_position.split("-"))
    assert (domain, server) == (0, server_id)
    assert sequence > 0


@pytest.mark.integration
@pytest.mark.mariadb
def test_mariadb_runs_privately(any_mariadb: MariaDBServer) -> None:
    sql = "SELECT @@port, @@bind_address, @@datadir, @@socket"
    port, bind_address, datadir, socket_path = _mariadb_row(any_mariadb, sql)
    assert port == any_mariadb.port
    assert port not in SYSTEM_PORTS
    assert bind_address == LOOPBACK
    assert Path(datadir) == any_mariadb.datadir
    assert any_mariadb.datadir.is_relative_to("/tmp") and any_mariadb.datadir.is_dir()
    assert Path(socket_path) == any_mariadb.socket


@pytest.mark.integration
@pytest.mark.mariadb
def test_a_server_given_a_port_another_server_holds_starts_on_a_free_one(
    mariadb_full: MariaDBServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two soaks started at once drew the same free port: the later server's readiness
    # check reached the earlier server, and its soak then lost its server.
    taken = iter([mariadb_full.port])
    free_port = servers._free_port
    monkeypatch.setattr(servers, "_free_port", lambda: next(taken, None) or free_port())
    with servers.running_mariadb("FULL") as other:
        assert other.port != mariadb_full.port
        assert _mariadb_row(other, "SELECT @@socket") == (str(other.socket),)


def test_mariadb_time_zone_is_not_utc(any_mariadb: MariaDBServer) -> None:
    sql = "SELECT @@global.time_zone, TIMESTAMPDIFF(MINUTE, UTC_TIMESTAMP(), NOW())"
    time_zone, offset_minutes = _mariadb_row(any_mariadb, sql)
    assert time_zone == SERVER_TIME_ZONE == any_mariadb.time_zone
    assert offset_minutes in (60, 120)  # CET or CEST, whichever applies today


@pytest.mark.integration
@pytest.mark.mariadb
def test_mariadb_timestamps_follow_the_server_zone_across_dst(
    mariadb_full: MariaDBServer, mariadb_database: Callable[[MariaDBServer], str]
) -> None:
    database = mariadb_database(mariadb_full)
    with contextlib.closing(mariadb_full.connect(database)) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, at TIMESTAMP NULL)")
        cur.execute("SET time_zone = 'UTC'")  # named UTC is loaded too
        cur.execute("INSERT INTO t VALUES (1, '2024-01-15 12:00:00'), (2, '2024-07-01 12:00:00')")
    with contextlib.closing(mariadb_full.connect(database)) as conn, conn.cursor() as cur:
        cur.execute("SELECT CAST(at AS CHAR) FROM t ORDER BY id")
        rows = cur.fetchall()
    assert [row[0] for row in rows] == ["2024-01-15 13:00:00", "2024-07-01 14:00:00"]


@pytest.mark.integration
@pytest.mark.mariadb
def test_mariadb_url_works_with_sqlalchemy(mariadb_full: MariaDBServer) -> None:
    sqlalchemy = pytest.importorskip("sqlalchemy")
    engine = sqlalchemy.create_engine(mariadb_full.url())
    try:
        with engine.connect() as conn:
            assert conn.execute(sqlalchemy.text("SELECT DATABASE()")).scalar() == "test"
    finally:
        engine.dispose()


# --- PostgreSQL -------------------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.postgres
def test_postgres_settings(postgres: PostgresServer) -> None:
    sql = (
        "SELECT current_setting('wal_level'), current_setting('TimeZone'),"
        " current_setting('port')::int, current_setting('data_directory'),"
        " current_setting('max_replication_slots')::int, current_setting('max_wal_senders')::int"
    )
    wal_level, time_zone, port, datadir, slots, senders = _postgres_row(postgres, sql)
    assert (wal_level, time_zone) == ("logical", SERVER_TIME_ZONE)
    assert port == postgres.port
    assert port not in SYSTEM_PORTS
    assert Path(datadir) == postgres.datadir
    assert postgres.datadir.is_relative_to("/tmp")
    assert min(slots, senders) >= 10


@pytest.mark.integration
@pytest.mark.postgres
def test_postgres_timestamps_follow_the_server_zone_across_dst(postgres: PostgresServer) -> None:
    sql = (
        "SELECT '2024-01-15 12:00:00+00'::timestamptz::text,"
        " '2024-07-01 12:00:00+00'::timestamptz::text"
    )
    assert _postgres_row(postgres, sql) == ("2024-01-15 13:00:00+01", "2024-07-01 14:00:00+02")


@pytest.mark.integration
@pytest.mark.postgres
def test_postgres_logical_slot_with_pgoutput(
    postgres: PostgresServer, postgres_database: Callable[[PostgresServer], str]
) -> None:
    extras = pytest.importorskip("psycopg2.extras")
    database = postgres_database(postgres)
    replication = extras.LogicalReplicationConnection
    with contextlib.closing(
        extras.psycopg2.connect(postgres.dsn(database), connection_factory=replication)
    ) as conn:
        cursor = conn.cursor()
        cursor.create_replication_slot("replcheck_probe", output_plugin="pgoutput")
        slot_sql = "SELECT plugin, slot_type FROM pg_replication_slots"
        assert _postgres_row(postgres, slot_sql, database) == ("pgoutput", "logical")
        cursor.drop_replication_slot("replcheck_probe")
    # Left behind on purpose: the factory must drop the database together with its slot.
    _postgres_row(
        postgres, "SELECT pg_create_logical_replication_slot('left', 'pgoutput')", database
    )


@pytest.mark.integration
@pytest.mark.postgres
def test_postgres_url_works_with_sqlalchemy(postgres: PostgresServer) -> None:
    sqlalchemy = pytest.importorskip("sqlalchemy")
    engine = sqlalchemy.create_engine(postgres.url())
    try:
        with engine.connect() as conn:
            assert conn.execute(sqlalchemy.text("SELECT current_database()")).scalar() == "test"
    finally:
        engine.dispose()


# --- Spark ------------------------------------------------------------------------------


@pytest.mark.spark
def test_spark_session_settings(spark: SparkSession) -> None:
    conf = spark.sparkContext.getConf()
    assert spark.sparkContext.master == "local[2]"
    assert spark.conf.get("spark.ui.enabled") == "false"
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert spark.conf.get("spark.sql.ansi.enabled") == "true"
    # Without SPARK_LOCAL_IP the driver advertises the machine's external address.
    assert conf.get("spark.driver.host") in {"localhost", LOOPBACK}


@pytest.mark.spark
def test_spark_runs_jobs_with_python_workers(spark: SparkSession) -> None:
    assert spark.range(100).selectExpr("sum(id) AS total").collect()[0]["total"] == 4950
    assert spark.sparkContext.parallelize(range(10), 2).map(lambda x: x * x).sum() == 285


# --- stopping ---------------------------------------------------------------------------

RUNNERS = [
    pytest.param(lambda: running_mariadb("NOBLOB"), marks=pytest.mark.mariadb, id="mariadb"),
    pytest.param(running_postgres, marks=pytest.mark.postgres, id="postgres"),
]


@pytest.mark.integration
@pytest.mark.parametrize("runner", RUNNERS)
def test_stopping_terminates_the_server_and_its_children(
    runner: Callable[[], contextlib.AbstractContextManager[MariaDBServer | PostgresServer]],
) -> None:
    with runner() as server:
        processes = {server.pid, *_children(server.pid)}
        assert _is_alive(server.pid)
    assert _still_alive(processes) == set()
    assert not server.datadir.exists()


# Runs in a child interpreter: starts a server without the context manager (so no finalizer
# can stop it) and ends, either normally (the atexit hook must stop the server and remove
# its directory) or by SIGKILL (the kernel's parent-death signal must stop it).
_ABANDONING_SCRIPT = """
import os, signal, sys
from tests import private_servers as servers
factory = {"mariadb": lambda: servers._MariaDBProcess("FULL"), "postgres": servers._PostgresProcess}
server = servers._start_on_free_port(factory[sys.argv[1]])
print(server.process.pid, server.root, flush=True)
if sys.argv[2] == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.integration
@pytest.mark.parametrize("ending", ["exit", "kill"])
@pytest.mark.parametrize(
    "kind",
    [
        pytest.param("mariadb", marks=pytest.mark.mariadb, id="mariadb"),
        pytest.param("postgres", marks=pytest.mark.postgres, id="postgres"),
    ],
)
def test_abandoned_server_does_not_outlive_the_test_process(kind: str, ending: str) -> None:
    result = subprocess.run(
        [sys.executable, "-c", _ABANDONING_SCRIPT, kind, ending],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.stdout, result.stderr
    pid_text, root = result.stdout.split()
    try:
        assert _still_alive({int(pid_text)}) == set()
    finally:
        if ending == "kill" and Path(root).name.startswith("replcheck-"):
            shutil.rmtree(root, ignore_errors=True)  # nobody was left to remove it
    if ending == "exit":
        assert not Path(root).exists()


# --- missing binaries -------------------------------------------------------------------


def test_missing_mariadb_fails_with_the_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(servers.shutil, "which", lambda *args, **kwargs: None)
    with pytest.raises(pytest.fail.Exception, match=re.escape(servers.INSTALL_HINT)):
        servers.running_mariadb().__enter__()


def test_missing_postgres_fails_with_the_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(servers.glob, "glob", lambda pattern: [])
    with pytest.raises(pytest.fail.Exception, match=re.escape(servers.INSTALL_HINT)):
        servers.running_postgres().__enter__()


# --- products without a server here ------------------------------------------------------


@pytest.mark.oracle
def test_oracle_tests_run_only_with_a_server_url() -> None:
    assert os.environ.get("REPLCHECK_ORACLE_URL"), "conftest should have skipped this test"


@pytest.mark.hana
def test_hana_tests_run_only_with_a_server_url() -> None:
    assert os.environ.get("REPLCHECK_HANA_URL"), "conftest should have skipped this test"


def test_every_file_run_first_is_a_test_file() -> None:
    """``SLOW_FIRST`` orders files by path: a moved or renamed file would lose its place
    in silence."""
    from tests.conftest import SLOW_FIRST

    root = Path(__file__).resolve().parents[1]
    assert [path for path in SLOW_FIRST if not (root / path).is_file()] == []
