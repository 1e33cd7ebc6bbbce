"""Awkward schema, table and column names, PostgreSQL -> lake through ``replcheck cdc run``
(slot snapshot, then pgoutput relation messages and the publication), validated in sync,
a drifted lake row found and re-synced.

The schema itself holds a dot and mixed case, so every name crosses the canonical form's
quoting (cdc_core.names) in the config, the publication and the lake paths.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from cdc_core.lake.layout import LakeTable
from cdc_core.names import META_COLUMNS, format_table
from cdc_core.pipeline.config import load_pipeline_config
from cdc_core.pipeline.loop import Pipeline
from connectors.registry import log_source_for
from tests.cdc_core.kill_loop import ROOT
from tests.connectors.postgres.helpers import PgCase
from tests.private_servers import PostgresServer
from validator.config import load_validator_config
from validator.demo.drift import change_mirror
from validator.demo.setup import found_differences
from validator.job import validate
from validator.resync.run import resync

pytestmark = [pytest.mark.integration, pytest.mark.postgres, pytest.mark.spark]

SCHEMA = "Shop.v2"
TABLES = ["order-lines", "my table", "a`b", 'a"b', "v1.2", "select", "MixedCase", "données", "$x#y"]
KEY = "order id"
COLUMNS = ["my col", "q`c", 'd"q', "a.b", "select", "MixedCase", "données", "😀"]


def q(name: str) -> str:
    """A PostgreSQL quoted identifier."""
    return '"' + name.replace('"', '""') + '"'


def _values(key: int, tag: str) -> str:
    return "(" + ", ".join([str(key), *(f"'{tag}-{i}-{key}'" for i in range(len(COLUMNS)))]) + ")"


def _create(case: PgCase) -> None:
    columns = ", ".join(f"{q(c)} varchar(30)" for c in COLUMNS)
    case.sql(f"CREATE SCHEMA {q(SCHEMA)}")
    for table in TABLES:
        name = f"{q(SCHEMA)}.{q(table)}"
        case.sql(
            f"CREATE TABLE {name} ({q(KEY)} int PRIMARY KEY, {columns})",
            f"INSERT INTO {name} VALUES {_values(1, 'a')}, {_values(2, 'a')}, {_values(3, 'a')}",
        )


def _change(case: PgCase) -> None:
    for table in TABLES:
        name = f"{q(SCHEMA)}.{q(table)}"
        case.sql(
            f"INSERT INTO {name} VALUES {_values(4, 'b')}",
            f"UPDATE {name} SET {q(COLUMNS[7])} = 'changed' WHERE {q(KEY)} = 2",
            f"DELETE FROM {name} WHERE {q(KEY)} = 3",
        )


def _write_configs(case: PgCase, work: Path) -> tuple[Path, Path]:
    url = case.server.url(case.database)
    tables = json.dumps([format_table(SCHEMA, table) for table in TABLES])
    pipeline = work / "pipeline.yaml"
    pipeline.write_text(
        "connections:\n"
        f"  src: {{url: {json.dumps(url + '?idle_s=0.2')}}}\n"
        f"  lake: {{lake: {json.dumps(str(work / 'lake'))}}}\n"
        "pipelines:\n"
        "  - {name: pg, source: src, target: lake, "
        f"tables: {tables}, state_dir: {json.dumps(str(work / 'state'))}}}\n",
        encoding="utf-8",
    )
    comparisons = "".join(
        f"  - name: c{index}\n"
        f"    source: {{connection: src, table: {json.dumps(format_table(SCHEMA, table))}}}\n"
        f"    target: {{connection: lake, table: {json.dumps(format_table(SCHEMA, table))}}}\n"
        for index, table in enumerate(TABLES)
    )
    validation = work / "replcheck.yaml"
    validation.write_text(
        f"connections:\n  src: {{url: {json.dumps(url)}}}\n"
        f"  lake: {{lake: {json.dumps(str(work / 'lake'))}}}\n"
        f"comparisons:\n{comparisons}validation: {{lake_wait_timeout_s: 60}}\n",
        encoding="utf-8",
    )
    return pipeline, validation


def _cdc_run(config: Path) -> None:
    command = [sys.executable, "-m", "validator.cli", "cdc", "run", "--config", str(config)]
    done = subprocess.run(
        [*command, "--pipeline", "pg", "--until-caught-up"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr


def _lake(work: Path, table: str) -> dict[int, dict[str, Any]]:
    mirror = LakeTable(work / "lake", format_table(SCHEMA, table)).mirror
    rows = DeltaTable(str(mirror)).to_pyarrow_table().to_pylist()
    return {row[KEY]: {k: v for k, v in row.items() if k not in META_COLUMNS} for row in rows}


def _source(case: PgCase, table: str) -> dict[int, dict[str, Any]]:
    cursor = case.connection.execute(f"SELECT * FROM {q(SCHEMA)}.{q(table)}")
    names = [column.name for column in cursor.description or ()]
    return {row[0]: dict(zip(names, row, strict=True)) for row in cursor.fetchall()}


def _drift(lake: LakeTable, key: int, column: str) -> None:
    """Change one row in the lake's mirror behind the pipeline's back, as another writer
    would."""
    change_mirror(lake, KEY, [("u", key, {column: "drifted"})])


@pytest.fixture
def case(
    postgres: PostgresServer, postgres_database: Callable[[PostgresServer], str]
) -> Iterator[PgCase]:
    """A fresh database (its slot and publication go with it)."""
    with contextlib.closing(PgCase(postgres, postgres_database(postgres))) as pg_case:
        yield pg_case


def test_awkward_names_through_cdc_run_validate_and_resync(
    case: PgCase, tmp_path: Path, spark: Any
) -> None:
    _create(case)
    pipeline, validation = _write_configs(case, tmp_path)
    _cdc_run(pipeline)  # the initial load from the slot's snapshot
    _change(case)
    _cdc_run(pipeline)  # the stream, resumed from the slot
    for table in TABLES:
        assert _lake(tmp_path, table) == _source(case, table), table
        assert sorted(_lake(tmp_path, table)) == [1, 2, 4], table

    config = load_validator_config(validation, environ={})
    # The validator waits for the lake to reach the source's position: the same pipeline,
    # as a library, keeps the lake current meanwhile.
    with following(pipeline):
        first = validate(spark, config)
        assert first["status"] == "in_sync", [c["error"] for c in first["comparisons"]]
        lake = tmp_path / "lake"
        _drift(LakeTable(lake, format_table(SCHEMA, "a`b")), 2, "😀")
        _drift(LakeTable(lake, format_table(SCHEMA, 'a"b')), 1, "q`c")
        first = validate(spark, config)
        assert found_differences(first) == {("c2", "changed", ("2",)), ("c3", "changed", ("1",))}
        # PostgreSQL computes its own digests, DuckDB the lake's (engine: auto)
        assert {c["engine"] for c in first["comparisons"]} == {"local"}
        outcome = resync(config, first, apply=True, out_dir=tmp_path / "out")
        assert outcome.exit_code == 0, outcome.to_dict()
        assert validate(spark, config)["status"] == "in_sync"


@contextlib.contextmanager
def following(path: Path) -> Iterator[None]:
    """The pipeline of the config file ``path`` running on a thread."""
    setup = load_pipeline_config(path, "pg", environ={})
    source = log_source_for(setup.source.url or "", None, list(setup.config.tables.accept))
    with running_pipeline(Pipeline(setup.config, source.reader, source.snapshots), source.reader):
        yield


@contextlib.contextmanager
def running_pipeline(pipeline: Pipeline, reader: Any) -> Iterator[list[BaseException]]:
    """``pipeline`` running on a thread for the block (then stopped, its log ``reader``
    closed); what it raised is in the list, and fails the block's end."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            pipeline.run()
        except BaseException as exc:  # reported by the test, not lost in the thread
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield errors
    finally:
        pipeline.stop()
        thread.join(timeout=120)
        reader.close()
    assert not errors, errors
