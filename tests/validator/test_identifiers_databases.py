"""Awkward table and column names, MariaDB vs PostgreSQL both ways: both engines find the same
drift, and the repair SQL -- the reviewed file run by the target's client, then ``--apply``
-- repairs it (a MariaDB target reflects a backtick in a column name)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cdc_core.names import format_part
from tests.private_servers import MariaDBServer, PostgresServer
from tests.validator.resync.helpers import run_sql_file_mariadb, run_sql_file_postgres
from validator.config import ValidatorConfig, load_validator_config
from validator.demo.setup import found_differences
from validator.job import validate
from validator.resync.run import resync

pytestmark = [pytest.mark.integration, pytest.mark.mariadb, pytest.mark.postgres, pytest.mark.spark]

TABLES = ["order-lines", "my table", "a`b", 'a"b', "v1.2", "select", "MixedCase", "données"]
KEY = "order id"
COLUMNS = ["my col", "q`c", 'd"q', "a.b", "select", "MixedCase", "données", "☃"]
ROWS = range(1, 6)
QUOTED = 'a"b'


def backticks(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def double_quotes(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _values(key: int) -> str:
    return "(" + ", ".join([str(key), *(f"'v{i}-{key}'" for i in range(len(COLUMNS)))]) + ")"


def _statements(quote: Callable[[str], str], table: str) -> list[str]:
    columns = ", ".join(f"{quote(c)} VARCHAR(30)" for c in COLUMNS)
    return [
        f"CREATE TABLE {quote(table)} ({quote(KEY)} INT PRIMARY KEY, {columns})",
        f"INSERT INTO {quote(table)} VALUES {', '.join(_values(k) for k in ROWS)}",
    ]


def _config(tmp_path: Path, source: str, target: str, engine: str) -> ValidatorConfig:
    comparisons = "".join(
        f"  - name: c{index}\n"
        f"    source: {{connection: src, table: {json.dumps(table)}}}\n"
        f"    target: {{connection: dst, table: {json.dumps(table)}}}\n"
        for index, table in enumerate(map(format_part, TABLES))
    )
    path = tmp_path / f"{engine}.yaml"
    path.write_text(
        f"connections:\n  src: {{url: {json.dumps(source)}}}\n"
        f"  dst: {{url: {json.dumps(target)}}}\n"
        f"comparisons:\n{comparisons}"
        f"validation: {{recheck_lag_s: 0, engine: {engine}}}\n",
        encoding="utf-8",
    )
    return load_validator_config(path, environ={})


@dataclass(frozen=True)
class Side:
    """One database of the pair: where it is and how its SQL quotes and runs."""

    url: str
    quote: Callable[[str], str]
    run: Callable[[list[str]], None]
    run_file: Callable[[Path], None]


@pytest.fixture
def sides(
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    postgres: PostgresServer,
    postgres_database: Callable[[PostgresServer], str],
) -> dict[str, Side]:
    maria_db, pg_db = mariadb_database(mariadb_full), postgres_database(postgres)

    def run_mariadb(statements: list[str]) -> None:
        with contextlib.closing(mariadb_full.connect(maria_db)) as conn, conn.cursor() as cur:
            for statement in statements:
                cur.execute(statement)

    def run_postgres(statements: list[str]) -> None:
        with contextlib.closing(postgres.connect(pg_db)) as conn:
            for statement in statements:
                conn.execute(statement)

    found = {
        "mariadb": Side(
            mariadb_full.url(maria_db),
            backticks,
            run_mariadb,
            lambda path: run_sql_file_mariadb(mariadb_full, maria_db, path),
        ),
        "postgres": Side(
            postgres.url(pg_db),
            double_quotes,
            run_postgres,
            lambda path: run_sql_file_postgres(postgres, pg_db, path),
        ),
    }
    for side in found.values():
        side.run([s for table in TABLES for s in _statements(side.quote, table)])
    return found


def _drift(target: Side) -> None:
    q = target.quote
    nulls = ", ".join(["NULL"] * len(COLUMNS))
    target.run(
        [
            f"DELETE FROM {q('a`b')} WHERE {q(KEY)} = 2",
            f"UPDATE {q('v1.2')} SET {q('q`c')} = 'drifted' WHERE {q(KEY)} = 3",
            f"UPDATE {q('MixedCase')} SET {q('☃')} = NULL WHERE {q(KEY)} = 4",
            f"INSERT INTO {q(QUOTED)} VALUES (99, {nulls})",
        ]
    )


EXPECTED = {
    ("c2", "missing_in_target", ("2",)),
    ("c4", "changed", ("3",)),
    ("c6", "changed", ("4",)),
    ("c3", "extra_in_target", ("99",)),
}


@pytest.mark.parametrize(("source", "target"), [("mariadb", "postgres"), ("postgres", "mariadb")])
def test_both_engines_find_the_drift_and_the_repair_sql_fixes_it(
    sides: dict[str, Side], source: str, target: str, tmp_path: Path, spark: Any
) -> None:
    urls = (sides[source].url, sides[target].url)
    by_database = _config(tmp_path, *urls, "database")
    by_spark = _config(tmp_path, *urls, "spark")
    start = validate(spark, by_database)
    assert start["status"] == "in_sync", [c["error"] for c in start["comparisons"]]
    _drift(sides[target])
    first = validate(spark, by_database)
    assert found_differences(first) == EXPECTED
    assert found_differences(validate(spark, by_spark)) == EXPECTED

    proposed = resync(by_database, first, out_dir=tmp_path / "dry")
    files = [Path(c.sql_file or "") for c in proposed.comparisons if c.sql_file]
    assert len(files) == 4
    for path in files:
        sides[target].run_file(path)
    assert validate(spark, by_spark)["status"] == "in_sync"

    _drift(sides[target])
    again = validate(spark, by_spark)
    applied = resync(by_spark, again, apply=True, out_dir=tmp_path / "applied")
    assert applied.exit_code == 0, applied.to_dict()
    assert validate(spark, by_database)["status"] == "in_sync"
