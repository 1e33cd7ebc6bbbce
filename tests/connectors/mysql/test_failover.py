"""A pipeline follows its MySQL source to a replica after a failover, by GTID set.

Two fake servers play the old primary and its replica, each serving its own binlog files
(the same transactions at other files and offsets, then the replica's own) over the real
protocol; the replica serves ``COM_BINLOG_DUMP_GTID`` as MySQL's documentation says. The
pipeline, its checkpoint, buffer and lake are the real ones; only the table's description
is given (the fake servers answer the log reader's statements, not SQLAlchemy's
reflection). No MySQL server has run this ("built to the documented protocol").
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from cdc_core.capture.events import Begin, Rollback
from cdc_core.capture.filters import TableFilter
from cdc_core.capture.position import Position
from cdc_core.capture.source import Idle, TableDescription
from cdc_core.lake.layout import sources_of
from cdc_core.pipeline.checkpoint import read_checkpoint, write_checkpoint
from cdc_core.pipeline.loop import Pipeline, PipelineConfig, SourceChangedError
from connectors.mariadb.connector import MariaDBConnector
from connectors.mariadb.failover import FailoverError
from connectors.mariadb.gtid import executed_of
from connectors.mariadb.log_reader import MariaDBLogReader
from connectors.mariadb.position import epoch_of, position_of
from connectors.mariadb.source_config import MariaDBSourceConfig
from tests.connectors.mysql.binlog_encoder import BinlogFile, Column, Table
from tests.connectors.mysql.fake_server import (
    Answer,
    FakeMySQLServer,
    ResultSet,
    mysql_answers,
)

A = uuid.UUID("3e11fa47-71ca-11e1-9e33-c80aa9429562")  # the old primary
B = uuid.UUID("4f22ab58-71ca-11e1-9e33-c80aa9429562")  # its replica, promoted
T = Table(
    108,
    "shop",
    "t",
    (Column("id", "int", nullable=False), Column("name", "varchar", max_length=80)),
    ("id",),
)
DESCRIPTION = TableDescription(
    "shop.t",
    pa.schema([pa.field("id", pa.int32(), nullable=False), ("name", pa.string())]),
    ("id",),
)


def _insert(binlog: BinlogFile, sid: uuid.UUID, number: int, row_id: int) -> None:
    binlog.gtid(sid, number)
    binlog.query("BEGIN", "shop")
    binlog.table_map(T)
    binlog.write_rows(T, [{"id": row_id, "name": f"row {row_id}"}])
    binlog.xid(number)


def _file(name: str) -> BinlogFile:
    binlog = BinlogFile(name)
    binlog.format_description()
    binlog.previous_gtids({A: [(1, 4)]})
    return binlog


def _answer(server: FakeMySQLServer, binlog: BinlogFile, sid: uuid.UUID, **sql: str) -> None:
    """What the server answers now: its binlog's end, its id and the failover's checks."""
    missing, purged, mode = sql.get("missing", ""), sql.get("purged", ""), sql.get("mode", "ON")
    server.answers = [
        *mysql_answers((binlog.name, binlog.position), settings={"gtid_mode": mode}),
        Answer(r"SELECT @@server_uuid", ResultSet(("u",), ((str(sid),),))),
        Answer(r"SELECT @@GLOBAL.gtid_mode", ResultSet(("m",), ((mode,),))),
        Answer(r"SELECT GTID_SUBTRACT\(.*", ResultSet(("m", "p"), ((missing, purged),))),
    ]


@contextlib.contextmanager
def _server(binlog: BinlogFile, sid: uuid.UUID, **sql: str) -> Iterator[FakeMySQLServer]:
    with FakeMySQLServer([binlog], []) as server:
        _answer(server, binlog, sid, **sql)
        yield server
    assert server.unanswered == []


class _Described(MariaDBLogReader):
    """The real reader, with its table's description given."""

    def describe(self, table: str) -> TableDescription:
        return DESCRIPTION


def _reader(server: FakeMySQLServer) -> MariaDBLogReader:
    return _Described(MariaDBSourceConfig(url=server.url("shop"), tables=("t",), heartbeat_s=0.1))


