"""The SQL replcheck sends to MySQL, statement by statement (test level 2 of issue 40).

Each test runs the real code over pymysql against ``fake_server`` answering from one
recorded session (``data/*.json``, format in ``recorded_session``): every statement sent
must be the next recorded one, and every recorded one must be sent. Expected values are
read from the recording, so a recording captured from a live server (REPLCHECK_MYSQL_RECORD)
can replace a hand-written one. What this proves: the statements, their order and what
replcheck makes of the documented answers. What it does not: that a server answers so
(the recordings here are hand-written, and say so).
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections.abc import Iterator

import pytest

from cdc_core.errors import ConfigError, TransientError
from connectors.mariadb.connector import MariaDBConnector
from connectors.mariadb.errors import PreparedXaError, SnapshotLockError, SnapshotPrivilegeError
from connectors.mariadb.failover import FailoverError
from connectors.mariadb.log_reader import MariaDBLogReader
from connectors.mariadb.position import position_of
from connectors.mariadb.replica import (
    GTID_WAITS,
    executed_gtid_set,
    gtid_position,
    is_replica,
    wait_for_executed_gtid_set,
)
from connectors.mariadb.snapshot import MariaDBSnapshotReader
from connectors.mariadb.source_config import MariaDBSourceConfig
from tests.connectors.mysql.fake_server import FakeMySQLServer
from tests.connectors.mysql.recorded_session import Recording

SOURCE_UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"  # the old primary
NEEDED = "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-57,8d1a3b5c-0f2e-11ef-8a3c-0242ac120002:1-4"


@contextlib.contextmanager
def _replayed(name: str) -> Iterator[tuple[FakeMySQLServer, Recording]]:
    """A fake server answering from recording ``name``; on leaving, every statement sent
    must have been the recording's next one, and none of it left unsent."""
    recording = Recording.load(name)
    asked = [sql for sql in recording.sqls() if sql.startswith("SELECT VERSION()")]
    version = recording.first(asked[0])["rows"][0][0]
    with FakeMySQLServer([], [], version=version, recording=recording) as server:
        yield server, recording
    assert server.unanswered == []
    assert server.statements == recording.sqls()
    assert recording.unasked() == []


def _snapshot_reader(server: FakeMySQLServer) -> MariaDBSnapshotReader:
    return MariaDBSnapshotReader(MariaDBSourceConfig(url=server.url("shop"), tables=("t",)))


@pytest.mark.parametrize(
    ("name", "status"),
    [
        ("snapshot_mysql80.json", "SHOW MASTER STATUS"),
        ("snapshot_mysql84.json", "SHOW BINARY LOG STATUS"),
    ],
)
def test_a_mysql_snapshot_is_placed_under_a_brief_global_read_lock(name: str, status: str) -> None:
    with _replayed(name) as (server, recording):
        reader = _snapshot_reader(server)
        with reader.snapshot([]) as (position, tables):
            assert list(tables) == []
    log_file, offset = recording.first(status)["rows"][0][:2]
    assert position == position_of(log_file, offset)
    assert recording.hand_written  # no MySQL server has answered these yet


def test_the_lock_is_released_right_after_the_position_is_read() -> None:
    recording = Recording.load("snapshot_mysql80.json")
    sqls = recording.sqls()
    locked = sqls[sqls.index("FLUSH TABLES WITH READ LOCK") : sqls.index("UNLOCK TABLES")]
    assert locked == [
        "FLUSH TABLES WITH READ LOCK",
        "START TRANSACTION WITH CONSISTENT SNAPSHOT",
        "XA RECOVER",  # a pipeline's snapshot: no XA transaction may be prepared
        "SHOW MASTER STATUS",
    ]
    assert sqls.index("SET SESSION lock_wait_timeout = 10") < sqls.index(locked[0])


def test_a_lock_not_granted_in_time_is_a_transient_error_naming_the_cause() -> None:
    with _replayed("snapshot_lock_timeout.json") as (server, _):
        reader = _snapshot_reader(server)
        with pytest.raises(SnapshotLockError) as raised, reader.snapshot([]):
            pass
    assert isinstance(raised.value, TransientError)
    assert "FLUSH TABLES WITH READ LOCK" in str(raised.value) and "10 s" in str(raised.value)


def test_a_user_without_reload_is_told_the_grant() -> None:
    with _replayed("snapshot_no_reload.json") as (server, _):
        reader = _snapshot_reader(server)
        with pytest.raises(SnapshotPrivilegeError) as raised, reader.snapshot([]):
            pass
    assert isinstance(raised.value, ConfigError)
    assert "GRANT RELOAD, REPLICATION CLIENT" in str(raised.value)


def test_a_pipeline_snapshot_is_refused_while_an_xa_transaction_is_prepared() -> None:
    """Its changes are in the binlog at its prepare, before the snapshot's position, and
    not in the snapshot: streaming from there would lose them at its XA COMMIT."""
    with _replayed("snapshot_xa_prepared.json") as (server, _):
        reader = _snapshot_reader(server)
        with pytest.raises(PreparedXaError) as raised, reader.snapshot([]):
            pass
    assert isinstance(raised.value, TransientError)
    message = str(raised.value)
    assert "1 prepared XA transaction(s) (X'6f7264657237',X'627231',1)" in message, message
    assert "XA COMMIT or XA ROLLBACK" in message


