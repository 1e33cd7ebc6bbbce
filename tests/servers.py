"""Session fixtures: private MariaDB and PostgreSQL servers and the local Spark session.

The processes themselves are managed by ``tests/private_servers.py``; this module only
turns them into pytest fixtures (registered by ``tests/conftest.py``).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest

from tests.live_servers import MYSQL_URL, live_mysql
from tests.private_servers import (
    MariaDBServer,
    PostgresServer,
    drop_postgres_database,
    running_mariadb,
    running_postgres,
)
from validator.engines.sides.spark.session import build_spark_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


# --- fixtures ---------------------------------------------------------------------------


def _unique_database_name() -> str:
    return f"t_{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="session")
def mariadb_full() -> Iterator[MariaDBServer]:
    """A private MariaDB server with ``binlog_row_image=FULL``."""
    with running_mariadb("FULL") as server:
        yield server


@pytest.fixture(scope="session")
def mysql_live() -> MariaDBServer:
    """A MySQL 8 server from outside (``tests/live_servers.py``); the tests that ask for it
    are skipped, naming the variable, unless ``REPLCHECK_MYSQL_URL`` is set."""
    server = live_mysql()
    if server is None:
        pytest.skip(f"set {MYSQL_URL} to run the MariaDB suites against a live MySQL")
    return server


@pytest.fixture(scope="session")
def mariadb_minimal() -> Iterator[MariaDBServer]:
    """A private MariaDB server with ``binlog_row_image=MINIMAL``."""
    with running_mariadb("MINIMAL") as server:
        yield server


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A private PostgreSQL cluster with ``wal_level=logical``."""
    with running_postgres() as server:
        yield server


@pytest.fixture
def mariadb_database() -> Iterator[Callable[[MariaDBServer], str]]:
    """Factory: create a uniquely named database on a server; dropped after the test."""
    created: list[tuple[MariaDBServer, str]] = []

    def create(server: MariaDBServer) -> str:
        name = _unique_database_name()
        with contextlib.closing(server.connect(database=None)) as conn, conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{name}`")
        created.append((server, name))
        return name

    yield create
    for server, name in created:
        with contextlib.closing(server.connect(database=None)) as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")


@pytest.fixture
def postgres_database() -> Iterator[Callable[[PostgresServer], str]]:
    """Factory: create a uniquely named database on a cluster; dropped after the test.

    Logical replication slots belong to one database, so a test that creates slots in its
    own database cannot disturb other tests; they are dropped with the database.
    """
    created: list[tuple[PostgresServer, str]] = []

    def create(server: PostgresServer) -> str:
        name = _unique_database_name()
        with contextlib.closing(server.connect("postgres")) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        created.append((server, name))
        return name

    yield create
    for server, name in created:
        drop_postgres_database(server, name)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The one local Spark session of the test run (``local[2]``)."""
    # Without whole-stage code generation: the tests' queries are many and small, so
    # compiling each costs more than it saves (the spark contract test: 55 s -> 50 s). The
    # results are the same; the subprocess tests (demo, spark-submit) keep Spark's default.
    session = build_spark_session(
        app_name="replcheck-tests",
        master="local[2]",
        extra_conf={"spark.sql.codegen.wholeStage": "false"},
    )
    yield session
    session.stop()
