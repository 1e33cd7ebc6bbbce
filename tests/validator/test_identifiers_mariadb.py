"""Awkward table and column names, MariaDB -> lake: captured (snapshot, binlog, DDL),
validated in sync, a drifted lake row found and re-synced.

Names are the ones issue 14 lists: hyphen, space, backtick, double quote, dot, reserved
word, mixed case, non-ASCII, ``$``/``#``. MariaDB takes only the Basic Multilingual Plane in
identifiers (https://mariadb.com/kb/en/identifier-names/), so its "emoji" column is ☃.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cdc_core.lake.layout import LakeTable
from cdc_core.names import format_part, format_table
from tests.connectors.mariadb.pipeline_helpers import (
    execute,
    lake_rows,
    mariadb_pipeline,
    source_rows,
)
from tests.private_servers import MariaDBServer
from validator.config import ValidatorConfig, load_validator_config
from validator.demo.drift import change_mirror
from validator.demo.setup import found_differences
from validator.job import validate
from validator.resync.run import resync

pytestmark = [pytest.mark.integration, pytest.mark.mariadb, pytest.mark.spark]

TABLES = ["order-lines", "my table", "a`b", 'a"b', "v1.2", "select", "MixedCase", "données", "$x#y"]
KEY = "order id"
COLUMNS = ["my col", "q`c", 'd"q', "a.b", "select", "MixedCase", "données", "☃"]
ADDED = "new#col -- x"  # added by ALTER TABLE while the pipeline runs


def q(name: str) -> str:
    """A MariaDB quoted identifier."""
    return "`" + name.replace("`", "``") + "`"


def _row(key: int, tag: str) -> str:
    values = ", ".join(f"'{tag}-{index}-{key}'" for index in range(len(COLUMNS)))
    return f"({key}, {values})"


def _create(server: MariaDBServer, database: str) -> None:
    columns = ", ".join(f"{q(c)} VARCHAR(30)" for c in COLUMNS)
    for table in TABLES:
        execute(
            server,
            database,
            f"CREATE TABLE {q(table)} ({q(KEY)} INT PRIMARY KEY, {columns})",
            f"INSERT INTO {q(table)} VALUES {_row(1, 'a')}, {_row(2, 'a')}, {_row(3, 'a')}",
        )


def _change(server: MariaDBServer, database: str) -> None:
    """Changes the binlog carries: rows, and DDL naming the tables."""
    for table in TABLES:
        execute(
            server,
            database,
            f"INSERT INTO {q(table)} VALUES {_row(4, 'b')}",
            f"UPDATE {q(table)} SET {q(COLUMNS[1])} = 'changed' WHERE {q(KEY)} = 2",
            f"DELETE FROM {q(table)} WHERE {q(KEY)} = 3",
            f"ALTER TABLE /* c */ {q(table)} ADD COLUMN {q(ADDED)} INT  -- a comment",
            f"UPDATE {q(table)} SET {q(ADDED)} = 7 WHERE {q(KEY)} IN (1, 2)",
        )


def _config(tmp_path: Path, server: MariaDBServer, database: str) -> ValidatorConfig:
    comparisons = "".join(
        f"  - name: c{index}\n"
        f"    source: {{connection: src, table: {json.dumps(format_part(table))}}}\n"
        f"    target: {{connection: lake, table: {json.dumps(format_table(database, table))}}}\n"
        for index, table in enumerate(TABLES)
    )
    path = tmp_path / "replcheck.yaml"
    path.write_text(
        "connections:\n"
        f"  src: {{url: {json.dumps(server.url(database))}}}\n"
        f"  lake: {{lake: {json.dumps(str(tmp_path / 'lake'))}}}\n"
        f"comparisons:\n{comparisons}"
        "validation: {lake_wait_timeout_s: 60}\n",
        encoding="utf-8",
    )
    return load_validator_config(path, environ={})


def _drift(lake: LakeTable, key: int, column: str) -> None:
    """Change one row in the lake's mirror behind the pipeline's back, as another writer
    would."""
    change_mirror(lake, KEY, [("u", key, {column: "drifted"})])


@pytest.fixture
def captured(
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    tmp_path: Path,
) -> tuple[MariaDBServer, str]:
    database = mariadb_database(mariadb_full)
    _create(mariadb_full, database)
    names = [format_part(table) for table in TABLES]
    with mariadb_pipeline(mariadb_full, database, names, tmp_path) as (pipeline, _):
        pipeline.run_until_caught_up()  # the initial load
        _change(mariadb_full, database)
        pipeline.run_until_caught_up()  # the binlog
    return mariadb_full, database


def test_awkward_names_are_captured_validated_and_resynced(
    captured: tuple[MariaDBServer, str], tmp_path: Path, spark: Any
) -> None:
    server, database = captured
    for table in TABLES:
        lake = lake_rows(tmp_path / "lake", format_table(database, table), [KEY])
        source = source_rows(server, database, format_part(table), [KEY])
        assert sorted(lake) == [(1,), (2,), (4,)], table
        assert lake == {k: dict(v) for k, v in source.items()}, table
        assert lake[(2,)][COLUMNS[1]] == "changed" and lake[(2,)][ADDED] == 7, table

    config = _config(tmp_path, server, database)
    assert validate(spark, config)["status"] == "in_sync"

    lake = tmp_path / "lake"
    _drift(LakeTable(lake, format_table(database, "a`b")), 2, "données")
    _drift(LakeTable(lake, format_table(database, "v1.2")), 4, "a.b")
    first = validate(spark, config)
    assert found_differences(first) == {("c2", "changed", ("2",)), ("c4", "changed", ("4",))}
    changed = {
        c["name"]: [col["column"] for d in c["differences"] for col in d["columns"]]
        for c in first["comparisons"]
        if c["differences"]
    }
    assert changed == {"c2": ["données"], "c4": ["a.b"]}

    outcome = resync(config, first, apply=True, out_dir=tmp_path / "out")
    assert outcome.exit_code == 0, outcome.to_dict()
    assert validate(spark, config)["status"] == "in_sync"
