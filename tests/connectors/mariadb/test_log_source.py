"""MariaDB as a pipeline source: URL parameters, table patterns, and columns a MINIMAL image
leaves out completed exactly (constant defaults, the source row as fallback, added columns)."""

from __future__ import annotations

import datetime as dt
import decimal
import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from cdc_core.errors import ConfigError
from cdc_core.lake.layout import read_marks_of
from connectors.mariadb.log_source import resolve_tables, source_config
from connectors.mariadb.missing_columns import NOT_CONSTANT, constant_default
from tests.connectors.mariadb.pipeline_helpers import (
    changelog,
    execute,
    lake_rows,
    mariadb_pipeline,
    source_rows,
)
from tests.private_servers import MariaDBServer

URL = "mysql+pymysql://repl@127.0.0.1:3306/shop"


def test_url_parameters_set_the_reader() -> None:
    config = source_config(f"{URL}?server_id=901&heartbeat_s=0.5&key.audit=id,%20at", "pw", ["t"])
    assert (config.server_id, config.heartbeat_s) == (901, 0.5)
    assert config.keys == {"audit": ("id", "at")}
    assert config.url == URL  # the query is the reader's, not the driver's
    assert config.password is not None and config.password.reveal() == "pw"
    assert source_config(URL, None, ["t"]).server_id == 0x5EC0


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("charset=utf8", "'charset' is unknown"),
        ("server_id=x", "server_id='x' is not a int"),
        ("key.t=", "must name columns"),
        ("heartbeat_s=0", "heartbeat_s must be positive"),
    ],
)
def test_bad_url_parameters_are_errors_naming_them(query: str, named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        source_config(f"{URL}?{query}", None, ["t"])


def test_table_patterns_resolve_against_the_source_tables() -> None:
    existing = ["shop.orders", "shop.order_lines", "shop.users", "crm.orders"]
    assert resolve_tables(["order*", "users"], existing, "shop") == [
        "shop.orders",
        "shop.order_lines",
        "shop.users",
    ]
    assert resolve_tables(["*.orders", "shop.gone"], existing, "shop") == [
        "shop.orders",
        "crm.orders",
        "shop.gone",  # a plain name stays: describing it fails with the table's name
    ]
    assert resolve_tables([], existing, "shop") == existing


@pytest.mark.parametrize(
    ("default", "column_type", "value"),
    [
        ("5", "int(11)", 5),
        ("-3", "bigint(20)", -3),
        ("18446744073709551615", "bigint(20) unsigned", decimal.Decimal(2**64 - 1)),
        ("1.50", "decimal(10,2)", decimal.Decimal("1.50")),
        ("0.1", "float", 0.10000000149011612),
        ("0.1", "double", 0.1),
        ("'it''s \\\\ \\n'", "varchar(20)", "it's \\ \n"),
        ("'ab  '", "char(4)", "ab"),
        ("'ab\\0'", "binary(4)", b"ab\0\0"),
        ("'2024-02-29'", "date", dt.date(2024, 2, 29)),
        ("'0000-00-00'", "date", None),
        (
            "'2024-02-29 10:11:12.500000'",
            "datetime(6)",
            dt.datetime(2024, 2, 29, 10, 11, 12, 500000),
        ),
        ("'-01:02:03.5'", "time(1)", -3_723_500_000),
        ("2024", "year(4)", 2024),
        ("b'101'", "bit(3)", 5),
        ("b'1'", "bit(1)", True),
        ("'b'", "enum('a','b')", "b"),
        ("NULL", "int(11)", None),
        ("'2024-01-01 00:00:00'", "timestamp", NOT_CONSTANT),
        ("current_timestamp()", "datetime", NOT_CONSTANT),
        ("uuid()", "varchar(40)", NOT_CONSTANT),
        (None, "int(11)", NOT_CONSTANT),
    ],
)
def test_constant_defaults_read_as_the_binlog_decodes_them(
    default: str | None, column_type: str, value: object
) -> None:
    assert constant_default(default, column_type, generated=False) == value


def test_a_generated_column_has_no_constant_default() -> None:
    assert constant_default("5", "int(11)", generated=True) is NOT_CONSTANT


DEFAULTS_TABLE = """CREATE TABLE d (
  id INT PRIMARY KEY, name VARCHAR(20), qty INT DEFAULT 5, big BIGINT UNSIGNED DEFAULT 7,
  price DECIMAL(10,2) DEFAULT 1.5, f FLOAT DEFAULT 0.1, g DOUBLE DEFAULT -2.25,
  s VARCHAR(20) DEFAULT 'it''s \\\\ here', c CHAR(4) DEFAULT 'ab', bn BINARY(3) DEFAULT 'ab',
  day DATE DEFAULT '2024-02-29', at DATETIME(3) DEFAULT '2024-01-02 03:04:05.678',
  dur TIME(2) DEFAULT '-12:00:00.25', yr YEAR DEFAULT 2024, b3 BIT(3) DEFAULT b'101',
  b1 BIT(1) DEFAULT b'1', e ENUM('x','y') DEFAULT 'y', st SET('a','b','c') DEFAULT 'a,c',
  n INT DEFAULT NULL, created DATETIME(6) DEFAULT CURRENT_TIMESTAMP(6)
)"""


@pytest.mark.integration
@pytest.mark.mariadb
def test_minimal_inserts_are_completed_from_constant_defaults(
    mariadb_minimal: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    database = mariadb_database(mariadb_minimal)
    execute(mariadb_minimal, database, DEFAULTS_TABLE)
    with mariadb_pipeline(mariadb_minimal, database, ["d"], tmp_path) as (pipeline, _):
        pipeline.run_until_caught_up()  # loads the empty table; the inserts come by the log
        execute(mariadb_minimal, database, "INSERT INTO d (id) VALUES (1), (2)")
        execute(mariadb_minimal, database, "INSERT INTO d (id, name, qty) VALUES (3, 'c', 9)")
        with caplog.at_level(logging.INFO, "connectors.mariadb.missing_columns"):
            pipeline.run_until_caught_up()
    table = f"{database}.d"
    assert lake_rows(tmp_path / "lake", table, ["id"]) == source_rows(
        mariadb_minimal, database, "d", ["id"]
    )
    assert "read a row by key" not in caplog.text  # every omitted column had a constant


@pytest.mark.integration
@pytest.mark.mariadb
def test_other_omitted_columns_are_read_from_the_source_row(
    mariadb_minimal: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    database = mariadb_database(mariadb_minimal)
    # A TIMESTAMP literal is read in the inserting session's zone: no constant value.
    execute(
        mariadb_minimal,
        database,
        "CREATE TABLE ts (id INT PRIMARY KEY, at TIMESTAMP NULL DEFAULT '2024-01-01 12:00:00')",
    )
    with mariadb_pipeline(mariadb_minimal, database, ["ts"], tmp_path) as (pipeline, _):
        pipeline.run_until_caught_up()
        execute(
            mariadb_minimal, database, "SET time_zone = '+05:00'", "INSERT INTO ts (id) VALUES (1)"
        )
        with caplog.at_level(logging.INFO, "connectors.mariadb.missing_columns"):
            pipeline.run_until_caught_up()
    rows = lake_rows(tmp_path / "lake", f"{database}.ts", ["id"])
    assert rows == source_rows(mariadb_minimal, database, "ts", ["id"])
    assert "read a row by key" in caplog.text


@pytest.mark.integration
@pytest.mark.mariadb
def test_rows_stored_before_add_column_take_its_default(
    mariadb_minimal: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    tmp_path: Path,
) -> None:
    """Rows the log never touches after ``ADD COLUMN ... DEFAULT`` hold the default at the
    source; the table refresh that follows the DDL writes it into the lake too."""
    database = mariadb_database(mariadb_minimal)
    execute(mariadb_minimal, database, "CREATE TABLE a (id INT PRIMARY KEY, v INT)")
    with mariadb_pipeline(mariadb_minimal, database, ["a"], tmp_path) as (pipeline, _):
        pipeline.run_until_caught_up()
        execute(mariadb_minimal, database, "INSERT INTO a VALUES (1, 10), (2, 20), (3, 30)")
        pipeline.run_until_caught_up()  # the images of rows 1-3 are stored without z
        execute(
            mariadb_minimal,
            database,
            "ALTER TABLE a ADD COLUMN z VARCHAR(5) DEFAULT 'zz'",
            "UPDATE a SET v = 11 WHERE id = 1",
            "DELETE FROM a WHERE id = 2",
            "INSERT INTO a (id, v) VALUES (4, 40)",
        )
        pipeline.run_until_caught_up()
    table = f"{database}.a"
    rows = lake_rows(tmp_path / "lake", table, ["id"])
    source = source_rows(mariadb_minimal, database, "a", ["id"])
    assert rows == source
    assert rows[(3,)] == {"id": 3, "v": 30, "z": "zz"}  # untouched by the log since the DDL
    deleted = [e for e in changelog(tmp_path / "lake", table) if e["_op"] == "d"]
    assert [(e["id"], e["v"]) for e in deleted] == [(2, 20)]


@pytest.mark.integration
@pytest.mark.mariadb
@pytest.mark.parametrize(
    ("table", "after_insert"),
    [
        # The omitted column's TIMESTAMP literal default is read from the row: gone since.
        (
            "CREATE TABLE g (id INT PRIMARY KEY, at TIMESTAMP NULL DEFAULT '2024-01-01 00:00:00')",
            ["DELETE FROM g WHERE id = 7"],
        ),
        # ... or moved to another key (soak seed 2016 of mariadb-minimal), and the key reused
        # by a row whose value the read would otherwise give the first row.
        (
            "CREATE TABLE g (id INT PRIMARY KEY, at TIMESTAMP NULL DEFAULT '2024-01-01 00:00:00')",
            ["UPDATE g SET id = id + 1", "INSERT INTO g VALUES (7, '2020-02-02 00:00:00')"],
        ),
        # ... or still there, but changed since.
        (
            "CREATE TABLE g (id INT PRIMARY KEY, at TIMESTAMP NULL DEFAULT '2024-01-01 00:00:00')",
            ["UPDATE g SET at = '2021-01-01 00:00:00' WHERE id = 7"],
        ),
        # A constant default, but the column is renamed before the insert is read (seed 2008).
        (
            "CREATE TABLE g (id INT PRIMARY KEY, c INT DEFAULT 5)",
            ["ALTER TABLE g RENAME COLUMN c TO d", "INSERT INTO g (id) VALUES (9)"],
        ),
    ],
    ids=["row-deleted", "row-moved", "row-changed", "column-renamed"],
)
def test_omitted_columns_the_source_can_no_longer_show_refresh_the_table(
    mariadb_minimal: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    tmp_path: Path,
    table: str,
    after_insert: list[str],
) -> None:
    """Nothing can tell the value a MINIMAL insert left out once its row or column is gone:
    the pipeline refreshes the table from the insert on, so the lake equals the source and
    the placeholder is never taken as exact (never a stop, never a guess left standing).
    The same when the row read later than the insert has changed since."""
    database = mariadb_database(mariadb_minimal)
    execute(mariadb_minimal, database, table, "INSERT INTO g (id) VALUES (1)")
    with mariadb_pipeline(mariadb_minimal, database, ["g"], tmp_path) as (pipeline, _):
        pipeline.run_until_caught_up()
        execute(mariadb_minimal, database, "INSERT INTO g (id) VALUES (7)", *after_insert)
        pipeline.run_until_caught_up()
    source = source_rows(mariadb_minimal, database, "g", ["id"])
    rows = lake_rows(tmp_path / "lake", f"{database}.g", ["id"])
    # A renamed column's old name stays in the lake, NULL from the rename on (README).
    assert {k: {c: row[c] for c in source[k]} for k, row in rows.items()} == source
    assert {v for row in rows.values() for c, v in row.items() if c not in ("id", "at", "d")} <= {
        None
    }
    marks = read_marks_of(tmp_path / "lake", "mariadb-test")
    assert not marks.refreshing
    assert f"{database}.g" in marks.stale  # the placeholder's window is marked inexact
