"""Each product's declared timestamp rounding rule is what the product really stores.

Values with more fractional digits than a column keeps are written to DuckDB, PostgreSQL
and MariaDB columns of precision 3 and 0 and read back; the stored instant must be exactly
``merkle.canonical.reduce_micros`` of the value under the rule the product's connector
declares. The values straddle 1970 and 2000 (the two epochs products count from) and
include exact halves, where the rules disagree.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator

import duckdb
import pytest

from connectors.duckdb.types import TIMESTAMP_ROUNDING as DUCKDB_ROUNDING
from connectors.mariadb.connector import MariaDBConnector
from connectors.mariadb.types import timestamp_rounding as mariadb_rounding
from connectors.postgres.types import TIMESTAMP_ROUNDING as POSTGRES_ROUNDING
from merkle.canonical import EPOCH, reduce_micros, rounding_epoch
from merkle.options import TimeRounding
from merkle.types import TimestampType
from tests.private_servers import MariaDBServer, PostgresServer

BASES = (
    dt.datetime(1960, 5, 5, 10, 10, 10),
    dt.datetime(1969, 12, 31, 23, 59, 59),
    dt.datetime(1970, 1, 1),
    dt.datetime(1985, 1, 1),
    dt.datetime(1999, 12, 31, 23, 59, 59),
    dt.datetime(2000, 1, 1),
    dt.datetime(2025, 3, 1, 12),
)
FRACTIONS = (0, 499, 500, 501, 1500, 2500, 123456, 499999, 500000, 500001, 999500, 999999)
VALUES = tuple(base + dt.timedelta(microseconds=f) for base in BASES for f in FRACTIONS)
PRECISIONS = (3, 0)


def micros(value: dt.datetime) -> int:
    return (value - EPOCH) // dt.timedelta(microseconds=1)


def expected(rule: TimeRounding, digits: int) -> list[int]:
    epoch = rounding_epoch(rule, TimestampType())
    return [reduce_micros(micros(value), digits, rule, epoch) for value in VALUES]


def test_the_values_tell_the_rules_apart() -> None:
    """Without values where the rules differ, the tests below could not fail."""
    outcomes = {tuple(expected(rule, 3)) for rule in TimeRounding}
    assert len(outcomes) == len(TimeRounding)


@pytest.mark.parametrize("digits", PRECISIONS)
def test_duckdb_rounds_as_declared(digits: int) -> None:
    column = {3: "TIMESTAMP_MS", 0: "TIMESTAMP_S"}[digits]
    with duckdb.connect() as conn:
        conn.execute(f"CREATE TABLE t (id INTEGER, x {column})")
        conn.executemany("INSERT INTO t VALUES (?, ?)", list(enumerate(VALUES)))
        rows = conn.execute("SELECT CAST(x AS TIMESTAMP) FROM t ORDER BY id").fetchall()
    assert [micros(row[0]) for row in rows] == expected(DUCKDB_ROUNDING, digits)


@pytest.mark.postgres
@pytest.mark.integration
@pytest.mark.parametrize("digits", PRECISIONS)
@pytest.mark.parametrize("zone", ["", " with time zone"])
def test_postgres_rounds_as_declared(postgres: PostgresServer, digits: int, zone: str) -> None:
    with contextlib.closing(postgres.connect("postgres")) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        conn.execute(f"CREATE TEMP TABLE t (id integer, x timestamp({digits}){zone})")
        with conn.cursor() as cur:
            rows = [(i, v.replace(tzinfo=dt.UTC) if zone else v) for i, v in enumerate(VALUES)]
            cur.executemany("INSERT INTO t VALUES (%s, %s)", rows)
        stored = conn.execute("SELECT x FROM t ORDER BY id").fetchall()
    naive = [row[0].replace(tzinfo=None) for row in stored]
    assert [micros(value) for value in naive] == expected(POSTGRES_ROUNDING, digits)


@contextlib.contextmanager
def mariadb_table(server: MariaDBServer, sql_mode: str, digits: int) -> Iterator[list[int]]:
    """The values stored in a DATETIME(digits) column by a session in ``sql_mode``."""
    with contextlib.closing(server.connect("mysql")) as conn, conn.cursor() as cur:
        cur.execute("CREATE TEMPORARY TABLE t (id INT, x DATETIME(%s))", (digits,))
        cur.execute("SET SESSION sql_mode = %s", (sql_mode,))
        cur.executemany("INSERT INTO t VALUES (%s, %s)", list(enumerate(VALUES)))
        cur.execute("SELECT x FROM t ORDER BY id")
        yield [micros(row[0]) for row in cur.fetchall()]


@pytest.mark.mariadb
@pytest.mark.integration
@pytest.mark.parametrize("digits", PRECISIONS)
@pytest.mark.parametrize("sql_mode", ["STRICT_TRANS_TABLES", "TIME_ROUND_FRACTIONAL"])
def test_mariadb_rounds_as_its_sql_mode_says(
    mariadb_full: MariaDBServer, digits: int, sql_mode: str
) -> None:
    with mariadb_table(mariadb_full, sql_mode, digits) as stored:
        assert stored == expected(mariadb_rounding(sql_mode), digits)


@pytest.mark.mariadb
@pytest.mark.integration
def test_mariadb_connector_reads_the_rule_from_the_global_sql_mode(
    mariadb_full: MariaDBServer,
) -> None:
    connector = MariaDBConnector(mariadb_full.url("mysql"))
    assert connector.timestamp_rounding() is TimeRounding.TRUNCATE  # the server's default
    assert mariadb_rounding("STRICT_TRANS_TABLES,time_round_fractional") is TimeRounding.ROUND
