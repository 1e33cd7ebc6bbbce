"""DDL that changes stored rows without row events, on a real MariaDB server (FULL and
MINIMAL row images): the pipeline refreshes the table, so the lake equals the source again.

Issue 14, class 2: ``ADD COLUMN ... DEFAULT`` left NULL in the lake's untouched rows; type
changes and charset conversions left old values. Each test checks that the mirror and the
changelog's state equal the source read by plain SQL, and what the refresh wrote.
"""

from __future__ import annotations

import contextlib
import decimal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc_core.lake.layout import LakeTable, high_water_mark, read_marks
from cdc_core.names import COMMIT_POS, OP
from cdc_core.pipeline.loop import Pipeline
from tests.cdc_core.lake_model import changelog_state
from tests.connectors.mariadb.pipeline_helpers import (
    changelog,
    execute,
    lake_rows,
    mariadb_pipeline,
)
from tests.private_servers import MariaDBServer

pytestmark = [pytest.mark.integration, pytest.mark.mariadb]

ROWS = 50


@pytest.fixture(params=["mariadb_full", "mariadb_minimal"])
def server(request: pytest.FixtureRequest) -> MariaDBServer:
    """The FULL and the MINIMAL row-image server."""
    return request.getfixturevalue(request.param)  # type: ignore[no-any-return]


def _plain_rows(
    server: MariaDBServer, database: str, table: str, key: str = "id"
) -> dict[tuple[Any, ...], dict[str, Any]]:
    """The source table read with plain SQL (pymysql's own types), keyed by ``key``."""
    with contextlib.closing(server.connect(database)) as connection, connection.cursor() as cur:
        cur.execute(f"SELECT * FROM `{table}`")
        names = [column[0] for column in cur.description]
        rows = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
        return {(row[key],): row for row in rows}


def _comparable(
    rows: dict[tuple[Any, ...], dict[str, Any]],
) -> dict[tuple[Any, ...], dict[str, Any]]:
    def value(v: Any) -> Any:
        return str(v) if isinstance(v, decimal.Decimal) else v

    return {key: {c: value(v) for c, v in row.items()} for key, row in rows.items()}


@contextlib.contextmanager
def _loaded(
    server: MariaDBServer, database: str, tmp_path: Path, create: str
) -> Iterator[Pipeline]:
    execute(server, database, create)
    values = ", ".join(f"({i}, {i * 10}, 'row {i}')" for i in range(1, ROWS + 1))
    execute(server, database, f"INSERT INTO t (id, v, s) VALUES {values}")
    with mariadb_pipeline(server, database, ["t"], tmp_path, refresh_chunk_rows=7) as (pipeline, _):
        pipeline.run_until_caught_up()  # the initial load
        yield pipeline


def _assert_lake_equals_source(
    server: MariaDBServer, database: str, tmp_path: Path, key: str = "id"
) -> None:
    """The lake's rows equal the source's; a column the source dropped is NULL in all."""
    table = f"{database}.t"
    source = _comparable(_plain_rows(server, database, "t", key))
    columns = set(next(iter(source.values())))
    lake = tmp_path / "lake"
    for rows in (lake_rows(lake, table, [key]), changelog_state(lake, table, (key,))):
        kept = {key: {c: v for c, v in row.items() if c in columns} for key, row in rows.items()}
        assert _comparable(kept) == source
        dropped = {v for row in rows.values() for c, v in row.items() if c not in columns}
        assert dropped <= {None}


@pytest.mark.parametrize(
    "ddl",
    [
        "ALTER TABLE t ADD COLUMN c VARCHAR(5) DEFAULT 'x'",
        "ALTER TABLE t ADD COLUMN n INT NOT NULL",  # an implicit default: 0
        "ALTER TABLE t ADD COLUMN at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)",
        "ALTER TABLE t MODIFY v DECIMAL(12,1)",  # a retype: the lake's type changes
        "ALTER TABLE t MODIFY s VARCHAR(3)",  # values cut (non-strict sql_mode)
        "ALTER TABLE t CONVERT TO CHARACTER SET latin1",
        "ALTER TABLE t DROP COLUMN s",
        "ALTER TABLE t CHANGE s label VARCHAR(20)",
    ],
)
def test_ddl_that_rewrites_rows_is_followed_by_a_refresh(
    server: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    tmp_path: Path,
    ddl: str,
) -> None:
    database = mariadb_database(server)
    create = "CREATE TABLE t (id INT PRIMARY KEY, v INT, s VARCHAR(20))"
    with _loaded(server, database, tmp_path, create) as pipeline:
        loaded_at = high_water_mark(LakeTable(tmp_path / "lake", f"{database}.t")) or 0
        execute(
            server,
            database,
            "SET SESSION sql_mode = ''",
            "UPDATE t SET s = 'résumé ☃' WHERE id = 2",
            ddl,
            "UPDATE t SET v = v + 1 WHERE id IN (3, 40)",  # changes after the DDL
            "DELETE FROM t WHERE id = 4",
        )
        pipeline.run_until_caught_up()

    _assert_lake_equals_source(server, database, tmp_path)
    events = changelog(tmp_path / "lake", f"{database}.t")
    refreshed = {e["id"] for e in events if e[OP] == "r" and e[COMMIT_POS] > loaded_at}
    assert refreshed >= set(range(5, ROWS + 1))  # every row read again after the DDL


