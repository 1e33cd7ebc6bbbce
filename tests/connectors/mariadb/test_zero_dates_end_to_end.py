"""Zero dates end to end: a permissive MariaDB source -> the CDC pipeline (initial snapshot,
then the binlog, FULL and MINIMAL images) -> a lake holding NULL, which validates in sync
with both engines and every reader: Spark through the Python reader and over JDBC, and the
databases themselves against MariaDB and PostgreSQL copies holding NULL. A date that is not
a calendar date fails every validator reader with the same error, naming table, column and
key (``connectors/mariadb/zero_dates.py``)."""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from connectors.mariadb.zero_dates import UnrepresentableDateError
from tests.connectors.mariadb.pipeline_helpers import (
    execute,
    lake_rows,
    mariadb_pipeline,
    source_rows,
)
from tests.private_servers import MariaDBServer, PostgresServer
from validator.config import load_validator_config
from validator.demo.setup import found_differences
from validator.job import validate

pytestmark = [pytest.mark.integration, pytest.mark.mariadb, pytest.mark.postgres, pytest.mark.spark]

PERMISSIVE = ("SET SESSION sql_mode = ''", "SET SESSION time_zone = '+00:00'")
MARIADB_TABLE = (
    "CREATE TABLE ev (id INT PRIMARY KEY, day DATE NOT NULL,"
    " at DATETIME(3) NOT NULL DEFAULT '0000-00-00 00:00:00',"
    " stamp TIMESTAMP(6) NOT NULL DEFAULT '0000-00-00 00:00:00',"
    " maybe DATE NULL DEFAULT '0000-00-00', note VARCHAR(20))"
)
# A copy that replicated zero dates as NULL, as the lake holds them.
MARIADB_COPY = (
    "CREATE TABLE ev (id INT PRIMARY KEY, day DATE NULL, at DATETIME(3) NULL,"
    " stamp TIMESTAMP(6) NULL, maybe DATE NULL, note VARCHAR(20))"
)
POSTGRES_COPY = (
    "CREATE TABLE ev (id int PRIMARY KEY, day date, at timestamp(3), stamp timestamptz(6),"
    " maybe date, note varchar(20))"
)
SNAPSHOT = (
    "INSERT INTO ev VALUES (1, '0000-00-00', '0000-00-00 00:00:00', 0, '0000-00-00', 'a'),"
    " (2, '2024-05-06', '2024-05-06 07:08:09.123', '2024-05-06 07:08:09.5', NULL, 'b'),"
    " (3, '0000-00-00', '2020-01-02 03:04:05', 0, '2021-02-03', 'c')"
)
LOGGED = (
    "INSERT INTO ev (id, day, note) VALUES (4, '0000-00-00', 'd')",  # zero defaults
    # The epoch is a real value, not the zero date.
    "INSERT INTO ev VALUES (5, '1970-01-01', '1970-01-01', '1970-01-01 00:00:01', '1970-01-01',"
    " 'e')",
    "UPDATE ev SET day = '0000-00-00', stamp = 0 WHERE id = 2",
    "UPDATE ev SET note = 'x' WHERE id = 1",
    "DELETE FROM ev WHERE id = 3",
)
EPOCH_DAY = dt.date(1970, 1, 1)
EXPECTED = {
    (1,): (None, None, None, None, "x"),
    (2,): (None, dt.datetime(2024, 5, 6, 7, 8, 9, 123000), None, None, "b"),
    (4,): (None, None, None, None, "d"),
    (5,): (
        EPOCH_DAY,
        dt.datetime(1970, 1, 1),
        dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.UTC),
        EPOCH_DAY,
        "e",
    ),
}
COLUMNS = ("id", "day", "at", "stamp", "maybe", "note")
SECRET = "do-not-show"  # a row value no error may carry


def _expected_rows() -> dict[tuple[Any, ...], dict[str, Any]]:
    return {
        key: dict(zip(COLUMNS, (*key, *values), strict=True)) for key, values in EXPECTED.items()
    }


@dataclass(frozen=True, slots=True)
class Copies:
    """The source and its copies: MariaDB and PostgreSQL databases holding NULL."""

    source: str
    mariadb: str
    postgres: str


def _fill_copies(
    server: MariaDBServer, postgres: PostgresServer, mariadb_copy: str, postgres_copy: str
) -> None:
    rows = [(key[0], *values) for key, values in EXPECTED.items()]
    marks = ", ".join(["%s"] * len(COLUMNS))
    with contextlib.closing(server.connect(mariadb_copy)) as conn, conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
        cur.execute(MARIADB_COPY)
        cur.executemany(f"INSERT INTO ev VALUES ({marks})", rows)
    with contextlib.closing(postgres.connect(postgres_copy)) as conn:
        conn.execute(POSTGRES_COPY)
        with conn.cursor() as cur:
            cur.executemany(f"INSERT INTO ev VALUES ({marks})", rows)


def _config(tmp_path: Path, name: str, copies: Copies, target: str, extra: str = "") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        f"""\
connections:
  src: {{url: "{copies.source}"}}
  maria: {{url: "{copies.mariadb}"}}
  pg: {{url: "{copies.postgres}"}}
  lake: {{lake: "{tmp_path / "lake"}"}}
comparisons:
  - name: zero
    source: {{connection: src, table: ev}}
    target: {target}
{extra}validation: {{recheck_lag_s: 0, lake_wait_timeout_s: 60}}
""",
        encoding="utf-8",
    )
    return path


