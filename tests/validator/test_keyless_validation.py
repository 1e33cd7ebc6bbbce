"""A table without a key is compared as a multiset of whole rows, by every engine.

A MariaDB table without a key holds equal rows; the pipeline writes them to the lake as
copies (``cdc_core.rebuild.copies``). The lake and the source are in sync; then the source is
changed behind the pipeline's back (``sql_log_bin = 0``): one of three equal rows deleted,
a copy added to a pair, a new row inserted twice. Each engine must count exactly those
copies: one row extra in the lake, three missing from it. The database engine compares the
source with a second MariaDB copy holding the same drift.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc_core.names import format_table
from tests.connectors.mariadb.pipeline_helpers import execute, mariadb_pipeline
from tests.private_servers import MariaDBServer
from validator.config import load_validator_config
from validator.demo.setup import found_differences
from validator.job import validate

pytestmark = [pytest.mark.integration, pytest.mark.mariadb, pytest.mark.spark]

TABLE = "CREATE TABLE k (a INT, b VARCHAR(9), c DECIMAL(6, 2))"
ROWS = (
    "INSERT INTO k VALUES (1, 'x', 0.5), (1, 'x', 0.5), (1, 'x', 0.5), (2, 'y', NULL),"
    " (2, 'y', NULL), (3, NULL, NULL), (4, 'z', 9999.99)"
)
DRIFT = (
    "DELETE FROM k WHERE a = 1 LIMIT 1",  # three copies at the source become two
    "INSERT INTO k VALUES (2, 'y', NULL)",  # two become three
    "INSERT INTO k VALUES (9, 'new', 2), (9, 'new', 2)",  # a new row, twice
)
COUNTS = {"extra_in_target": 1, "missing_in_target": 3}
FOUND = {
    ("k", "extra_in_target", ("1", "x", "0.50")),
    ("k", "missing_in_target", ("2", "y", None)),
    ("k", "missing_in_target", ("9", "new", "2.00")),
}


@pytest.fixture(scope="module")
def lake(
    mariadb_full: MariaDBServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path]]:
    """A database with the table, its lake written by the pipeline (in sync)."""
    work = tmp_path_factory.mktemp("keyless")
    database = f"t_{uuid.uuid4().hex[:12]}"
    execute(mariadb_full, "mysql", f"CREATE DATABASE `{database}`")
    execute(mariadb_full, database, TABLE, ROWS)
    try:
        with mariadb_pipeline(mariadb_full, database, ["k"], work) as (pipeline, _):
            pipeline.run_until_caught_up()
        yield database, work / "lake"
    finally:
        execute(mariadb_full, "mysql", f"DROP DATABASE `{database}`")


def _validate(
    spark: Any, path: Path, source: str, target: tuple[str, str], engine: str
) -> dict[str, Any]:
    """The comparison of table ``k`` of ``source`` with ``target`` (its connection, as
    YAML, and its table), in ``engine``."""
    connection, table = target
    path.write_text(
        "connections:\n"
        f"  src: {{url: {json.dumps(source)}}}\n"
        f"  dst: {connection}\n"
        "comparisons:\n"
        "  - {name: k, source: {connection: src, table: k},"
        f" target: {{connection: dst, table: {json.dumps(table)}}}}}\n"
        # Static tables: no re-check wait for a database target.
        f"validation: {{lake_wait_timeout_s: 60, recheck_lag_s: 0, engine: {engine}}}\n",
        encoding="utf-8",
    )
    (comparison,) = validate(spark, load_validator_config(path, environ={}))["comparisons"]
    assert comparison["error"] is None, comparison["error"]
    return dict(comparison)


def _rows(comparison: dict[str, Any]) -> dict[tuple[str | None, ...], int]:
    """Rows per reported key (a new row inserted twice is one key, two rows)."""
    return {tuple(d["key"]): d.get("rows", 1) for d in comparison["differences"]}


@pytest.mark.parametrize("engine", ["spark", "hybrid", "local"])
def test_a_table_without_a_key_compares_its_copies_against_the_lake(
    spark: Any,
    mariadb_full: MariaDBServer,
    lake: tuple[str, Path],
    tmp_path: Path,
    engine: str,
) -> None:
    database, path = lake
    target = (f"{{lake: {json.dumps(str(path))}}}", format_table(database, "k"))
    source = mariadb_full.url(database)
    in_sync = _validate(spark, tmp_path / "before.yaml", source, target, engine)
    assert (in_sync["status"], in_sync["source_rows"], in_sync["target_rows"]) == (
        "in_sync",
        7,
        7,
    )
    execute(mariadb_full, database, "SET sql_log_bin = 0", *DRIFT, "SET sql_log_bin = 1")
    try:
        drifted = _validate(spark, tmp_path / "after.yaml", source, target, engine)
    finally:
        execute(mariadb_full, database, "SET sql_log_bin = 0", "DELETE FROM k", ROWS)
    assert drifted["status"] == "differences"
    assert drifted["counts_by_kind"] == COUNTS
    assert found_differences({"comparisons": [drifted]}) == FOUND
    assert _rows(drifted)[("9", "new", "2.00")] == 2


def test_a_table_without_a_key_compares_its_copies_in_the_databases(
    spark: Any,
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    tmp_path: Path,
) -> None:
    source, copy = mariadb_database(mariadb_full), mariadb_database(mariadb_full)
    execute(mariadb_full, source, TABLE, ROWS, *DRIFT)
    execute(mariadb_full, copy, TABLE, ROWS)
    target = (f"{{url: {json.dumps(mariadb_full.url(copy))}}}", "k")
    found = _validate(spark, tmp_path / "db.yaml", mariadb_full.url(source), target, "database")
    assert found["engine"] == "database" and found["status"] == "differences"
    assert found["counts_by_kind"] == COUNTS, json.dumps(found, default=str)
    assert found_differences({"comparisons": [found]}) == FOUND
    assert _rows(found)[("9", "new", "2.00")] == 2
