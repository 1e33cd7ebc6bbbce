"""The local engine (the source database's digests, DuckDB on the lake) against lakes the
real pipeline wrote from private MariaDB and PostgreSQL servers: it finds exactly what the
hybrid engine (Spark on the lake) finds, reading the lake's mirror or replaying its
changelog; the planner picks it, or falls back; ``replcheck validate`` runs it with no Spark.

Drift the mirror read must see is made at the MariaDB source without a log record (``SET
sql_log_bin = 0``: the pipeline never sees it, the lake's histories stay the pipeline's
own); drift written into the changelog behind the pipeline's back makes the lake replayed.
(``tests/validator/engines/hybrid/test_hybrid_engine.py`` compares the engines on more drift
and leaves.)
"""

from __future__ import annotations

import contextlib
import json
import logging
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from cdc_core.capture.filters import TableFilter
from cdc_core.errors import ConfigError
from cdc_core.lake.layout import LakeTable, high_water_mark
from cdc_core.names import format_table
from cdc_core.pipeline.loop import Pipeline, PipelineConfig
from connectors.registry import log_source_for
from reports.json_schema import validate_result
from tests.connectors.mariadb.pipeline_helpers import execute, mariadb_pipeline
from tests.private_servers import MariaDBServer, PostgresServer
from tests.validator.engines.hybrid.test_hybrid_engine import _detail, _inject
from tests.validator.test_identifiers_postgres import running_pipeline
from validator.config import load_validator_config
from validator.demo.setup import found_differences
from validator.job import validate
from validator.plan import plan_comparison

