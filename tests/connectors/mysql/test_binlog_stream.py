"""MySQL 8 binlog streams through the real log reader (test level 1 of issue 40).

The streams are written by ``binlog_encoder`` from MySQL's documented event formats and
served by ``fake_server`` over the real client/server protocol, so everything from pymysql
and mysql-replication up to the reader's raw changes is the code a real MySQL would meet.
What this does not prove: that a real MySQL writes what the documentation says (no MySQL
server here: "built to the documented protocol, not yet run against a server").
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import uuid
from collections.abc import Iterator

import pytest

from cdc_core.capture.events import Begin, Commit, RawChange, Rollback, RowChange
from cdc_core.capture.position import Position
from cdc_core.capture.source import Idle, TableChanged
from cdc_core.errors import ConfigError
from connectors.mariadb.errors import (
    BinlogSetupError,
    UnreadableEventError,
    UnsupportedServerError,
    UntrackedChangeError,
)
from connectors.mariadb.log_reader import MariaDBLogReader
from connectors.mariadb.position import position_of
from connectors.mariadb.source_config import MariaDBSourceConfig
from tests.connectors.mysql.binlog_encoder import NO_COMPRESSION, ZSTD, BinlogFile, Column, Table
from tests.connectors.mysql.fake_server import FakeMySQLServer, mysql_answers
from tests.connectors.mysql.typed_table import TYPED, TYPED_ROW

FILE = "binlog.000001"
SID = uuid.UUID("3e11fa47-71ca-11e1-9e33-c80aa9429562")
COMMIT_TS = dt.datetime.fromtimestamp(1_700_000_000, dt.UTC)
ITEMS = Column("id", "int", nullable=False), Column("name", "varchar", max_length=80)
T = Table(108, "shop", "t", (*ITEMS, Column("qty", "bigint", unsigned=True)), ("id",))
OTHER = Table(109, "shop", "other", ITEMS, ("id",))


def _binlog() -> BinlogFile:
    binlog = BinlogFile(FILE)
    binlog.format_description()
    binlog.previous_gtids({SID: [(1, 4)]})
    return binlog


def _at(offset: int) -> Position:
    return position_of(FILE, offset)


@contextlib.contextmanager
def _served(binlog: BinlogFile, **answers: str) -> Iterator[FakeMySQLServer]:
    version = answers.pop("version", "8.0.36")
    comment = answers.pop("comment", "MySQL Community Server - GPL")
    found = mysql_answers((binlog.name, binlog.position), version, comment, answers)
    with FakeMySQLServer([binlog], found, version=version) as server:
        yield server
    assert server.unanswered == []


def _reader(server: FakeMySQLServer, *tables: str) -> MariaDBLogReader:
    config = MariaDBSourceConfig(url=server.url("shop"), tables=tables or ("t",), heartbeat_s=0.2)
    return MariaDBLogReader(config)


def _read(
    server: FakeMySQLServer, *tables: str, start: Position | None = None
) -> list[RawChange | TableChanged]:
    """Every change from ``start`` (the file's start) until the reader is idle at its end."""
    reader = _reader(server, *tables)
    changes: list[RawChange | TableChanged] = []
    iterator = reader.iter_changes(start or _at(4))
    with contextlib.closing(reader), contextlib.closing(iterator):
        for item in iterator:
            if isinstance(item, Idle):
                return changes
            changes.append(item)
    raise AssertionError("the reader stopped on its own")


def test_a_gtid_transaction_is_begin_rows_and_commit_at_their_positions() -> None:
    binlog = _binlog()
    begin = binlog.position
    binlog.gtid(SID, 5)
    binlog.query("BEGIN", "shop")
    binlog.table_map(T)
    write = binlog.position
    binlog.write_rows(
        T, [{"id": 1, "name": "a", "qty": 2**64 - 1}, {"id": 2, "name": None, "qty": 0}]
    )
    binlog.table_map(T)
    update = binlog.position
    binlog.update_rows(T, [({"id": 1, "name": "a", "qty": 1}, {"id": 1, "name": "é", "qty": 3})])
    binlog.table_map(T)
    delete = binlog.position
    binlog.delete_rows(T, [{"id": 2, "name": None, "qty": 0}])
    binlog.xid(77)
    txid = f"{SID}:5"
    with _served(binlog) as server:
        changes = _read(server)
        assert server.dumps == [(FILE, 4)]
    assert changes == [
        Begin(txid, _at(_end_of(binlog, begin))),
        RowChange(txid, _at(write), "c", "shop.t", (1,), {"id": 1, "name": "a", "qty": 2**64 - 1}),
        RowChange(txid, _at(write), "c", "shop.t", (2,), {"id": 2, "name": None, "qty": 0}),
        RowChange(
            txid,
            _at(update),
            "u",
            "shop.t",
            (1,),
            {"id": 1, "name": "é", "qty": 3},
            {"id": 1, "name": "a", "qty": 1},
        ),
        RowChange(txid, _at(delete), "d", "shop.t", (2,), None, {"id": 2, "name": None, "qty": 0}),
        Commit(txid, _at(binlog.position), COMMIT_TS),
    ]


def test_anonymous_transactions_are_named_by_their_position() -> None:
    binlog = _binlog()
    first = binlog.position
    binlog.anonymous_gtid()
    binlog.query("BEGIN", "shop")
    binlog.table_map(T)
    write = binlog.position
    binlog.write_rows(T, [{"id": 1, "name": "a", "qty": 1}])
    binlog.query("COMMIT", "shop")  # a non-transactional engine's end
    end = binlog.position
    second = binlog.position
    binlog.anonymous_gtid(2)
    begin = binlog.position
    binlog.query("BEGIN", "shop")
    binlog.table_map(T)
    delete = binlog.position
    binlog.delete_rows(T, [{"id": 1, "name": "a", "qty": 1}])
    binlog.xid(78)
    with _served(binlog) as server:
        changes = _read(server)
    one, two = f"anonymous@{FILE}:{first}", f"anonymous@{FILE}:{second}"
    assert changes == [
        Begin(one, _at(_end_of(binlog, first))),
        RowChange(one, _at(write), "c", "shop.t", (1,), {"id": 1, "name": "a", "qty": 1}),
        Commit(one, _at(end), COMMIT_TS),
        Begin(two, _at(begin)),
        RowChange(two, _at(delete), "d", "shop.t", (1,), None, {"id": 1, "name": "a", "qty": 1}),
        Commit(two, _at(binlog.position), COMMIT_TS),
    ]


def _end_of(binlog: BinlogFile, start: int) -> int:
    """The end of the event that starts at ``start``."""
    return next(at + len(event) for at, event in binlog.events if at == start)


def test_ddl_is_its_own_group_and_other_tables_are_filtered() -> None:
    binlog = _binlog()
    binlog.gtid(SID, 6)
    binlog.query("BEGIN", "shop")
    binlog.table_map(OTHER)
    binlog.write_rows(OTHER, [{"id": 9, "name": "x"}])
    binlog.xid(79)
    binlog.gtid(SID, 7)
    truncate = binlog.position
    binlog.query("TRUNCATE TABLE t", "shop")
    end = binlog.position
    with _served(binlog) as server:
        changes = _read(server)
    txid = f"{SID}:7"
    assert changes == [
        Begin(txid, _at(truncate)),
        RowChange(txid, _at(truncate), "t", "shop.t", None),
        Commit(txid, _at(end), COMMIT_TS),
    ]


def test_rows_outside_any_transaction_stop_the_reader_at_their_position() -> None:
    binlog = _binlog()
    binlog.table_map(T)
    rows = binlog.position
    binlog.write_rows(T, [{"id": 1, "name": "a", "qty": 1}])
    with _served(binlog) as server, pytest.raises(UntrackedChangeError) as raised:
        _read(server)
    assert raised.value.context["position"] == f"{FILE}:{rows}"
    assert raised.value.context["table"] == "shop.t"
    assert f"{FILE}:{rows}" in str(raised.value)


def test_rows_of_a_table_not_captured_outside_a_transaction_are_filtered() -> None:
    binlog = _binlog()
    binlog.table_map(OTHER)
    binlog.write_rows(OTHER, [{"id": 1, "name": "a"}])
    with _served(binlog) as server:
        assert _read(server) == []


@pytest.mark.parametrize("compression", [ZSTD, NO_COMPRESSION], ids=["zstd", "none"])
def test_a_compressed_transaction_is_read_from_its_payload(compression: int) -> None:
    """``binlog_transaction_compression=ON``: the transaction's events are inside one
    TRANSACTION_PAYLOAD_EVENT after its GTID event; its changes are read from there, all at
    the payload event's position, and the payload event's end commits them."""
    binlog = _binlog()
    binlog.gtid(SID, 8)
    payload = binlog.position
    with binlog.compressed(compression):
        binlog.query("BEGIN", "shop")
        binlog.table_map(T)
        binlog.write_rows(T, [{"id": 1, "name": "a", "qty": 2}, {"id": 2, "name": "b", "qty": 3}])
        binlog.table_map(OTHER)
        binlog.write_rows(OTHER, [{"id": 9, "name": "x"}])
        binlog.table_map(T)
        binlog.update_rows(
            T, [({"id": 1, "name": "a", "qty": 2}, {"id": 1, "name": "c", "qty": 4})]
        )
        binlog.xid(81)
    binlog.gtid(SID, 9)
    after = binlog.position
    binlog.query("BEGIN", "shop")
    binlog.table_map(T)
    delete = binlog.position
    binlog.delete_rows(T, [{"id": 2, "name": "b", "qty": 3}])
    binlog.xid(82)
    with _served(binlog, binlog_transaction_compression="ON") as server:
        changes = _read(server)
    one, two = f"{SID}:8", f"{SID}:9"
    assert changes == [
        Begin(one, _at(payload)),
        RowChange(one, _at(payload), "c", "shop.t", (1,), {"id": 1, "name": "a", "qty": 2}),
        RowChange(one, _at(payload), "c", "shop.t", (2,), {"id": 2, "name": "b", "qty": 3}),
        RowChange(
            one,
            _at(payload),
            "u",
            "shop.t",
            (1,),
            {"id": 1, "name": "c", "qty": 4},
            {"id": 1, "name": "a", "qty": 2},
        ),
        Commit(one, _at(_end_of(binlog, payload)), COMMIT_TS),
        Begin(two, _at(after)),  # the end of its GTID event
        RowChange(two, _at(delete), "d", "shop.t", (2,), None, {"id": 2, "name": "b", "qty": 3}),
        Commit(two, _at(binlog.position), COMMIT_TS),
    ]


def test_every_encoded_column_type_reads_as_a_snapshot_reads_it() -> None:
    """DECIMAL, DATE, DATETIME, TIMESTAMP, JSON, ENUM, SET and BLOB through the reader's own
    decoders (``binlog/values.py``): the values a snapshot of the row gives."""
    binlog = _binlog()
    binlog.gtid(SID, 5)
    binlog.query("BEGIN", "shop")
    binlog.table_map(TYPED)
    write = binlog.position
    binlog.write_rows(TYPED, [TYPED_ROW])
    binlog.xid(5)
    with _served(binlog) as server:
        changes = _read(server, "typed")
    rows = [c.after for c in changes if isinstance(c, RowChange)]
    assert rows == [
        {
            **TYPED_ROW,
            "doc": '{"a": [1, true, null], "n": 70000, "name": "é"}',  # MySQL's key order
        }
    ]
    assert [c.position for c in changes if isinstance(c, RowChange)] == [_at(write)]


@pytest.mark.parametrize("commit", [True, False], ids=["xa-commit", "xa-rollback"])
def test_an_xa_transaction_ends_in_the_group_that_names_its_xid(commit: bool) -> None:
    """MySQL XA: the prepared transaction's group ends at XA_PREPARE_LOG_EVENT; its outcome
    is a group of its own under another GTID, whose statement names the XID. Other
    transactions commit in between; the prepared one commits (or rolls back) there."""
    binlog = _binlog()
    first = binlog.position
    binlog.gtid(SID, 10)
    binlog.query("XA START X'7831',X'62',7", "shop")
    binlog.table_map(T)
    write = binlog.position
    binlog.write_rows(T, [{"id": 1, "name": "xa", "qty": 1}])
    binlog.query("XA END X'7831',X'62',7", "shop")
    binlog.xa_prepare(b"x1", b"b", 7)
    binlog.gtid(SID, 11)
    other = binlog.position
    binlog.query("BEGIN", "shop")
    binlog.table_map(T)
    delete = binlog.position
    binlog.delete_rows(T, [{"id": 9, "name": None, "qty": 0}])
    binlog.xid(83)
    between = binlog.position
    binlog.gtid(SID, 12)
    binlog.query(f"XA {'COMMIT' if commit else 'ROLLBACK'} X'7831',X'62',7", "shop")
    with _served(binlog) as server:
        changes = _read(server)
        # A restart between XA PREPARE and its outcome (the pipeline's buffer holds the
        # prepared rows): the outcome still names the transaction, by its XID.
        restarted = _read(server, start=_at(between))
    xa, plain = "xa-7-7831-62", f"{SID}:11"
    end = (
        Commit(xa, _at(binlog.position), COMMIT_TS)
        if commit
        else Rollback(xa, _at(binlog.position))
    )
    assert changes == [
        Begin(xa, _at(_end_of(binlog, first))),
        RowChange(xa, _at(write), "c", "shop.t", (1,), {"id": 1, "name": "xa", "qty": 1}),
        Begin(plain, _at(other)),
        RowChange(plain, _at(delete), "d", "shop.t", (9,), None, {"id": 9, "name": None, "qty": 0}),
        Commit(plain, _at(between), COMMIT_TS),
        end,
    ]
    assert restarted == [end]


@pytest.mark.parametrize(
    ("data", "compression"),
    [(b"\x04\x22\x4d\x18 an lz4 frame", 1), (b"\x28\xb5\x2f\xfd not really zstd", ZSTD)],
    ids=["lz4", "damaged-zstd"],
)
def test_a_payload_that_cannot_be_decoded_is_refused_at_its_position(
    data: bytes, compression: int
) -> None:
    binlog = _binlog()
    binlog.gtid(SID, 8)
    payload = binlog.position
    binlog.transaction_payload(data, compression)
    with _served(binlog) as server, pytest.raises(UnreadableEventError) as raised:
        _read(server)
    assert raised.value.context["position"] == f"{FILE}:{payload}"
    assert "binlog_transaction_compression = OFF" in str(raised.value)


def test_a_partial_json_update_of_a_captured_table_stops_the_reader_at_it() -> None:
    """binlog_row_value_options=PARTIAL_JSON set while the pipeline runs: MySQL then writes
    PARTIAL_UPDATE_ROWS_EVENTs, which the reader refuses at their position (the setting is
    refused at the start too), never skipped; one of a table not captured is filtered."""
    binlog = _binlog()
    binlog.gtid(SID, 5)
    binlog.query("BEGIN", "shop")
    binlog.table_map(OTHER)
    binlog.partial_update_rows(OTHER, [({"id": 1, "name": "a"}, {"id": 1, "name": "b"})])
    binlog.xid(70)
    binlog.gtid(SID, 6)
    binlog.query("BEGIN", "shop")
    binlog.table_map(T)
    partial = binlog.position
    binlog.partial_update_rows(
        T, [({"id": 1, "name": "a", "qty": 1}, {"id": 1, "name": "b", "qty": 1})]
    )
    binlog.xid(71)
    with _served(binlog) as server, pytest.raises(UnreadableEventError) as raised:
        _read(server)
    assert raised.value.context["position"] == f"{FILE}:{partial}"
    assert "binlog_row_value_options" in str(raised.value)


@pytest.mark.parametrize(
    ("setting", "value", "refused"),
    [
        ("binlog_row_value_options", "PARTIAL_JSON", "binlog_row_value_options"),
        ("binlog_row_metadata", "MINIMAL", "binlog_row_metadata"),
    ],
)
def test_settings_that_hide_rows_are_refused_before_reading(
    setting: str, value: str, refused: str
) -> None:
    binlog = _binlog()
    with _served(binlog, **{setting: value}) as server, pytest.raises(BinlogSetupError) as raised:
        _read(server)
    assert raised.value.context["setting"] == refused
    assert server.dumps == []


def test_mysql_8_4_is_asked_for_its_binary_log_status() -> None:
    binlog = _binlog()
    with _served(binlog, version="8.4.3") as server:
        reader = _reader(server)
        with contextlib.closing(reader):
            assert reader.end_position() == _at(binlog.position)
        assert "SHOW BINARY LOG STATUS" in server.statements
        assert "SHOW MASTER STATUS" not in server.statements


@pytest.mark.parametrize(
    ("version", "comment", "named"),
    [
        ("5.7.44-log", "MySQL Community Server (GPL)", "MySQL 5.7"),
        ("8.2.0", "MySQL Community Server - GPL", "MySQL 8.2"),
        ("9.1.0", "MySQL Community Server - GPL", "MySQL 9.1"),
        ("8.0.35-27", "Percona Server (GPL), Release 27", "Percona"),
        ("8.0.11-TiDB-v7.5.0", "", "TiDB"),
    ],
)
def test_servers_not_built_for_exit_2_before_anything_is_read(
    version: str, comment: str, named: str
) -> None:
    binlog = _binlog()
    with _served(binlog, version=version, comment=comment) as server:
        with pytest.raises(UnsupportedServerError) as raised:
            _read(server)
        read = [sql for sql in server.statements if not sql.startswith("SET ")]  # session setup
        assert read == ["SELECT VERSION(), @@version_comment"]
        assert server.dumps == []
    assert isinstance(raised.value, ConfigError) and raised.value.exit_code == 2
    assert named in str(raised.value)


def test_a_mariadb_stream_is_read_as_before() -> None:
    binlog = BinlogFile("mariadb-bin.000001")
    binlog.format_description("10.11.6-MariaDB-log")
    binlog.mariadb_gtid(0, 5)
    begin = binlog.position
    binlog.table_map(T)
    write = binlog.position
    binlog.write_rows(T, [{"id": 1, "name": "a", "qty": 1}])
    binlog.xid(80)
    version = "10.11.6-MariaDB-log"
    found = mysql_answers(
        (binlog.name, binlog.position), version, "mariadb.org binary distribution"
    )
    with FakeMySQLServer([binlog], found, version=version) as server:
        changes = _read(server, start=position_of(binlog.name, 4))
        assert "SHOW MASTER STATUS" in server.statements
        assert not [sql for sql in server.statements if "binlog_transaction_compression" in sql]
        assert server.unanswered == []
    at = functools.partial(position_of, binlog.name)
    assert changes == [
        Begin("0-1-5", at(begin)),
        RowChange("0-1-5", at(write), "c", "shop.t", (1,), {"id": 1, "name": "a", "qty": 1}),
        Commit("0-1-5", at(binlog.position), COMMIT_TS),
    ]