def _catch_up(work: Path, server: FakeMySQLServer) -> None:
    config = PipelineConfig(
        "mysql", work / "lake", work / "state", TableFilter.of_tables(["shop.t"])
    )
    reader = _reader(server)
    with contextlib.closing(reader):
        Pipeline(config, reader).run_until_caught_up()


def _lake(work: Path) -> tuple[list[tuple[int, str]], list[tuple[int, int]]]:
    """The mirror's rows, and the changelog's (id, commit position) in commit order."""
    mirror = DeltaTable(str(work / "lake" / "shop" / "t" / "mirror")).to_pyarrow_table()
    changelog = DeltaTable(str(work / "lake" / "shop" / "t" / "changelog")).to_pyarrow_table()
    rows = sorted(zip(mirror["id"].to_pylist(), mirror["name"].to_pylist(), strict=True))
    events = sorted(
        zip(changelog["_commit_pos"].to_pylist(), changelog["id"].to_pylist(), strict=True)
    )
    return rows, [(row_id, at) for at, row_id in events]


def _replicated(work: Path) -> tuple[BinlogFile, BinlogFile]:
    """The old primary's transactions 5 and 6 in the lake; the replica has them at its own
    offsets, after a group of its own, then 7 (which the pipeline did not read from the
    old primary) and its first transaction as the new primary."""
    primary = _file("binlog.000001")
    with _server(primary, A) as old:
        _catch_up(work, old)  # starts at the log's end
        _insert(primary, A, 5, 1)
        _insert(primary, A, 6, 2)
        _answer(old, primary, A)
        _catch_up(work, old)
    replica = _file("replica-bin.000001")
    replica.gtid(B, 1)
    replica.query("CREATE DATABASE other", "")
    for number in (5, 6, 7):
        _insert(replica, A, number, number - 4)
    _insert(replica, B, 2, 4)
    return primary, replica


def test_a_pipeline_follows_a_failover_by_gtid_set(tmp_path: Path) -> None:
    _, replica = _replicated(tmp_path)
    state = tmp_path / "state"
    before = read_checkpoint(state)
    assert before is not None and before.source == f"MySQL server_uuid {A}"
    assert before.resume_token is not None and executed_of(before.resume_token[1]) == f"{A}:1-6"

    with _server(replica, B) as new:
        _catch_up(tmp_path, new)
        assert new.gtid_dumps == [f"{A}:1-6"] and new.dumps == []
        rows, events = _lake(tmp_path)
        assert rows == [(i, f"row {i}") for i in (1, 2, 3, 4)]
        assert [row_id for row_id, _ in events] == [1, 2, 3, 4]  # each change once
        assert [epoch_of(at) for _, at in events] == [0, 0, 1, 1]
        after = read_checkpoint(state)
        assert after is not None and after.source == f"MySQL server_uuid {B}"
        assert after.lake_position is not None and after.lake_position.text.endswith("@1")

        # A restart on the new primary resumes by file and offset (with the set its
        # checkpoint keeps for them), in its epoch.
        reached = replica.position
        _insert(replica, B, 3, 5)
        _answer(new, replica, B)
        _catch_up(tmp_path, new)
        assert new.gtid_dumps == [f"{A}:1-6"] and new.dumps == [(replica.name, reached)]
    rows, events = _lake(tmp_path)
    assert [row_id for row_id, _ in events] == [1, 2, 3, 4, 5]
    assert epoch_of(events[-1][1]) == 1


