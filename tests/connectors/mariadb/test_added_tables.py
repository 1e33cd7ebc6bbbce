"""Tables added to a running pipeline are loaded by a table refresh, without a stop.

Two ways in: a table created (or renamed) at the source into the pipeline's globs, and a
table named to ``Pipeline.add_tables``. Writers keep changing it while it loads; the lake
must then equal the source.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from cdc_core.capture.filters import TableFilter
from cdc_core.pipeline.loop import Pipeline, PipelineConfig
from connectors.registry import log_source_for
from tests.cdc_core.lake_model import changelog_state
from tests.connectors.mariadb.pipeline_helpers import execute, lake_rows, source_rows
from tests.private_servers import MariaDBServer

pytestmark = [pytest.mark.integration, pytest.mark.mariadb]


@pytest.fixture(params=["mariadb_full", "mariadb_minimal"])
def server(request: pytest.FixtureRequest) -> MariaDBServer:
    """The FULL and the MINIMAL row-image server."""
    return request.getfixturevalue(request.param)  # type: ignore[no-any-return]


def _pipeline(server: MariaDBServer, database: str, tmp_path: Path, pattern: str) -> Pipeline:
    """A pipeline capturing ``database.<pattern>``, as ``cdc run`` builds it."""
    source = log_source_for(server.url(database) + "?heartbeat_s=0.2", None, [pattern])
    config = PipelineConfig(
        "added",
        tmp_path / "lake",
        tmp_path / "state",
        TableFilter.of_tables([f"{database}.{pattern}"]),
        refresh_chunk_rows=25,
    )
    config = replace(config, fetch_missing=source.fetch_missing)
    tables = source.tables()
    return Pipeline(config, source.reader, source.snapshots, tables=tables)


def _write(server: MariaDBServer, database: str, table: str, steps: int) -> None:
    connection = server.connect(database)
    with contextlib.closing(connection), connection.cursor() as cursor:
        for step in range(steps):
            cursor.execute(f"UPDATE {table} SET v = v + 1 WHERE id = {step % 100 + 1}")
            cursor.execute(f"INSERT INTO {table} VALUES ({1000 + step}, {step})")
            cursor.execute(f"DELETE FROM {table} WHERE id = {step % 100 + 40}")
            connection.commit()


def _assert_lake_equals_source(server: MariaDBServer, database: str, lake: Path, name: str) -> None:
    table = f"{database}.{name}"
    source = source_rows(server, database, name, ["id"])
    assert lake_rows(lake, table, ["id"]) == source
    assert changelog_state(lake, table, ("id",)) == source


def test_a_table_created_into_the_globs_is_loaded_while_written(
    server: MariaDBServer, mariadb_database: Callable[[MariaDBServer], str], tmp_path: Path
) -> None:
    database = mariadb_database(server)
    execute(server, database, "CREATE TABLE t_a (id INT PRIMARY KEY, v INT)")
    pipeline = _pipeline(server, database, tmp_path, "t_*")
    try:
        pipeline.run_until_caught_up()
        values = ", ".join(f"({i}, {i})" for i in range(1, 201))
        execute(
            server,
            database,
            "CREATE TABLE t_b (id INT PRIMARY KEY, v INT)",
            f"INSERT INTO t_b VALUES {values}",
            "CREATE TABLE other (id INT PRIMARY KEY, v INT)",  # outside the globs
            "CREATE TABLE t_c (PRIMARY KEY (id)) SELECT id, v FROM t_b",  # rows in its DDL
        )
        writer = threading.Thread(target=_write, args=(server, database, "t_b", 150))
        writer.start()
        try:
            pipeline.run_until_caught_up()
        finally:
            writer.join()
        pipeline.run_until_caught_up()
    finally:
        pipeline.reader.close()

    lake = tmp_path / "lake"
    _assert_lake_equals_source(server, database, lake, "t_b")
    _assert_lake_equals_source(server, database, lake, "t_c")
    assert not (lake / database / "other").exists()


def test_add_tables_loads_a_table_without_stopping(
    server: MariaDBServer, mariadb_database: Callable[[MariaDBServer], str], tmp_path: Path
) -> None:
    database = mariadb_database(server)
    values = ", ".join(f"({i}, {i})" for i in range(1, 201))
    execute(
        server,
        database,
        "CREATE TABLE first (id INT PRIMARY KEY, v INT)",
        "CREATE TABLE later (id INT PRIMARY KEY, v INT)",
        f"INSERT INTO later VALUES {values}",
    )
    pipeline = _pipeline(server, database, tmp_path, "first")
    try:
        pipeline.run_until_caught_up()
        pipeline.add_tables([f"{database}.later"])
        writer = threading.Thread(target=_write, args=(server, database, "later", 150))
        writer.start()
        try:
            pipeline.run_until_caught_up()
        finally:
            writer.join()
        pipeline.run_until_caught_up()
    finally:
        pipeline.reader.close()

    _assert_lake_equals_source(server, database, tmp_path / "lake", "later")
