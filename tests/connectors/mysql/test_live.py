"""MySQL 8 against a real server (test level 3 of issue 40): runs only when
REPLCHECK_MYSQL_URL is set (``mysql+pymysql://user@host:3306/db``, the password in
REPLCHECK_MYSQL_PASSWORD or the URL; the server with ``log_bin``, ``binlog_format=ROW``,
``binlog_row_metadata=FULL``, the user with REPLICATION SLAVE, REPLICATION CLIENT and
RELOAD), and the replica test when REPLCHECK_MYSQL_REPLICA_URL names a GTID replica of it.
Each test creates one table in the URL's database and drops it.

With REPLCHECK_MYSQL_RECORD naming a directory, the snapshot and replica tests also write
their sessions there in the replay format of ``recorded_session`` (``captured from``), to
replace the hand-written recordings in ``data/``.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from connectors.mariadb.connector import MariaDBConnector, quote
from connectors.mariadb.position import position_of
from connectors.mariadb.replica import executed_gtid_set, wait_for_executed_gtid_set
from connectors.mariadb.snapshot import MariaDBSnapshotReader
from connectors.mariadb.source_config import MariaDBSourceConfig
from tests.connectors.mariadb.pipeline_helpers import lake_rows
from tests.connectors.mysql.recorded_session import record_session
from tests.connectors.trigger_capture.helpers import replcheck, validate_in_sync

pytestmark = [pytest.mark.mysql, pytest.mark.integration]

URL, REPLICA_URL = "REPLCHECK_MYSQL_URL", "REPLCHECK_MYSQL_REPLICA_URL"
PASSWORD, RECORD = "REPLCHECK_MYSQL_PASSWORD", "REPLCHECK_MYSQL_RECORD"


def _url(variable: str) -> str:
    """The URL in ``variable``, or a skip naming it."""
    if not os.environ.get(variable):
        pytest.skip(f"set {variable} to run the MySQL live tests")
    return os.environ[variable]


@pytest.fixture
def source() -> MariaDBConnector:
    connector = MariaDBConnector(_url(URL), os.environ.get(PASSWORD))
    assert connector.flavour().is_mysql, f"{URL} must name a MySQL 8.0 or 8.4 server"
    return connector


@pytest.fixture
def table(source: MariaDBConnector) -> Iterator[str]:
    name = f"replcheck_{uuid.uuid4().hex[:10]}"
    _run(source, f"CREATE TABLE {quote(name)} (id INT PRIMARY KEY, note VARCHAR(40), qty BIGINT)")
    try:
        yield name
    finally:
        _run(source, f"DROP TABLE IF EXISTS {quote(name)}")


def _run(connector: MariaDBConnector, *statements: str) -> None:
    with contextlib.closing(connector.connect()) as connection, connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


@contextlib.contextmanager
def _recorded(name: str, description: str) -> Iterator[None]:
    """Record the session into REPLCHECK_MYSQL_RECORD/``name`` when that is set."""
    if not os.environ.get(RECORD):
        yield
        return
    with record_session(Path(os.environ[RECORD]) / name, description):
        yield


def test_a_snapshot_sits_at_the_binlog_status_read_under_its_lock(
    source: MariaDBConnector, table: str
) -> None:
    series = "".join(map(str, source.flavour().version[:2]))
    reader = MariaDBSnapshotReader(MariaDBSourceConfig(url=source.url, tables=(table,)))
    reader.connector = source  # with its password
    recorded = _recorded(f"snapshot_mysql{series}.json", "the CDC snapshot reader's position")
    with recorded, reader.snapshot([]) as (position, _):
        status = source.flavour().binlog_status_statement
        with contextlib.closing(source.connect()) as other, other.cursor() as cursor:
            cursor.execute(status)
            log_file, offset = cursor.fetchone()[:2]
    assert position == position_of(str(log_file), int(offset))  # no commit in between


def test_cdc_run_then_validate_reports_in_sync(
    source: MariaDBConnector, table: str, tmp_path: Path
) -> None:
    config = tmp_path / "pipeline.yaml"
    secret = f", password: {{env: {PASSWORD}}}" if os.environ.get(PASSWORD) else ""
    config.write_text(
        "connections:\n"
        f'  src: {{url: "{source.url}"{secret}}}\n'
        f"  lake: {{lake: {tmp_path / 'lake'}}}\n"
        "pipelines:\n"
        f"  - {{name: p, source: src, target: lake, tables: [{table}],"
        f" state_dir: {tmp_path / 'state'}}}\n",
        encoding="utf-8",
    )
    quoted = quote(table)
    _run(source, *(f"INSERT INTO {quoted} VALUES ({i}, 'n{i}', {i})" for i in range(20)))
    ran = replcheck("cdc", "run", "-c", str(config), "--pipeline", "p", "--until-caught-up")
    assert ran.returncode == 0, ran.stderr
    _run(
        source,
        f"UPDATE {quoted} SET note = 'x' WHERE id < 5",
        f"DELETE FROM {quoted} WHERE id = 7",
    )
    ran = replcheck("cdc", "run", "-c", str(config), "--pipeline", "p", "--until-caught-up")
    assert ran.returncode == 0, ran.stderr
    qualified = f"{source.database()}.{table}"
    rows = lake_rows(tmp_path / "lake", qualified, ["id"])
    assert len(rows) == 19 and rows[(1,)]["note"] == "x" and rows[(8,)]["qty"] == 8
    validate_in_sync(config, qualified, qualified, tmp_path / "validated")


def test_a_replica_is_waited_for_until_it_applied_the_source_gtid_set(
    source: MariaDBConnector, table: str
) -> None:
    replica = MariaDBConnector(_url(REPLICA_URL), os.environ.get(PASSWORD))
    _run(source, f"INSERT INTO {quote(table)} VALUES (1, 'a', 1)")
    with _recorded("replica_source_mysql.json", "replication: mysql: the source's GTID set"):
        needed = executed_gtid_set(source)
    with _recorded("replica_applied_mysql.json", "replication: mysql: the replica applied it"):
        wait_for_executed_gtid_set(replica, needed, 30.0)
    with contextlib.closing(replica.connect()) as connection, connection.cursor() as cursor:
        cursor.execute(f"SELECT note FROM {quote(table)} WHERE id = 1")
        assert cursor.fetchone() == ("a",)