def test_a_nullable_column_added_without_default_needs_no_refresh(
    server: MariaDBServer, mariadb_database: Callable[[MariaDBServer], str], tmp_path: Path
) -> None:
    database = mariadb_database(server)
    create = "CREATE TABLE t (id INT PRIMARY KEY, v INT, s VARCHAR(20))"
    with _loaded(server, database, tmp_path, create) as pipeline:
        execute(server, database, "ALTER TABLE t ADD COLUMN note VARCHAR(10)")
        pipeline.run_until_caught_up()

    _assert_lake_equals_source(server, database, tmp_path)
    events = changelog(tmp_path / "lake", f"{database}.t")
    assert [e[OP] for e in events] == ["r"] * ROWS  # the load only: nothing re-read
    assert all(e["note"] is None for e in events)  # and the lake already has the column


def test_a_refresh_under_concurrent_writes_and_its_stale_window(
    server: MariaDBServer, mariadb_database: Callable[[MariaDBServer], str], tmp_path: Path
) -> None:
    """Writers keep changing the table while it is refreshed in chunks of 7 rows."""
    database = mariadb_database(server)
    create = "CREATE TABLE t (id INT PRIMARY KEY, v INT, s VARCHAR(20))"

    def write() -> None:
        connection = server.connect(database)
        with contextlib.closing(connection), connection.cursor() as cursor:
            for step in range(1, 301):
                cursor.execute(f"UPDATE t SET v = v + 1 WHERE id = {step % ROWS + 1}")
                cursor.execute(f"INSERT INTO t (id, v, s) VALUES ({1000 + step}, 1, 'w')")
                cursor.execute(f"DELETE FROM t WHERE id = {1000 + step - 3}")
                connection.commit()

    with _loaded(server, database, tmp_path, create) as pipeline:
        execute(server, database, "ALTER TABLE t ADD COLUMN c INT DEFAULT 7")
        writer = threading.Thread(target=write)
        writer.start()
        try:
            pipeline.run_until_caught_up()  # refreshes while the writer writes
        finally:
            writer.join()
        pipeline.run_until_caught_up()

    _assert_lake_equals_source(server, database, tmp_path)
    marks = read_marks(tmp_path / "lake")
    table = f"{database}.t"
    assert table not in marks.refreshing
    [(start, end)] = marks.stale[table]
    assert start < end <= (high_water_mark(LakeTable(tmp_path / "lake", table)) or 0)


def test_a_column_renamed_and_added_again_with_another_type_while_the_pipeline_lags(
    server: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    tmp_path: Path,
) -> None:
    """A DDL the pipeline follows describes the table as the source has it now, ahead of the
    log: the changes made before a later rename-and-re-add of a column with another type fit
    no such description (soak seed 3173 of mariadb-minimal stopped on StaleDescriptionError).
    They are written in the shape the lake holds; the later DDL reloads the table."""
    database = mariadb_database(server)
    create = "CREATE TABLE t (id INT PRIMARY KEY, v INT, s VARCHAR(20))"
    with _loaded(server, database, tmp_path, create) as pipeline:
        execute(
            server,
            database,
            "ALTER TABLE t ADD COLUMN w INT",
            "INSERT INTO t (id, v, s, w) VALUES (1000, 1, 'before', 5)",
            "ALTER TABLE t RENAME COLUMN s TO s_old",
            "ALTER TABLE t ADD COLUMN s INT NOT NULL",
            "INSERT INTO t (id, v, s_old, w, s) VALUES (1001, 2, 'after', 6, 7)",
        )
        pipeline.run_until_caught_up()
    _assert_lake_equals_source(server, database, tmp_path)


