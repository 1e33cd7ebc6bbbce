"""Awkward table and column names, MariaDB vs PostgreSQL: both engines find the same drift,
and the repair SQL -- the reviewed file run by psql, then ``--apply`` -- repairs it."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.private_servers import MariaDBServer, PostgresServer
from tests.validator.resync_helpers import run_sql_file_postgres
from validator.config import ValidatorConfig, load_validator_config
from validator.demo import found_differences
from validator.job import validate
from validator.resync import resync

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
        f"    target: {{connection: pg, table: {json.dumps(table)}}}\n"
        for index, table in enumerate(['"v1.2"' if t == "v1.2" else t for t in TABLES])
    )
    path = tmp_path / f"{engine}.yaml"
    path.write_text(
        f"connections:\n  src: {{url: {json.dumps(source)}}}\n  pg: {{url: {json.dumps(target)}}}\n"
        f"comparisons:\n{comparisons}"
        f"validation: {{recheck_lag_s: 0, engine: {engine}}}\n",
        encoding="utf-8",
    )
    return load_validator_config(path, environ={})


@pytest.fixture
def pair(
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    postgres: PostgresServer,
    postgres_database: Callable[[PostgresServer], str],
) -> tuple[MariaDBServer, str, PostgresServer, str]:
    source_db, target_db = mariadb_database(mariadb_full), postgres_database(postgres)
    with contextlib.closing(mariadb_full.connect(source_db)) as conn, conn.cursor() as cur:
        for table in TABLES:
            for statement in _statements(backticks, table):
                cur.execute(statement)
    with contextlib.closing(postgres.connect(target_db)) as conn:
        for table in TABLES:
            for statement in _statements(double_quotes, table):
                conn.execute(statement)
    return mariadb_full, source_db, postgres, target_db


def _drift(server: PostgresServer, database: str) -> None:
    q = double_quotes
    with contextlib.closing(server.connect(database)) as conn:
        conn.execute(f"DELETE FROM {q('a`b')} WHERE {q(KEY)} = 2")
        conn.execute(f"UPDATE {q('v1.2')} SET {q('q`c')} = 'drifted' WHERE {q(KEY)} = 3")
        conn.execute(f"UPDATE {q('MixedCase')} SET {q('☃')} = NULL WHERE {q(KEY)} = 4")
        nulls = ", ".join(["NULL"] * len(COLUMNS))
        conn.execute(f"INSERT INTO {q(QUOTED)} VALUES (99, {nulls})")


EXPECTED = {
    ("c2", "missing_in_target", ("2",)),
    ("c4", "changed", ("3",)),
    ("c6", "changed", ("4",)),
    ("c3", "extra_in_target", ("99",)),
}


def test_both_engines_find_the_drift_and_the_repair_sql_fixes_it(
    pair: tuple[MariaDBServer, str, PostgresServer, str], tmp_path: Path, spark: Any
) -> None:
    source, source_db, target, target_db = pair
    urls = (source.url(source_db), target.url(target_db))
    by_database = _config(tmp_path, *urls, "database")
    by_spark = _config(tmp_path, *urls, "spark")
    assert validate(spark, by_database)["status"] == "in_sync"
    _drift(target, target_db)
    first = validate(spark, by_database)
    assert found_differences(first) == EXPECTED
    assert found_differences(validate(spark, by_spark)) == EXPECTED

    proposed = resync(by_database, first, out_dir=tmp_path / "dry")
    files = [Path(c.sql_file or "") for c in proposed.comparisons if c.sql_file]
    assert len(files) == 4
    for path in files:
        run_sql_file_postgres(target, target_db, path)
    assert validate(spark, by_spark)["status"] == "in_sync"

    _drift(target, target_db)
    again = validate(spark, by_spark)
    applied = resync(by_spark, again, apply=True, out_dir=tmp_path / "applied")
    assert applied.exit_code == 0, applied.to_dict()
    assert validate(spark, by_database)["status"] == "in_sync"