def _run(spark: Any, path: Path) -> dict[str, Any]:
    document = validate(spark, load_validator_config(path, environ={}))
    comparison: dict[str, Any] = document["comparisons"][0]
    return comparison


def _run_in_spark(
    spark: Any, path: Path, jdbc: bool, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> dict[str, Any]:
    """A Spark comparison whose source is read over JDBC, or as in a session without the
    driver's jar: through the Python reader in the executors."""
    with monkeypatch.context() as patch:
        if not jdbc:
            patch.setattr("validator.engines.sides.spark.sources.jdbc_available", lambda *_: False)
        caplog.clear()
        with caplog.at_level(logging.INFO, "validator.engines.sides.spark.sources"):
            comparison = _run(spark, path)
    assert ("over JDBC" in caplog.text) is jdbc  # the reader this round is meant to use
    return comparison


@pytest.mark.parametrize("image_server", ["mariadb_full", "mariadb_minimal"])
def test_zero_dates_reach_the_lake_as_null_and_every_engine_finds_it_in_sync(
    request: pytest.FixtureRequest,
    image_server: str,
    mariadb_database: Callable[[MariaDBServer], str],
    postgres: PostgresServer,
    postgres_database: Callable[[PostgresServer], str],
    spark: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server: MariaDBServer = request.getfixturevalue(image_server)
    database, copy = mariadb_database(server), mariadb_database(server)
    pg_copy = postgres_database(postgres)
    execute(server, database, *PERMISSIVE, MARIADB_TABLE, SNAPSHOT)
    _fill_copies(server, postgres, copy, pg_copy)  # before the pipeline reaches the log's end
    table = f"{database}.ev"
    with mariadb_pipeline(server, database, ["ev"], tmp_path) as (pipeline, _):
        pipeline.run_until_caught_up()
        execute(server, database, *PERMISSIVE, *LOGGED)
        pipeline.run_until_caught_up()
    assert lake_rows(tmp_path / "lake", table, ["id"]) == _expected_rows()
    assert source_rows(server, database, "ev", ["id"]) == _expected_rows()

    copies = Copies(server.url(database), server.url(copy), postgres.url(pg_copy))
    lake = f"{{connection: lake, table: {table}}}"
    config = _config(tmp_path, "lake", copies, lake, "    engine: spark\n")
    for jdbc in (False, True):
        _assert_in_sync(_run_in_spark(spark, config, jdbc, monkeypatch, caplog), "spark")
    _assert_in_sync(_run(spark, _config(tmp_path, "local", copies, lake)), "local")  # auto
    hybrid = _config(tmp_path, "hybrid", copies, lake, "    engine: hybrid\n")
    _assert_in_sync(_run(spark, hybrid), "hybrid")
    for target in ("maria", "pg"):
        config = _config(
            tmp_path,
            target,
            copies,
            f"{{connection: {target}, table: ev}}",
            "    engine: database\n",
        )
        _assert_in_sync(_run(spark, config), "database")

    # A copy that wrote the epoch for a zero date (as Debezium does in NOT NULL columns) differs.
    with contextlib.closing(postgres.connect(pg_copy)) as conn:
        conn.execute("UPDATE ev SET day = '1970-01-01' WHERE id = 1")
    config = _config(
        tmp_path, "drift", copies, "{connection: pg, table: ev}", "    engine: database\n"
    )
    found = found_differences(validate(spark, load_validator_config(config, environ={})))
    assert found == {("zero", "changed", ("1",))}


def _assert_in_sync(comparison: dict[str, Any], engine: str) -> None:
    assert comparison["error"] is None, comparison["error"]
    assert comparison["engine"] == engine
    assert comparison["status"] == "in_sync", comparison["counts_by_kind"]
    assert comparison["source_rows"] == len(EXPECTED)


@pytest.mark.parametrize(
    ("column", "value"), [("day", "'2024-00-15'"), ("at", "'2024-01-00 10:00:00'")]
)
def test_a_date_that_is_not_a_calendar_date_fails_every_validator_reader_alike(
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    postgres: PostgresServer,
    postgres_database: Callable[[PostgresServer], str],
    spark: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    column: str,
    value: str,
) -> None:
    database, copy = mariadb_database(mariadb_full), mariadb_database(mariadb_full)
    pg_copy = postgres_database(postgres)
    execute(mariadb_full, database, *PERMISSIVE, MARIADB_TABLE, SNAPSHOT)
    _fill_copies(mariadb_full, postgres, copy, pg_copy)
    execute(
        mariadb_full,
        database,
        *PERMISSIVE,
        f"UPDATE ev SET note = '{SECRET}', {column} = {value} WHERE id = 2",
    )
    copies = Copies(mariadb_full.url(database), mariadb_full.url(copy), postgres.url(pg_copy))
    expected = UnrepresentableDateError.of("ev", column, "id=2").message
    maria = "{connection: maria, table: ev}"
    in_spark = _config(tmp_path, "spark", copies, maria, "    engine: spark\n")
    in_databases = _config(tmp_path, "database", copies, maria, "    engine: database\n")
    # The validator's three readers of a MariaDB source: Spark through the Python reader,
    # Spark over JDBC, and the database engine's SQL digests.
    for comparison in (
        _run_in_spark(spark, in_spark, False, monkeypatch, caplog),
        _run_in_spark(spark, in_spark, True, monkeypatch, caplog),
        _run(spark, in_databases),
    ):
        assert comparison["status"] == "error"
        assert expected in comparison["error"], comparison["error"]
        assert SECRET not in comparison["error"]