@pytest.mark.parametrize("between", [False, True], ids=["at-once", "caught-up-between"])
def test_a_column_dropped_and_added_again_as_a_number_holds_numbers_not_times(
    server: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    tmp_path: Path,
    between: bool,
) -> None:
    """A DATETIME column dropped and added again as an INT (mariadb-full soak seed 6054):
    the lake's column stayed a timestamp, and Arrow cast each new integer into it as that
    many microseconds after 1970 (-274 became 1969-12-31 23:59:59.999726). The lake
    cannot hold the new type, so the table is loaded again into new lake tables."""
    database = mariadb_database(server)
    create = "CREATE TABLE t (id INT PRIMARY KEY, v INT, s VARCHAR(20), c0 DATETIME(6))"
    with _loaded(server, database, tmp_path, create) as pipeline:
        execute(
            server,
            database,
            "UPDATE t SET c0 = '2023-02-20 12:49:10' WHERE id = 2",
            "ALTER TABLE t DROP COLUMN c0",
            "INSERT INTO t (id, v, s) VALUES (1000, 1, 'dropped')",
        )
        if between:
            pipeline.run_until_caught_up()
        execute(
            server,
            database,
            "ALTER TABLE t ADD COLUMN c0 INT",
            "INSERT INTO t (id, v, s, c0) VALUES (1001, 2, 'added', -274), (1002, 3, 'x', 699)",
            "UPDATE t SET c0 = -1 WHERE id = 3",
        )
        pipeline.run_until_caught_up()
    _assert_lake_equals_source(server, database, tmp_path)
    assert lake_rows(tmp_path / "lake", f"{database}.t", ["id"])[(1001,)]["c0"] == -274


@pytest.mark.parametrize("restart", [False, True], ids=["running", "started-after"])
@pytest.mark.parametrize(
    ("ddl", "key"),
    [
        ("ALTER TABLE t RENAME COLUMN id TO id2", "id2"),
        ("ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (v)", "v"),
    ],
)
def test_key_changes_logged_before_the_key_is_renamed_while_the_pipeline_lags(
    server: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    tmp_path: Path,
    ddl: str,
    key: str,
    restart: bool,
) -> None:
    """Changes logged before a DDL that renames or replaces the primary key carry the key
    of then; the pipeline reads them with the description of before the DDL, or (started
    again after it) of after it."""
    database = mariadb_database(server)
    create = "CREATE TABLE t (id INT PRIMARY KEY, v INT, s VARCHAR(20))"
    changes = (
        "UPDATE t SET v = v + 1000 WHERE id = 1",
        "UPDATE t SET id = id + 1000 WHERE id = 2",
        "DELETE FROM t WHERE id = 3",
        "INSERT INTO t (id, v, s) VALUES (5000, 5000, 'new')",
        ddl,
        "INSERT INTO t VALUES (6000, 6000, 'after')",
    )
    with _loaded(server, database, tmp_path, create) as pipeline:
        if not restart:
            execute(server, database, *changes)
            pipeline.run_until_caught_up()
    if restart:
        execute(server, database, *changes)
        with mariadb_pipeline(server, database, ["t"], tmp_path) as (pipeline, _):
            pipeline.run_until_caught_up()
    _assert_lake_equals_source(server, database, tmp_path, key)


def test_a_decimal_column_renamed_and_an_integer_added_with_its_name_while_the_pipeline_lags(
    server: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    tmp_path: Path,
) -> None:
    """As above, with a DECIMAL column whose old name comes back as an INT: Arrow truncates
    12.5 into an int64 column without a word, so the changes between were written as 12
    (the PostgreSQL twin stopped the pipeline, postgres-default seed 4157)."""
    database = mariadb_database(server)
    create = "CREATE TABLE t (id INT PRIMARY KEY, v INT, s VARCHAR(20), d DECIMAL(10, 2))"
    with _loaded(server, database, tmp_path, create) as pipeline:
        execute(
            server,
            database,
            "ALTER TABLE t ADD COLUMN w INT",
            "UPDATE t SET d = 12.5 WHERE id = 1",
            "INSERT INTO t (id, v, s, d) VALUES (1000, 1, 'before', 7.25)",
            "ALTER TABLE t RENAME COLUMN d TO d_old",
            "ALTER TABLE t ADD COLUMN d INT",
            "INSERT INTO t (id, v, s, d_old, d) VALUES (1001, 2, 'after', 0.5, 7)",
        )
        pipeline.run_until_caught_up()
    _assert_lake_equals_source(server, database, tmp_path)