def test_a_validator_snapshot_does_not_ask_for_prepared_xa_transactions() -> None:
    with _replayed("snapshot_validator_mysql80.json") as (server, _):
        connector = MariaDBConnector(server.url("shop"))
        with contextlib.closing(connector.connect()) as connection:
            assert connector.snapshot_at(connection) is not None


def test_a_server_without_a_binlog_gets_its_snapshot_without_a_lock() -> None:
    with _replayed("snapshot_no_binlog.json") as (server, _):
        connector = MariaDBConnector(server.url("shop"))
        with contextlib.closing(connector.connect()) as connection:
            assert connector.snapshot_at(connection) is None


def test_the_validator_reads_and_spells_mysql_84_positions() -> None:
    with _replayed("log_position_mysql84.json") as (server, recording):
        connector = MariaDBConnector(server.url("shop"))
        end = connector.log_position()
        assert end is not None
        spelled = connector.describe_position(end)
    log_file, offset = recording.first("SHOW BINARY LOG STATUS")["rows"][0][:2]
    assert spelled == f"{log_file}:{offset}"


def test_a_mysql_replica_waits_for_the_source_gtid_set() -> None:
    with _replayed("replica_source_mysql.json") as (server, _):
        needed = executed_gtid_set(MariaDBConnector(server.url("shop")))
    assert needed == NEEDED  # one line: MySQL breaks the set after each UUID
    with _replayed("replica_applied_mysql.json") as (server, _):
        wait_for_executed_gtid_set(MariaDBConnector(server.url("shop")), needed, 30.0)


def test_a_mysql_replica_behind_names_the_applied_needed_and_missing_sets() -> None:
    with _replayed("replica_behind_mysql.json") as (server, _):
        replica = MariaDBConnector(server.url("shop"))
        with pytest.raises(TransientError) as raised:
            wait_for_executed_gtid_set(replica, NEEDED, 30.0)
    message = str(raised.value)
    assert "applied GTID set 3e11fa47-71ca-11e1-9e33-c80aa9429562:1-55," in message
    assert f"the source is at {NEEDED}" in message
    assert "missing 3e11fa47-71ca-11e1-9e33-c80aa9429562:56-57" in message


def test_a_source_without_gtids_is_refused_for_replication_mysql() -> None:
    with (
        _replayed("replica_source_gtid_off.json") as (server, _),
        pytest.raises(ConfigError) as raised,
    ):
        executed_gtid_set(MariaDBConnector(server.url("shop")))
    assert "gtid_mode=OFF" in str(raised.value)


def test_replication_mariadb_on_a_mysql_server_is_refused_by_name() -> None:
    with (
        _replayed("replica_mariadb_kind_on_mysql.json") as (server, _),
        pytest.raises(ConfigError) as raised,
    ):
        gtid_position(MariaDBConnector(server.url("shop")))
    assert "is MySQL 8.0: use replication: mysql" in str(raised.value)


def test_each_replication_kind_of_this_connector_is_a_known_kind() -> None:
    from validator.config import REPLICATION_KINDS

    assert set(GTID_WAITS) <= set(REPLICATION_KINDS)


@pytest.mark.parametrize(
    ("replica", "kind"),
    [
        ("detect_replica_mysql.json", "mysql"),
        ("detect_replica_other_mysql.json", None),
        ("detect_not_replica_mysql.json", None),
    ],
)
def test_a_mysql_replica_is_detected_by_the_source_uuid_its_channel_reads(
    replica: str, kind: str | None
) -> None:
    """``replication: unknown`` on a MySQL target: it is detected as ``mysql`` (and waited
    for with WAIT_FOR_EXECUTED_GTID_SET) only when a channel reads from the source."""
    with _replayed(replica) as (target, _), _replayed("detect_source_mysql.json") as (source, _):
        found = is_replica(
            MariaDBConnector(target.url("shop")), MariaDBConnector(source.url("shop"))
        )
    assert found == kind


def test_mysql_computes_no_leaf_digests_so_its_rows_are_read() -> None:
    """MariaDB's digest SQL is not sent to MySQL (functions and types it lacks): the
    validator compares MySQL by reading its rows (engines.md)."""
    with _replayed("digest_dialect_mysql.json") as (server, _):
        assert MariaDBConnector(server.url("shop")).digest_dialect() is None


@pytest.mark.parametrize(
    ("name", "refused"),
    [("failover_check_mysql.json", None), ("failover_behind_mysql.json", "lacks transactions")],
)
def test_a_failover_is_checked_against_the_new_servers_gtid_sets(
    name: str, refused: str | None
) -> None:
    """``cdc run`` on another server (``failover.py``): its id, ``gtid_mode``, and the lake's
    GTID set against the server's executed and purged sets, before any log is read."""
    token = json.dumps({"executed": f"{SOURCE_UUID}:1-57", "prepared": {}})
    with _replayed(name) as (server, recording):
        reader = MariaDBLogReader(MariaDBSourceConfig(url=server.url("shop"), tables=("t",)))
        follow = functools.partial(reader.follow_failover, position_of("binlog.000003", 5120))
        if refused is None:
            follow(token, f"MySQL server_uuid {SOURCE_UUID}")
        else:
            with pytest.raises(FailoverError) as error:
                follow(token, f"MySQL server_uuid {SOURCE_UUID}")
            (sql,) = [sql for sql in recording.sqls() if sql.startswith("SELECT GTID_SUBTRACT")]
            missing = recording.first(sql)["rows"][0][0]
            assert refused in error.value.message and missing in error.value.message
    assert reader.epoch.value == (1 if refused is None else 0)