def test_the_validator_numbers_the_new_servers_positions_as_the_lake_does(
    tmp_path: Path,
) -> None:
    """The lake's progress names the server its pipeline reads; a validator reading that
    server places its positions in the pipeline's epoch, and one reading another server
    (here the old primary) is refused instead of comparing positions of two logs."""
    primary, replica = _replicated(tmp_path)
    with _server(replica, B) as new:
        _catch_up(tmp_path, new)
        sources = sources_of(tmp_path / "lake", "shop.t")
        assert [source for source, _ in sources] == [f"MySQL server_uuid {B}"]
        connector = MariaDBConnector(new.url("shop"), None)
        before = connector.log_position()
        connector.follow_lake(lambda: [(source, at.value) for source, at in sources])
        end = connector.log_position()
        assert before is not None and end is not None and epoch_of(before) == 0
        assert end == position_of(replica.name, replica.position, epoch=1).value
        assert end >= max(at for _, at in _lake(tmp_path)[1])  # the lake is not ahead of it
    with _server(primary, A) as old:
        connector = MariaDBConnector(old.url("shop"), None)
        with pytest.raises(FailoverError) as refused:
            connector.follow_lake(lambda: [(source, at.value) for source, at in sources])
    assert f"written from the log of MySQL server_uuid {B}" in refused.value.message


@pytest.mark.parametrize(
    ("sql", "said"),
    [
        ({"missing": f"{A}:6"}, f"it lacks transactions the lake already holds ({A}:6)"),
        ({"purged": f"{A}:7"}, f"transactions the pipeline has not read ({A}:7)"),
        ({"mode": "OFF_PERMISSIVE"}, "gtid_mode=OFF_PERMISSIVE"),
    ],
    ids=["behind", "purged", "no-gtids"],
)  # fmt: skip
def test_a_server_that_cannot_go_on_is_refused_by_name(
    tmp_path: Path, sql: dict[str, str], said: str
) -> None:
    _, replica = _replicated(tmp_path)
    with _server(replica, B, **sql) as new, pytest.raises(FailoverError) as refused:
        _catch_up(tmp_path, new)
    assert (
        said in refused.value.message and f"is now MySQL server_uuid {B}" in refused.value.message
    )
    assert new.gtid_dumps == [] and new.dumps == []
    rows, _ = _lake(tmp_path)
    assert rows == [(1, "row 1"), (2, "row 2")]  # the lake is as it was


def test_without_a_gtid_set_the_other_server_is_refused(tmp_path: Path) -> None:
    """A checkpoint with no token (written before tokens, or gtid_mode=OFF)."""
    _, replica = _replicated(tmp_path)
    state = tmp_path / "state"
    recorded = read_checkpoint(state)
    assert recorded is not None
    write_checkpoint(state, dataclasses.replace(recorded, resume_token=None))
    with _server(replica, B) as new, pytest.raises(SourceChangedError) as refused:
        _catch_up(tmp_path, new)
    assert "keeps no GTID set for the position it resumes from" in refused.value.message
    assert new.gtid_dumps == []


def test_transactions_held_open_are_rolled_back_before_the_new_server_sends_them() -> None:
    replica = _file("replica-bin.000001")
    _insert(replica, A, 5, 1)
    start = position_of("binlog.000009", 1234)
    token = json.dumps({"executed": f"{A}:1-4", "prepared": {}})
    with _server(replica, B) as new:
        reader = _reader(new)
        reader.follow_failover(start, token, f"MySQL server_uuid {A}")
        reader.resume_transactions([f"{A}:5"])
        changes = reader.iter_changes(start)
        with contextlib.closing(reader), contextlib.closing(changes):
            first, second = next(changes), next(changes)
            assert isinstance(first, Rollback) and first.txid == f"{A}:5"
            assert first.position == Position(1 << 56, "failover 1")
            assert isinstance(second, Begin) and second.txid == f"{A}:5"
            assert epoch_of(second.position.value) == 1
            assert not isinstance(second, Idle)


def test_a_held_xa_transaction_the_token_does_not_name_is_refused() -> None:
    replica = _file("replica-bin.000001")
    start = position_of("binlog.000009", 1234)
    token = json.dumps({"executed": f"{A}:1-5", "prepared": {}})
    with _server(replica, B) as new:
        reader = _reader(new)
        reader.follow_failover(start, token, f"MySQL server_uuid {A}")
        reader.resume_transactions(["xa-1-78-62"])
        with contextlib.closing(reader), pytest.raises(FailoverError) as refused:
            next(reader.iter_changes(start))
    assert "prepared XA transactions ['xa-1-78-62']" in refused.value.message
