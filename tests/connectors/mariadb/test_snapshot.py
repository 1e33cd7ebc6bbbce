"""The initial snapshot at P plus the binlog from P gives the source's state exactly, while
a writer commits concurrently (none lost, none doubled)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Hashable

import pytest

from cdc_core.capture.events import ABSENT, RowChange
from cdc_core.capture.position import Position
from cdc_core.capture.source import KeyShapeError
from cdc_core.ddl.table_refresh import RefreshState, read_chunk
from connectors.mariadb.snapshot import MariaDBSnapshotReader, describe_table
from connectors.mariadb.source_config import MariaDBSourceConfig
from connectors.model import Partition
from connectors.table_changes import TableChangedError, retry_while_changing
from tests.connectors.mariadb.binlog_helpers import BinlogCase, read_until_end

pytestmark = [pytest.mark.integration, pytest.mark.mariadb]
WRITES = 300


def _writer(case: BinlogCase, started: threading.Event) -> None:
    with contextlib.closing(case.server.connect(case.database)) as connection:
        cursor = connection.cursor()
        for i in range(WRITES):
            cursor.execute("INSERT INTO w VALUES (%s, %s)", (1000 + i, i))
            cursor.execute("UPDATE w SET v = v + 1 WHERE id = %s", (i % 100 + 1,))
            if i % 3 == 2:
                cursor.execute("DELETE FROM w WHERE id = %s", (1000 + i - 1,))
            if i == 50:
                started.set()


def _apply(state: dict[Hashable, dict[str, object]], change: RowChange) -> None:
    if change.op == "c":
        assert change.locator not in state, f"insert of {change.locator} seen twice"
        state[change.locator] = dict(change.after or {})
    elif change.op == "u":
        row = state[change.locator]  # KeyError: an update of a row the snapshot lacked
        for column, value in (change.before or {}).items():
            assert value is ABSENT or row[column] == value, "before-image does not match"
        row.update({c: v for c, v in (change.after or {}).items() if v is not ABSENT})
    elif change.op == "d":
        del state[change.locator]


def test_snapshot_then_stream_from_its_position_gives_the_source_state(
    case: BinlogCase,
) -> None:
    case.sql("CREATE TABLE w (id INT PRIMARY KEY, v INT)")
    case.sql("INSERT INTO w VALUES " + ", ".join(f"({i}, 0)" for i in range(1, 101)))
    started = threading.Event()
    writer = threading.Thread(target=_writer, args=(case, started))
    writer.start()
    try:
        started.wait()
        config = MariaDBSourceConfig(url=case.server.url(case.database), tables=("w",))
        with MariaDBSnapshotReader(config).snapshot(["w"]) as (position, tables):
            (table,) = list(tables)
            rows = [row for batch in table.batches for row in batch.to_pylist()]
    finally:
        writer.join()
    assert table.description.key == ("id",)
    assert 100 < len(rows) < 100 + WRITES  # the writer was mid-way
    state: dict[Hashable, dict[str, object]] = {(row["id"],): row for row in rows}
    changes = read_until_end(case.reader("w"), position)
    for change in changes:
        if isinstance(change, RowChange):
            _apply(state, change)
    source = {(r[0],): {"id": r[0], "v": r[1]} for r in case.query("SELECT id, v FROM w")}
    assert state == source


def test_a_snapshot_reads_only_the_asked_keys(case: BinlogCase) -> None:
    case.sql("CREATE TABLE k (a INT, b VARCHAR(3), v INT, PRIMARY KEY (a, b))")
    case.sql("INSERT INTO k VALUES (1, 'x', 10), (1, 'y', 11), (2, 'x', 12)")
    config = MariaDBSourceConfig(url=case.server.url(case.database), tables=("k",))
    keys = {"k": [(1, "y"), (2, "x"), (9, "z")]}
    with MariaDBSnapshotReader(config).snapshot(["k"], keys) as (position, tables):
        rows = [row for table in tables for batch in table.batches for row in batch.to_pylist()]
    assert sorted(rows, key=lambda row: row["v"]) == [
        {"a": 1, "b": "y", "v": 11},
        {"a": 2, "b": "x", "v": 12},
    ]
    assert position.text.startswith("mariadb-bin.")


def test_asked_keys_with_time_values_as_the_lake_holds_them(case: BinlogCase) -> None:
    """A table without a key is read again by all its columns; a TIME there is held as
    microseconds and goes to the server as its text (found by the generative tester,
    postgres-default seed 4005, where PostgreSQL refused ``time = bigint``; MariaDB matched
    nothing)."""
    case.sql("CREATE TABLE k (a INT, t TIME(6))")
    case.sql(
        "INSERT INTO k VALUES (1, '-838:59:59'), (2, '23:59:59.999999'), (3, NULL), (4, '00:00:01')"
    )
    config = MariaDBSourceConfig(url=case.server.url(case.database), tables=("k",))
    with MariaDBSnapshotReader(config).snapshot(["k"]) as (_, tables):
        held = [row for table in tables for batch in table.batches for row in batch.to_pylist()]
    asked = [(row["a"], row["t"]) for row in held if row["a"] != 4]
    with MariaDBSnapshotReader(config).snapshot(["k"], {"k": asked}) as (_, tables):
        rows = [row for table in tables for batch in table.batches for row in batch.to_pylist()]
    assert sorted((row["a"], row["t"]) for row in rows) == [
        (1, -3_020_399_000_000),
        (2, 86_399_999_999),
        (3, None),
    ]


def test_keys_of_a_shape_the_source_has_left_are_refused_and_a_refresh_reads_the_table(
    case: BinlogCase,
) -> None:
    """A refresh's pending keys were taken in the table's earlier shape: the source dropped a
    column of a table without a key (its key is every column) before the pipeline's stream
    reached that DDL (mariadb-full seed 8106 stopped on a bare ``ValueError``). Asked by
    key, the snapshot refuses them by name; the refresh reads the whole table instead."""
    case.sql("CREATE TABLE nk (a INT, b INT, c INT)")
    case.sql("INSERT INTO nk VALUES (1, 2, 3), (4, 5, 6)")
    case.sql("ALTER TABLE nk DROP COLUMN c")
    reader = MariaDBSnapshotReader(
        MariaDBSourceConfig(url=case.server.url(case.database), tables=("nk",))
    )
    with (
        pytest.raises(KeyShapeError, match=r"keys of \[3\] values asked of a key of 2 columns"),
        reader.snapshot(["nk"], {"nk": [(1, 2, 3)]}) as (_, tables),
    ):
        [batch for table in tables for batch in table.batches]
    pending = RefreshState("nk", Position(1, "p"), True, scanned=True, pending=((1, 2, 3),))
    chunk = read_chunk(reader, pending)
    rows = [row for batch in chunk.snapshot.batches for row in batch.to_pylist()]
    assert sorted(rows, key=lambda row: row["a"]) == [{"a": 1, "b": 2}, {"a": 4, "b": 5}]
    assert chunk.last_key is None


def test_a_table_changed_between_its_definition_and_its_rows_is_read_again(
    case: BinlogCase,
) -> None:
    """A DDL between the description and the SELECT (soak seed 3047 of mariadb-minimal: an
    unexpected KeyError stopped ``cdc run``) is ``TableChangedError``, which the readers that
    can read again do, with the table's new definition."""
    case.sql("CREATE TABLE r (id INT PRIMARY KEY, c INT)", "INSERT INTO r VALUES (1, 5)")
    config = MariaDBSourceConfig(url=case.server.url(case.database), tables=("r",))
    reader = MariaDBSnapshotReader(config)
    table = f"{case.database}.r"
    stale = describe_table(reader.connector, table, {})
    case.sql("ALTER TABLE r RENAME COLUMN c TO d")
    connection = contextlib.closing(reader.connector.connect())
    with connection as held, pytest.raises(TableChangedError, match=r"table .*\.r changed"):
        list(reader._batches(held, stale, Partition(0)))
    attempts: list[int] = []

    def read() -> list[dict[str, object]]:
        attempts.append(1)
        description = stale if len(attempts) == 1 else describe_table(reader.connector, table, {})
        with contextlib.closing(reader.connector.connect()) as connection:
            batches = reader._batches(connection, description, Partition(0))
            return [row for batch in batches for row in batch.to_pylist()]

    assert retry_while_changing(read) == [{"id": 1, "d": 5}]
    assert len(attempts) == 2
    assert reader.read_chunk(table, None, 10).snapshot.description.schema.names == ["id", "d"]