pytestmark = [pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[4]
SECRET = "s3cr3t-value"  # a sensitive column's value: never in a result
MARIADB_DDL = """CREATE TABLE orders (id BIGINT PRIMARY KEY, amount DECIMAL(12,2) NOT NULL,
  ratio DOUBLE, placed DATETIME(6), day DATE, note VARCHAR(40), flag TINYINT(1),
  pin VARCHAR(40)) CHARSET utf8mb4"""
UNLOGGED = "SET sql_log_bin = 0"
DRIFT = (
    UNLOGGED,
    "DELETE FROM orders WHERE id = 40",  # extra in the lake
    "INSERT INTO orders VALUES (9001, 1.5, 0.25, '2024-01-01 00:00:00.5', '2024-01-02',"
    " 'new', 1, 'p')",  # missing from the lake
    "UPDATE orders SET ratio = ratio + 1e-9 WHERE id = 78",  # changed: a float, slightly
    f"UPDATE orders SET pin = '{SECRET}' WHERE id = 120",  # changed: a sensitive column
    "UPDATE orders SET placed = '2000-02-29 23:59:59.000001', note = 'Zoë' WHERE id = 150",
)
FOUND = {
    ("orders", "extra_in_target", ("40",)),
    ("orders", "missing_in_target", ("9001",)),
    ("orders", "changed", ("78",)),
    ("orders", "changed", ("120",)),
    ("orders", "changed", ("150",)),
}


def _row(key: int) -> str:
    note = "NULL" if key % 7 == 0 else f"'n{key} — ü'"
    ratio = "NULL" if key % 11 == 0 else f"{key / 3}"
    return (
        f"({key}, {key * 1.25:.2f}, {ratio}, '2024-05-01 08:30:00.{key:06d}',"
        f" '2024-05-{1 + key % 28:02d}', {note}, {key % 2}, 'pin{key}')"
    )


def _write_config(path: Path, source_url: str, lake: Path, target: str, validation: str) -> Path:
    path.write_text(
        "connections:\n"
        f"  src: {{url: {json.dumps(source_url)}}}\n"
        f"  lake: {{lake: {json.dumps(str(lake))}}}\n"
        "comparisons:\n"
        "  - {name: orders, source: {connection: src, table: orders},\n"
        f"     target: {{connection: lake, table: {json.dumps(target)}}},\n"
        "     columns: {sensitive: [pin]}}\n"
        f"validation: {{lake_wait_timeout_s: 60, {validation}}}\n",
        encoding="utf-8",
    )
    return path


class MariaDBLake:
    """A MariaDB table ``orders`` and its lake written by the pipeline."""

    def __init__(self, server: MariaDBServer, database: str, work: Path) -> None:
        self.server, self.database, self.work = server, database, work
        self.lake = work / "lake"
        self.target = format_table(database, "orders")
        rows = ", ".join(_row(k) for k in range(1, 301))
        execute(server, database, MARIADB_DDL, f"INSERT INTO orders VALUES {rows}")
        with mariadb_pipeline(server, database, ["orders"], work) as (pipeline, _):
            pipeline.run_until_caught_up()

    def config(self, engine: str, extra: str = "") -> Path:
        path = self.work / f"{engine}.yaml"
        url = self.server.url(self.database)
        return _write_config(path, url, self.lake, self.target, f"engine: {engine}{extra}")


@pytest.fixture
def mariadb_lake(
    mariadb_full: MariaDBServer, mariadb_database: Callable[[MariaDBServer], str], tmp_path: Path
) -> MariaDBLake:
    return MariaDBLake(mariadb_full, mariadb_database(mariadb_full), tmp_path)


def _run(spark: Any, config: Path) -> dict[str, Any]:
    document = validate(spark, load_validator_config(config, environ={}))
    validate_result(document)
    (comparison,) = document["comparisons"]
    assert comparison["error"] is None, comparison["error"]
    return document


def _lake_reads(caplog: pytest.LogCaptureFixture) -> list[str]:
    """How the local engine read the lake, as it logged it."""
    reads = [r.getMessage() for r in caplog.records if r.name.endswith("engines.local.state")]
    return [m.split(": ", 1)[1] for m in reads]


def _same_as_hybrid(local: dict[str, Any], hybrid: dict[str, Any], *, moved: bool = False) -> None:
    """``moved``: the source's position moved between the runs (PostgreSQL's WAL end)."""
    assert (local["engine"], hybrid["engine"]) == ("local", "hybrid")
    assert found_differences({"comparisons": [local]}) == found_differences(
        {"comparisons": [hybrid]}
    )
    assert _detail(local) == _detail(hybrid)
    for field in ("status", "counts_by_kind", "mismatched_leaves", "leaves_compared"):
        assert local[field] == hybrid[field], field
    for field in ("source_rows", "target_rows", "source_position", "target_position"):
        if not (moved and field.endswith("_position")):
            assert local[field] == hybrid[field], field


@pytest.mark.mariadb
@pytest.mark.spark
def test_mariadb_drift_at_the_source_is_found_reading_the_mirror_as_the_hybrid_engine_finds_it(
    spark: Any, mariadb_lake: MariaDBLake, caplog: pytest.LogCaptureFixture
) -> None:
    execute(mariadb_lake.server, mariadb_lake.database, *DRIFT)
    caplog.set_level(logging.INFO)
    local = _run(spark, mariadb_lake.config("local"))
    assert _lake_reads(caplog) == ["mirror version 1"]
    assert local["comparisons"][0]["lake_findings"] == []
    hybrid = _run(spark, mariadb_lake.config("hybrid"))
    assert found_differences(local) == FOUND
    _same_as_hybrid(local["comparisons"][0], hybrid["comparisons"][0])
    differences = local["comparisons"][0]["differences"]
    changed = {d["key"][0]: d["columns"] for d in differences if d["kind"] == "changed"}
    assert changed["120"] == [{"column": "pin", "source": "***", "target": "***"}]
    assert [c["column"] for c in changed["150"]] == ["placed", "note"]
    assert SECRET not in json.dumps(local) and SECRET not in json.dumps(hybrid)


@pytest.mark.mariadb
@pytest.mark.spark
def test_mariadb_drift_another_writer_made_in_the_mirror_is_found_with_hash_leaves_too(
    spark: Any, mariadb_lake: MariaDBLake, caplog: pytest.LogCaptureFixture
) -> None:
    table = LakeTable(mariadb_lake.lake, mariadb_lake.target)
    _inject(table, "id", [("d", 5, {}), ("u", 6, {"pin": SECRET}), ("c", 7000, {})])
    found = {("missing_in_target", 5, 5), ("changed", 6, 6), ("extra_in_target", 7000, 1)}

    def expected(note_in_key: bool) -> set[tuple[str, str, tuple[str, ...]]]:
        def key(k: int, row: int) -> tuple[str, ...]:
            return (str(k), f"n{row} — ü") if note_in_key else (str(k),)

        return {("orders", kind, key(k, row)) for kind, k, row in found}

    caplog.set_level(logging.INFO)
    for extra in ("", ", key: [id, note]"):  # a string key part: hash leaves
        config = mariadb_lake.config("local")
        keyed = config.read_text().replace("sensitive: [pin]}", f"sensitive: [pin]}}{extra}")
        config.write_text(keyed)
        local = _run(spark, config)
        assert found_differences(local) == expected(bool(extra))
        hybrid_config = mariadb_lake.config("hybrid")
        hybrid_config.write_text(keyed.replace("engine: local", "engine: hybrid"))
        hybrid = _run(spark, hybrid_config)
        _same_as_hybrid(local["comparisons"][0], hybrid["comparisons"][0])
        assert SECRET not in json.dumps(local)
    assert set(_lake_reads(caplog)) == {"mirror version 2"}
    (finding,) = local["comparisons"][0]["lake_findings"]
    assert finding["kind"] == "foreign_commit" and "version 2 of the mirror" in finding["detail"]


@pytest.mark.mariadb
def test_auto_picks_the_local_engine_and_falls_back_where_it_cannot_run(
    mariadb_lake: MariaDBLake,
) -> None:
    config = load_validator_config(mariadb_lake.config("auto"), environ={})
    comparison = config.comparison("orders")
    plan = plan_comparison(config, comparison)
    assert plan.local and plan.lake_source is not None
    # Expectations are checked on the lake as a Spark frame: the hybrid engine compares.
    suite = load_validator_config(_with_expectations(mariadb_lake.config("auto")), environ={})
    fallback = plan_comparison(suite, suite.comparison("orders"))
    assert fallback.comparison.expectations
    assert not fallback.local and fallback.lake_source is not None
    insisting = load_validator_config(_with_expectations(mariadb_lake.config("local")), environ={})
    with pytest.raises(ConfigError, match=r"local engine cannot compare it .*expectations"):
        plan_comparison(insisting, insisting.comparison("orders"))
    # float_digits: neither MariaDB nor DuckDB writes it exactly: Spark compares.
    rounded = replace(comparison, options=replace(comparison.options, float_digits=6))
    spark_plan = plan_comparison(config, rounded)
    assert spark_plan.lake_source is None and not spark_plan.local
    hybrid = load_validator_config(mariadb_lake.config("hybrid"), environ={})
    assert not plan_comparison(hybrid, hybrid.comparison("orders")).local


def _with_expectations(path: Path) -> Path:
    text = path.read_text().replace(
        "columns: {sensitive: [pin]}}",
        "columns: {sensitive: [pin]},\n     expectations: [{kind: row_count}]}",
    )
    written = path.with_name(f"gx-{path.name}")
    written.write_text(text, encoding="utf-8")
    return written


@pytest.mark.mariadb
def test_validate_command_runs_the_local_engine_without_starting_spark(
    mariadb_lake: MariaDBLake, tmp_path: Path
) -> None:
    """Spark's only way in is an unreachable Spark Connect server: a run that started Spark
    would exit 2 naming it."""
    execute(mariadb_lake.server, mariadb_lake.database, *DRIFT)
    config = mariadb_lake.config("auto")
    config.write_text(config.read_text() + 'spark: {remote: "sc://127.0.0.1:9"}\n')
    out = tmp_path / "out"
    command = [sys.executable, "-m", "validator.cli", "validate", "-c", str(config)]
    finished = subprocess.run(
        [*command, "--out", str(out)], capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert finished.returncode == 1, finished.stderr[-2000:]
    document = json.loads((out / "result.json").read_text(encoding="utf-8"))
    assert document["comparisons"][0]["engine"] == "local"
    assert found_differences(document) == FOUND
    assert SECRET not in (out / "result.json").read_text(encoding="utf-8")
    assert "sc://127.0.0.1:9" not in finished.stderr


class PostgresLake:
    """A PostgreSQL table ``orders`` and its lake written by the pipeline."""

    def __init__(self, server: PostgresServer, database: str, work: Path) -> None:
        self.server, self.database, self.work = server, database, work
        self.lake = work / "lake"
        self.target = "public.orders"
        with server.connect(database) as connection:
            connection.execute(
                "CREATE TABLE orders (id bigint PRIMARY KEY, amount numeric(12,2) NOT NULL,"
                " ratio double precision, placed timestamptz, day date, note text,"
                " flag boolean, pin text, ref uuid, raw bytea)"
            )
            connection.execute(
                "INSERT INTO orders SELECT k, k * 1.25, k / 3.0, timestamptz '2024-05-01"
                " 08:30:00+02' + k * interval '1.000001 second', date '2024-05-01' + k % 28,"
                " CASE WHEN k % 7 = 0 THEN NULL ELSE 'n' || k || ' — ü' END, k % 2 = 0,"
                " 'pin' || k, md5(k::text)::uuid, decode(md5(k::text), 'hex')"
                " FROM generate_series(1, 300) k"
            )

    @contextlib.contextmanager
    def following(self) -> Iterator[None]:
        """The pipeline running on a thread: a PostgreSQL snapshot's position is the WAL's
        end, which moves on without the table, and the lake must get there."""
        url = self.server.url(self.database) + "?idle_s=0.2"
        source = log_source_for(url, None, [self.target])
        tables = TableFilter.of_tables([self.target])
        config = PipelineConfig("pg-local", self.lake, self.work / "state", tables)
        pipeline = Pipeline(config, source.reader, source.snapshots)
        with running_pipeline(pipeline, source.reader) as errors:
            table = LakeTable(self.lake, self.target)
            deadline = time.monotonic() + 120
            while high_water_mark(table) is None and not errors:  # the initial load
                assert time.monotonic() < deadline, "the pipeline did not load the table"
                time.sleep(0.2)
            yield

    def config(self, engine: str) -> Path:
        path = self.work / f"{engine}.yaml"
        url = self.server.url(self.database)
        return _write_config(path, url, self.lake, self.target, f"engine: {engine}")


@pytest.mark.postgres
@pytest.mark.spark
def test_postgres_lake_in_sync_from_its_mirror_then_another_writers_drift_found_in_it(
    spark: Any,
    postgres: PostgresServer,
    postgres_database: Callable[[PostgresServer], str],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    pg = PostgresLake(postgres, postgres_database(postgres), tmp_path)
    caplog.set_level(logging.INFO)
    with pg.following():
        _postgres_runs(spark, pg, caplog)


def _postgres_runs(spark: Any, pg: PostgresLake, caplog: pytest.LogCaptureFixture) -> None:
    in_sync = _run(spark, pg.config("auto"))
    assert in_sync["comparisons"][0]["engine"] == "local"
    assert in_sync["status"] == "in_sync"
    assert in_sync["comparisons"][0]["source_rows"] == 300
    assert _lake_reads(caplog)[-1].startswith("mirror version")
    _inject(LakeTable(pg.lake, pg.target), "id", [("d", 8, {}), ("u", 9, {"pin": SECRET})])
    _inject(LakeTable(pg.lake, pg.target), "id", [("u", 10, {"ratio": 1.0, "raw": b"x"})])
    local = _run(spark, pg.config("local"))
    assert _lake_reads(caplog)[-1].startswith("mirror version")
    assert {f["kind"] for f in local["comparisons"][0]["lake_findings"]} == {"foreign_commit"}
    hybrid = _run(spark, pg.config("hybrid"))
    assert found_differences(local) == {
        ("orders", "missing_in_target", ("8",)),
        ("orders", "changed", ("9",)),
        ("orders", "changed", ("10",)),
    }
    _same_as_hybrid(local["comparisons"][0], hybrid["comparisons"][0], moved=True)
    assert SECRET not in json.dumps(local)
