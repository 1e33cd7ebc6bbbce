"""Live Oracle tests: LogMiner capture and AS OF SCN snapshots against a real server.

They run only when ``REPLCHECK_ORACLE_URL`` is set (``oracle+oracledb://user@host:1521/
?service_name=NAME``, password in ``REPLCHECK_ORACLE_PASSWORD``); the user needs the grants
``errors.PRIVILEGE_FIX`` lists plus CREATE TABLE, and the database ARCHIVELOG mode with
minimal supplemental logging. Each test creates and drops its own table.

With ``REPLCHECK_ORACLE_RECORD`` naming a directory, the capture test also writes the
reader's LogMiner session there (``session_live_capture.json``, ``origin: captured``), in
the format the offline session tests replay (``logminer_recording``), so a first user with
a server can turn the hand-written sessions into captured ones.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from cdc_core.capture.events import Commit, RawChange
from cdc_core.capture.position import Position
from cdc_core.capture.source import Idle, TableChanged
from cdc_core.rebuild.full_width import RebuildConfig
from connectors.oracle.connector import OracleConnector
from connectors.oracle.log_reader import LogMinerConfig, OracleLogReader
from connectors.oracle.log_source import log_reader
from connectors.oracle.snapshot import OracleSnapshotReader
from connectors.oracle.unavailable_columns import UnavailableColumns
from connectors.registry import connector_for
from tests.connectors.oracle.harness import Core
from tests.connectors.oracle.logminer_recording import recording_connect, save

pytestmark = pytest.mark.oracle
RECORD = "REPLCHECK_ORACLE_RECORD"
MAX_IDLE_POLLS = 120  # give up (and fail) after this many polls without the last commit


@pytest.fixture
def oracle() -> OracleConnector:
    connector = connector_for(
        os.environ["REPLCHECK_ORACLE_URL"], os.environ.get("REPLCHECK_ORACLE_PASSWORD")
    )
    assert isinstance(connector, OracleConnector)
    return connector


@pytest.fixture
def table(oracle: OracleConnector) -> Iterator[str]:
    name = f"RC_{uuid.uuid4().hex[:10].upper()}"
    with contextlib.closing(oracle.connect()) as connection, connection.cursor() as cursor:
        cursor.execute(
            f'CREATE TABLE "{name}" ("ID" NUMBER(10) PRIMARY KEY, "NAME" VARCHAR2(100),'
            ' "AMOUNT" NUMBER(12,2), "AT" TIMESTAMP(6))'
        )
        yield f"{oracle.owner()}.{name}"
        cursor.execute(f'DROP TABLE "{name}" PURGE')


def run_sql(oracle: OracleConnector, statements: list[str]) -> None:
    with contextlib.closing(oracle.connect()) as connection, connection.cursor() as cursor:
        for statement in statements:
            if statement == "COMMIT":
                connection.commit()
            elif statement == "ROLLBACK":
                connection.rollback()
            else:
                cursor.execute(statement)


def changes_until_commits(
    changes: Iterator[RawChange | TableChanged | Idle], commits: int
) -> Iterator[RawChange]:
    idle = 0
    for change in changes:
        if isinstance(change, TableChanged):
            continue
        if isinstance(change, Idle):
            idle += 1
            assert idle < MAX_IDLE_POLLS, "LogMiner never showed the expected commits"
            continue
        yield change
        if isinstance(change, Commit):
            commits -= 1
            if commits == 0:
                return


def test_live_capture_rebuilds_exact_committed_events(
    oracle: OracleConnector, table: str, tmp_path: Path
) -> None:
    name = table.split(".")[1]
    reader = log_reader(oracle, [table], LogMinerConfig(window_scns=50_000, poll_interval_s=0.5))
    exchanges: list[dict[str, Any]] = []
    if os.environ.get(RECORD):  # the same reader, its connections recorded
        connect = recording_connect(oracle.connect, exchanges)
        reader = OracleLogReader(connect, reader.tables, reader.config)
    start = reader.end_position()
    run_sql(oracle, [
        f"INSERT INTO \"{name}\" VALUES (1, 'a''b', 10.5, TIMESTAMP '2026-05-01 10:00:00.123456')",
        f"INSERT INTO \"{name}\" VALUES (2, 'two', 2, NULL)",
        "COMMIT",
        f"UPDATE \"{name}\" SET \"AMOUNT\" = 11 WHERE \"ID\" = 1",
        "SAVEPOINT s1",
        f"DELETE FROM \"{name}\" WHERE \"ID\" = 2",
        "ROLLBACK TO SAVEPOINT s1",
        "COMMIT",
        f"INSERT INTO \"{name}\" VALUES (3, 'gone', 3, NULL)",
        "ROLLBACK",
    ])  # fmt: skip
    try:
        core = Core(tmp_path)
        events = core.feed(changes_until_commits(reader.iter_changes(start), 2))
    finally:
        reader.close()
        if os.environ.get(RECORD):
            where = Path(os.environ[RECORD]) / "session_live_capture.json"
            save(where, "test_live_capture_rebuilds_exact_committed_events", exchanges)
    mine = [e for e in events if e.table == table]
    first = {"ID": 1, "NAME": "a'b", "AMOUNT": Decimal("10.5"), "AT": _at()}
    assert [(e.op, e.after) for e in mine] == [
        ("c", first),
        ("c", {"ID": 2, "NAME": "two", "AMOUNT": Decimal("2"), "AT": None}),
        ("u", first | {"AMOUNT": Decimal("11")}),
    ]
    assert mine[-1].before == first
    assert len({e.commit_scn for e in mine}) == 2


def _at() -> Any:
    import datetime as dt

    return dt.datetime(2026, 5, 1, 10, 0, 0, 123456)


def test_live_snapshot_reads_at_one_scn(oracle: OracleConnector, table: str) -> None:
    name = table.split(".")[1]
    run_sql(oracle, [f"INSERT INTO \"{name}\" VALUES (1, 'x', 1, NULL)", "COMMIT"])
    with OracleSnapshotReader(oracle).snapshot([table]) as (position, tables):
        run_sql(oracle, [f"INSERT INTO \"{name}\" VALUES (2, 'later', 2, NULL)", "COMMIT"])
        (snapshot,) = list(tables)
        rows = [row for batch in snapshot.batches for row in batch.to_pylist()]
    assert position.value > 0
    assert snapshot.description.key == ("ID",)
    assert rows == [{"ID": 1, "NAME": "x", "AMOUNT": Decimal("1"), "AT": None}]


@pytest.fixture
def long_table(oracle: OracleConnector) -> Iterator[str]:
    name = f"RC_{uuid.uuid4().hex[:10].upper()}"
    with contextlib.closing(oracle.connect()) as connection, connection.cursor() as cursor:
        cursor.execute(f'CREATE TABLE "{name}" ("ID" NUMBER(10) PRIMARY KEY, "BODY" LONG)')
        yield f"{oracle.owner()}.{name}"
        cursor.execute(f'DROP TABLE "{name}" PURGE')


def test_live_values_are_read_as_of_their_commit_scn(
    oracle: OracleConnector, long_table: str, tmp_path: Path
) -> None:
    """A LONG column (LogMiner may show it as Unsupported Type) gets exactly the values
    committed, and the flashback read by ROWID sees a transaction at its commit SCN and not
    one SCN earlier."""
    name = long_table.split(".")[1]
    config = LogMinerConfig(window_scns=50_000, poll_interval_s=0.5)
    reader = log_reader(oracle, [long_table], config)
    start = reader.end_position()
    run_sql(oracle, [
        f"INSERT INTO \"{name}\" VALUES (1, 'v1')", "COMMIT",
        f"UPDATE \"{name}\" SET \"BODY\" = 'v2' WHERE \"ID\" = 1", "COMMIT",
    ])  # fmt: skip
    hook = UnavailableColumns(oracle.connect, reader.tables)
    try:
        raw = list(changes_until_commits(reader.iter_changes(start), 2))
        core = Core(tmp_path, rebuild=RebuildConfig(fetch_unavailable_by_table={long_table: hook}))
        events = [e for e in core.feed(iter(raw)) if e.table == long_table]
        assert [(e.op, e.after) for e in events] == [
            ("c", {"ID": 1, "BODY": "v1"}),
            ("u", {"ID": 1, "BODY": "v2"}),
        ]
        rowid, first, second = events[0].locator, events[0].commit_scn, events[1].commit_scn
        assert hook(long_table, rowid, Position(first, ""), ["BODY"]) == {"BODY": "v1"}
        assert hook(long_table, rowid, Position(second, ""), ["BODY"]) == {"BODY": "v2"}
        assert hook(long_table, rowid, Position(first - 1, ""), ["BODY"]) is None
    finally:
        hook.close()
        reader.close()


def test_live_chunks_cover_the_table_in_key_order(oracle: OracleConnector, table: str) -> None:
    name = table.split(".")[1]
    run_sql(
        oracle, [f"INSERT INTO \"{name}\" VALUES ({i}, 'n{i}', {i}, NULL)" for i in (3, 1, 5, 2, 4)]
    )
    run_sql(oracle, ["COMMIT"])
    reader = OracleSnapshotReader(oracle)
    keys, positions, after = [], [], None
    while True:
        chunk = reader.read_chunk(table, after, 2)
        keys.append([row["ID"] for batch in chunk.snapshot.batches for row in batch.to_pylist()])
        positions.append(chunk.position.value)
        if chunk.last_key is None:
            break
        after = chunk.last_key
    assert keys == [[1, 2], [3, 4], [5]]
    assert positions == sorted(positions)
