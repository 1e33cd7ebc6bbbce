"""MariaDB generated columns reach the lake exactly, or a VIRTUAL one is refused by name.

A MINIMAL row image never holds a VIRTUAL column, not even an insert's (measured here on
the real server); the pipeline used to complete it from the row's last image, so the lake
kept the value from before an update of the column it reads (wrong data, found by the
tester's table kinds). Now it is refused before loading unless the server logs FULL
images; on a FULL server a writer session with MINIMAL images stops the run by name.
STORED columns are in every after-image, and are carried under MINIMAL images too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli_runs import catch_up, write_config
from tests.connectors.mariadb.pipeline_helpers import execute, lake_rows, source_rows
from tests.private_servers import MariaDBServer

pytestmark = [pytest.mark.integration, pytest.mark.mariadb]

TABLE = (
    "CREATE TABLE g (id INT PRIMARY KEY, a INT, b VARCHAR(10),"
    " v INT AS (a * 2) VIRTUAL, s VARCHAR(12) AS (CONCAT(b, '!')) STORED)"
)
CHANGES = (
    "INSERT INTO g (id, a, b) VALUES (2, 20, 'y'), (3, 30, 'z')",
    "UPDATE g SET a = a + 5 WHERE id IN (1, 2)",  # v follows a
    "UPDATE g SET b = 'w' WHERE id = 3",  # s follows b
    "DELETE FROM g WHERE id = 2",
)


def _config(work: Path, server: MariaDBServer, database: str, options: str = "") -> Path:
    url = f"{server.url(database)}?heartbeat_s=0.2&server_id=4345"
    return write_config(work, url, [f"{database}.g"], options=options)


def _loaded(server: MariaDBServer, database_of: Callable[[MariaDBServer], str]) -> str:
    database = database_of(server)
    execute(server, database, TABLE, "INSERT INTO g (id, a, b) VALUES (1, 10, 'x')")
    return database


def test_virtual_and_stored_columns_follow_their_inputs_from_full_images(
    mariadb_full: MariaDBServer, mariadb_database: Callable[[MariaDBServer], str], tmp_path: Path
) -> None:
    database = _loaded(mariadb_full, mariadb_database)
    config = _config(tmp_path, mariadb_full, database)
    catch_up(config)
    execute(mariadb_full, database, *CHANGES)
    catch_up(config)
    expected = source_rows(mariadb_full, database, "g", ["id"])
    assert expected[(1,)]["v"] == 30 and expected[(3,)]["s"] == "w!"
    assert lake_rows(tmp_path / "lake", f"{database}.g", ["id"]) == expected


def test_a_virtual_column_is_refused_by_name_under_minimal_images(
    mariadb_minimal: MariaDBServer, mariadb_database: Callable[[MariaDBServer], str], tmp_path: Path
) -> None:
    database = _loaded(mariadb_minimal, mariadb_database)
    run = catch_up(_config(tmp_path, mariadb_minimal, database), expect=2)
    error = run.stderr.strip().splitlines()[-1]
    assert f"table {database}.g: column v (int(11)): VIRTUAL generated" in error, error
    assert "binlog_row_image=FULL" in error and f"ignore_columns: {{{database}.g: [v]}}" in error
    assert not (tmp_path / "lake").exists() or not any((tmp_path / "lake").iterdir())

    # Ignored, the rest of the table replicates; the STORED column follows its input.
    config = _config(tmp_path, mariadb_minimal, database, f"ignore_columns: {{{database}.g: [v]}}")
    catch_up(config)
    execute(mariadb_minimal, database, *CHANGES)
    catch_up(config)
    expected = {
        key: {name: value for name, value in row.items() if name != "v"}
        for key, row in source_rows(mariadb_minimal, database, "g", ["id"]).items()
    }
    assert expected[(3,)]["s"] == "w!"
    assert lake_rows(tmp_path / "lake", f"{database}.g", ["id"]) == expected


def test_a_writer_session_with_minimal_images_stops_the_run_by_name(
    mariadb_full: MariaDBServer, mariadb_database: Callable[[MariaDBServer], str], tmp_path: Path
) -> None:
    database = _loaded(mariadb_full, mariadb_database)
    config = _config(tmp_path, mariadb_full, database)
    catch_up(config)
    with contextlib.closing(mariadb_full.connect(database)) as conn, conn.cursor() as cursor:
        cursor.execute("SET SESSION binlog_row_image = 'MINIMAL'")
        cursor.execute("UPDATE g SET a = 11 WHERE id = 1")
        conn.commit()
    run = catch_up(config, expect=2)
    error = run.stderr.strip().splitlines()[-1]
    assert f"column v of table {database}.g is VIRTUAL generated" in error, error
    assert "does not hold its value" in error and "binlog_row_image=FULL" in error
    assert lake_rows(tmp_path / "lake", f"{database}.g", ["id"])[(1,)]["v"] == 20  # unchanged
