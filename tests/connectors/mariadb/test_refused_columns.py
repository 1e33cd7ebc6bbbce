"""Columns the pipeline cannot carry exactly are refused by name before anything is written
(issue 36, "never drop in silence"), and ``ignore_columns`` lets a pipeline replicate the
rest of such a table, which ``validate`` then reports unless ``columns.exclude`` names them.

On the real MariaDB server (MINIMAL row images, so the rebuild fills the carried columns):
an ``INET6`` and a ``POINT`` column (no logical type) and a ``DECIMAL(65,30)`` column (more
digits than the lake's decimals hold)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli_runs import catch_up, write_config
from tests.connectors.mariadb.pipeline_helpers import execute, lake_rows, validated
from tests.private_servers import MariaDBServer

pytestmark = [pytest.mark.integration, pytest.mark.mariadb]

REFUSED = {"ip": "inet6", "spot": "point", "wide": "decimal(65,30)"}
TABLE = (
    "CREATE TABLE t (id INT PRIMARY KEY, ip INET6, spot POINT, wide DECIMAL(65,30), v VARCHAR(10))"
)
ROWS = (
    "INSERT INTO t VALUES (1, '::1', ST_GeomFromText('POINT(1 2)'), 1.5, 'a'),"
    " (2, NULL, NULL, NULL, 'b')"
)


def _config(work: Path, server: MariaDBServer, database: str, options: str = "") -> Path:
    url = f"{server.url(database)}?heartbeat_s=0.2&server_id=4343"
    return write_config(work, url, [f"{database}.t"], options=options)


@pytest.fixture
def source(
    mariadb_minimal: MariaDBServer, mariadb_database: Callable[[MariaDBServer], str]
) -> tuple[MariaDBServer, str]:
    database = mariadb_database(mariadb_minimal)
    execute(mariadb_minimal, database, TABLE, ROWS)
    return mariadb_minimal, database


def test_columns_the_pipeline_cannot_carry_are_refused_by_name(
    source: tuple[MariaDBServer, str], tmp_path: Path
) -> None:
    server, database = source
    run = catch_up(_config(tmp_path, server, database), expect=2)
    error = run.stderr.strip().splitlines()[-1]
    assert f"table {database}.t: columns ip (inet6), spot (point): no logical type" in error
    assert "column wide (decimal(65,30)): more than 38 digits" in error, error
    assert f"ignore_columns: {{{database}.t: [ip, spot, wide]}}" in error, error
    assert "replcheck bug" not in run.stderr
    assert not (tmp_path / "lake").exists() or not any((tmp_path / "lake").iterdir())


def test_ignored_columns_let_the_rest_of_the_table_replicate(
    source: tuple[MariaDBServer, str], tmp_path: Path
) -> None:
    server, database = source
    ignored = f"ignore_columns: {{{database}.t: [ip, spot, wide]}}"
    config = _config(tmp_path, server, database, ignored)
    first = catch_up(config)
    assert "WARNING" not in first.stderr  # ignored on purpose: nothing to warn about
    assert lake_rows(tmp_path / "lake", f"{database}.t", ["id"]) == {
        (1,): {"id": 1, "v": "a"},
        (2,): {"id": 2, "v": "b"},
    }
    execute(
        server,
        database,
        "INSERT INTO t VALUES (3, '::2', ST_GeomFromText('POINT(3 4)'), 2.25, 'c')",
        "UPDATE t SET wide = 7, v = 'bb' WHERE id = 2",
        "UPDATE t SET ip = '::3' WHERE id = 1",  # only an ignored column changes
        "DELETE FROM t WHERE id = 3",
        "INSERT INTO t (id, ip, v) VALUES (4, '::4', 'd')",
    )
    catch_up(config)
    assert lake_rows(tmp_path / "lake", f"{database}.t", ["id"]) == {
        (1,): {"id": 1, "v": "a"},
        (2,): {"id": 2, "v": "bb"},
        (4,): {"id": 4, "v": "d"},
    }

    # The validator compares every source column: the ignored ones are missing in the lake
    # until the comparison excludes them too.
    missing = validated(config, tmp_path, f"{database}.t")
    assert missing["status"] == "differences"
    differences = missing["comparisons"][0]["schema_differences"]
    assert sorted((d["column"], d["kind"]) for d in differences) == [
        (column, "missing_in_target") for column in sorted(REFUSED)
    ]
    assert validated(config, tmp_path, f"{database}.t", sorted(REFUSED))["status"] == "in_sync"


def test_a_column_added_later_is_refused_by_name_too(
    mariadb_minimal: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    tmp_path: Path,
) -> None:
    """An ``ALTER TABLE`` in the binlog gives a captured table an ``INET6`` column: the run
    stops naming it (never a warning), and resumes once it is ignored."""
    server = mariadb_minimal
    database = mariadb_database(server)
    execute(server, database, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))")
    execute(server, database, "INSERT INTO t VALUES (1, 'a')")
    config = _config(tmp_path, server, database)
    catch_up(config)
    execute(
        server,
        database,
        "ALTER TABLE t ADD COLUMN ip INET6",
        "INSERT INTO t VALUES (2, 'b', '::2')",
    )
    stopped = catch_up(config, expect=2)
    error = stopped.stderr.strip().splitlines()[-1]
    assert f"table {database}.t: column ip (inet6): no logical type" in error, error
    assert f"ignore_columns: {{{database}.t: [ip]}}" in error, error
    catch_up(_config(tmp_path, server, database, f"ignore_columns: {{{database}.t: [ip]}}"))
    assert lake_rows(tmp_path / "lake", f"{database}.t", ["id"]) == {
        (1,): {"id": 1, "v": "a"},
        (2,): {"id": 2, "v": "b"},
    }
