"""Clear errors with the fix, each provoked on a private server: binlog off, not ROW,
metadata not FULL (and the UNKNOWN_COLn rows it leaves behind), missing replication
privileges, a purged binlog, a key that does not fit."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import pytest

from cdc_core.errors import ConfigError, TerminalError
from connectors.mariadb.errors import (
    BinlogMetadataError,
    BinlogPurgedError,
    BinlogSetupError,
    KeyConfigError,
    ReplicationPrivilegeError,
)
from connectors.mariadb.log_reader import MariaDBLogReader
from connectors.mariadb.source_config import MariaDBSourceConfig
from tests import private_servers
from tests.connectors.mariadb.binlog_helpers import BinlogCase, read_until_end

pytestmark = [pytest.mark.integration, pytest.mark.mariadb]


def _first(reader: MariaDBLogReader) -> object:
    iterator = reader.iter_changes(None)
    with contextlib.closing(iterator):
        return next(iterator)


@contextlib.contextmanager
def _global(case: BinlogCase, name: str, value: str) -> Iterator[None]:
    (old,) = case.query(f"SELECT @@global.{name}")[0]
    case.sql(f"SET GLOBAL {name} = '{value}'")
    try:
        yield
    finally:
        case.sql(f"SET GLOBAL {name} = '{old}'")


def test_statement_format_is_refused_with_the_fix(full_case: BinlogCase) -> None:
    full_case.sql("CREATE TABLE t (id INT PRIMARY KEY)")
    reader = full_case.reader("t")
    with (
        _global(full_case, "binlog_format", "STATEMENT"),
        pytest.raises(
            BinlogSetupError, match=r"binlog_format is STATEMENT.*SET GLOBAL binlog_format = 'ROW'"
        ),
    ):
        _first(reader)


def test_minimal_row_metadata_is_refused_and_its_nameless_rows_too(
    full_case: BinlogCase,
) -> None:
    case = full_case
    case.sql("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    reader = case.reader("t")
    start = reader.end_position()
    with _global(case, "binlog_row_metadata", "MINIMAL"):
        with pytest.raises(BinlogSetupError, match="binlog_row_metadata is MINIMAL") as caught:
            _first(reader)
        assert caught.value.context["setting"] == "binlog_row_metadata"
        # A new connection logs with the new setting: these rows carry no column names.
        with contextlib.closing(case.server.connect(case.database)) as other:
            other.cursor().execute("INSERT INTO t VALUES (1, 1)")
    with pytest.raises(BinlogMetadataError, match=r"UNKNOWN_COLn.*binlog_row_metadata=FULL"):
        read_until_end(reader, start)


def test_missing_replication_privileges_name_the_grant(full_case: BinlogCase) -> None:
    case = full_case
    case.sql("CREATE TABLE t (id INT PRIMARY KEY)")
    for user, grants in (("rc_none", ""), ("rc_client", "BINLOG MONITOR")):
        case.sql(f"CREATE USER IF NOT EXISTS '{user}'@'%'")
        case.sql(f"GRANT SELECT ON `{case.database}`.* TO '{user}'@'%'")
        if grants:
            case.sql(f"GRANT {grants} ON *.* TO '{user}'@'%'")
        url = case.server.url(case.database).replace("//root@", f"//{user}@")
        reader = MariaDBLogReader(MariaDBSourceConfig(url=url, tables=("t",), heartbeat_s=0.2))
        try:
            with pytest.raises(ReplicationPrivilegeError, match="GRANT REPLICATION SLAVE"):
                _first(reader)
        finally:
            reader.close()
            case.sql(f"DROP USER '{user}'@'%'")


def test_a_purged_binlog_names_the_position_and_asks_for_a_new_snapshot(
    full_case: BinlogCase,
) -> None:
    case = full_case
    case.sql("CREATE TABLE t (id INT PRIMARY KEY)")
    reader = case.reader("t")
    old = reader.end_position()
    case.sql("INSERT INTO t VALUES (1)", "FLUSH BINARY LOGS")
    (current,) = case.query("SHOW MASTER STATUS")[0][:1]
    _purge_to(case, current)
    with pytest.raises(BinlogPurgedError, match="new snapshot") as caught:
        read_until_end(reader, old)
    assert caught.value.context["position"] == old.text
    assert old.text in str(caught.value)


def _purge_to(case: BinlogCase, current: str) -> None:
    # MariaDB keeps a binlog until its binlog checkpoint has been written (after InnoDB
    # flushed), so PURGE may need repeating: https://mariadb.com/kb/en/purge-binary-logs/
    for _ in range(100):
        case.sql(f"PURGE BINARY LOGS TO '{current}'")
        if [row[0] for row in case.query("SHOW BINARY LOGS")] == [current]:
            return
        time.sleep(0.1)
    raise AssertionError("the server kept its old binlogs")


def test_a_configured_key_must_fit_the_table(full_case: BinlogCase) -> None:
    full_case.sql("CREATE TABLE pk (id INT PRIMARY KEY, v INT)", "CREATE TABLE nk (v INT)")
    with pytest.raises(KeyConfigError, match="primary key \\['id'\\]"):
        full_case.reader("pk", keys={"pk": ("v",)}).describe("pk")
    with pytest.raises(KeyConfigError, match="names columns \\['nope'\\]"):
        full_case.reader("nk", keys={"nk": ("nope",)}).describe("nk")
    with pytest.raises(TerminalError, match="not found"):
        full_case.reader("absent").describe("absent")


class _NoBinlogMariaDB(private_servers._MariaDBProcess):
    """A private server started without --log-bin."""

    def _argv(self) -> list[str]:
        return [arg for arg in super()._argv() if not arg.startswith(("--log-bin", "--binlog"))]


def test_a_server_without_binlog_is_refused_with_the_fix() -> None:
    server = private_servers._start_on_free_port(lambda: _NoBinlogMariaDB("FULL"))
    assert isinstance(server, _NoBinlogMariaDB)
    try:
        handle = server.handle()
        config = MariaDBSourceConfig(url=handle.url("test"), tables=("t",))
        with pytest.raises(BinlogSetupError, match=r"does not write a binary log.*--log-bin"):
            _first(MariaDBLogReader(config))
    finally:
        server.stop()
    assert issubclass(BinlogSetupError, ConfigError)
