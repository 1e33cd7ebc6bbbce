"""The cross-database type matrix, computed by the databases (the database engine).

The same tables as ``test_type_matrix.py`` (every case's logical values in each product's
native types, the replica carrying one one-unit change per case), compared with
``engine: database`` between MariaDB and PostgreSQL in every direction and within each
product. Cases the digest SQL refuses (``Case.not_in_sql``: JSON has no exact SQL form in
either product) are excluded here (the Spark matrix covers them), as are cases one side
does not store; every other case must show no false difference and its change.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.private_servers import MariaDBServer, PostgresServer
from tests.validator.type_matrix.test_type_matrix import (
    _mariadb_value,
    cases_in,
    changed_cells,
    columns_section,
    compared_cases,
    fill_mariadb,
    fill_postgres,
    matrix_database,
)
from tests.validator.type_matrix.type_matrix import ROWS, change_rows, logical_rows
from validator.config import load_validator_config
from validator.engines.sides.spark.session import LazySparkSession
from validator.job import validate

pytestmark = [pytest.mark.integration, pytest.mark.mariadb, pytest.mark.postgres]

PAIRS = (
    ("mariadb", "postgres"),
    ("postgres", "mariadb"),
    ("mariadb", "mariadb"),
    ("postgres", "postgres"),
)
Pair = tuple[str, str]


def fill_mariadb_replica(server: MariaDBServer, database: str) -> None:
    """MariaDB's own ``replica`` table (the Spark matrix has MariaDB only as the source)."""
    cases = cases_in("mariadb")
    columns = ", ".join(f"`{c.name}` {c.mariadb}" for c in cases)
    rows = [
        (row["id"], *[_mariadb_value(row[c.name]) for c in cases])
        for row in logical_rows(replica=True)
    ]
    marks = ", ".join(["%s"] * (len(cases) + 1))
    with contextlib.closing(server.connect(database)) as conn, conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
        cur.execute(
            f"CREATE TABLE replica (id INT PRIMARY KEY, {columns}) DEFAULT CHARSET=utf8mb4"
            " COLLATE=utf8mb4_bin"
        )
        cur.executemany(f"INSERT INTO replica VALUES ({marks})", rows)


def name_of(pair: Pair) -> str:
    return f"{pair[0]}_vs_{pair[1]}"


def write_config(path: Path, urls: dict[str, str]) -> Path:
    lines = ["connections:"]
    lines += [f'  {name}: {{url: "{url}"}}' for name, url in urls.items()]
    lines.append("comparisons:")
    for source, target in PAIRS:
        lines += [
            f"  - name: {name_of((source, target))}",
            f"    source: {{connection: {source}, table: matrix}}",
            f"    target: {{connection: {target}, table: replica}}",
            columns_section((source, target), sql=True),
            "    options: {trim_char: true}",
            "    engine: database",
        ]
    lines.append("validation: {recheck_lag_s: 0}")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def results(
    mariadb_full: MariaDBServer,
    postgres: PostgresServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, dict[str, Any]]]:
    """Every pair's result, by comparison name, from one ``validate`` call without Spark."""
    workdir = tmp_path_factory.mktemp("type_matrix_databases")
    with matrix_database(mariadb_full, postgres) as database:
        fill_mariadb(mariadb_full, database)
        fill_mariadb_replica(mariadb_full, database)
        fill_postgres(postgres, database)
        urls = {"mariadb": mariadb_full.url(database), "postgres": postgres.url(database)}
        config = write_config(workdir / "replcheck.yaml", urls)
        lazy = LazySparkSession()
        document = validate(lazy, load_validator_config(config, environ={}))
        assert not lazy.started
        yield {c["name"]: c for c in document["comparisons"]}


def compared_names(pair: Pair) -> list[str]:
    """The cases both sides store and their digest SQL hashes."""
    return [c.name for c in compared_cases(pair, sql=True)]


def _case_params() -> list[Any]:
    return [
        pytest.param(pair, column, id=f"{name_of(pair)}-{column}")
        for pair in PAIRS
        for column in compared_names(pair)
    ]


@pytest.mark.parametrize("pair", PAIRS, ids=name_of)
def test_exactly_the_changed_values_are_reported(
    results: dict[str, dict[str, Any]], pair: Pair
) -> None:
    comparison = results[name_of(pair)]
    assert comparison["error"] is None, comparison["error"]
    assert comparison["engine"] == "database"
    assert comparison["schema_differences"] == []
    assert comparison["source_rows"] == comparison["target_rows"] == 2 * ROWS
    compared = compared_names(pair)
    expected = {
        (str(ROWS + row), column) for column, row in change_rows().items() if column in compared
    }
    assert changed_cells(comparison) == expected


@pytest.mark.parametrize(("pair", "column"), _case_params())
def test_every_case_is_compared_and_its_change_found(
    results: dict[str, dict[str, Any]], pair: Pair, column: str
) -> None:
    comparison = results[name_of(pair)]
    changed_row = str(ROWS + change_rows()[column])
    assert {key for key, name in changed_cells(comparison) if name == column} == {changed_row}
