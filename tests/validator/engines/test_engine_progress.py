"""``replcheck validate`` in each engine (database, local, hybrid, Spark) prints its phase
lines on stderr (leaves with their rows and rate, keys, columns), names its engine and why,
and says on its terminal line what it checked: a full run, with the reason when it was asked
to be incremental, or the leaves an incremental run re-hashed. Spark's JVM stays quiet.
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from reports.json_schema import validate_result
from tests.connectors.mariadb.pipeline_helpers import execute
from tests.private_servers import MariaDBServer
from tests.test_cli import JVM_CHATTER, OWN_LINE
from tests.validator.engines.local.test_local_engine import MariaDBLake

ROOT = Path(__file__).resolve().parents[3]
LEAVES_DONE = re.compile(
    r"comparison (\w+): leaves: (\d+) \+ (\d+) rows hashed in \d+\.\d s \(\d+ rows/s\),"
    r" (\d+) of (\d+) differ"
)
KEYS_DONE = re.compile(r"comparison \w+: keys: (\d+) differing in (\d+) leaves \(\d+\.\d s\)")
NOT_INCREMENTAL = "incremental runs need a lake target and the local or hybrid engine; engine"


class Run(NamedTuple):
    """One ``replcheck validate`` process: its exit code, output and only comparison."""

    code: int
    stdout: str
    stderr: str
    comparison: dict[str, Any]

    def phases(self) -> list[str]:
        """The progress lines about comparisons, without their time."""
        lines = self.stderr.splitlines()
        return [line[9:] for line in lines if re.match(r"\d\d:\d\d:\d\d comparison ", line)]

    def line(self) -> str:
        """The comparison's terminal line."""
        name = self.comparison["name"]
        (found,) = [line for line in self.stdout.splitlines() if line.startswith(f"{name} ")]
        return found


def _validate(config: Path, out: Path, *flags: str) -> Run:
    command = [sys.executable, "-m", "validator.cli", "validate", "-c", str(config)]
    finished = subprocess.run(
        [*command, "--out", str(out), *flags],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
        timeout=600,
    )
    assert finished.returncode in (0, 1), finished.stderr[-3000:]
    document = json.loads((out / "result.json").read_text(encoding="utf-8"))
    validate_result(document)
    (comparison,) = document["comparisons"]
    return Run(finished.returncode, finished.stdout, finished.stderr, comparison)


def _phases_of(run: Run, where: str, rows: int) -> None:
    """The run logged its engine once, each phase as it started (``where``), the rows the
    leaves phase hashed on each side (``rows``) and the keys phase's finding."""
    phases = run.phases()
    engine, why = run.comparison["engine"], run.comparison["engine_reason"]
    assert phases.count(f"comparison orders: {engine} engine: {why}") == 1
    for phase in ("leaves", "keys", "columns"):
        assert f"comparison orders: {phase} ({where})" in phases, phases
    done = [m for m in map(LEAVES_DONE.fullmatch, phases) if m]
    assert [m.group(1, 2, 3) for m in done] == [("orders", str(rows), str(rows))]
    assert any(KEYS_DONE.fullmatch(p) for p in phases), phases


def _quiet_jvm(run: Run) -> None:
    assert not JVM_CHATTER.search(run.stderr + run.stdout), run.stderr
    assert [line for line in run.stderr.splitlines() if not OWN_LINE.match(line)] == []


@pytest.mark.integration
@pytest.mark.mariadb
def test_database_engine_prints_its_phases_and_says_incremental_did_not_apply(
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    tmp_path: Path,
) -> None:
    """Two MariaDB databases compute their own digests; ``--incremental`` cannot apply."""
    source, target = mariadb_database(mariadb_full), mariadb_database(mariadb_full)
    rows = ", ".join(f"({k}, 'n{k}')" for k in range(1, 201))
    for database in (source, target):
        execute(
            mariadb_full,
            database,
            "CREATE TABLE orders (id INT PRIMARY KEY, note VARCHAR(20))",
            f"INSERT INTO orders VALUES {rows}",
        )
    execute(mariadb_full, target, "UPDATE orders SET note = 'drifted' WHERE id = 7")
    config = tmp_path / "database.yaml"
    config.write_text(
        "connections:\n"
        f"  src: {{url: {json.dumps(mariadb_full.url(source))}}}\n"
        f"  dst: {{url: {json.dumps(mariadb_full.url(target))}}}\n"
        "comparisons:\n"
        "  - {name: orders, source: {connection: src, table: orders},"
        " target: {connection: dst, table: orders}}\n"
        "validation: {recheck_lag_s: 0}\n",
        encoding="utf-8",
    )
    run = _validate(config, tmp_path / "out", "--incremental")
    assert run.code == 1 and run.comparison["counts_by_kind"] == {"changed": 1}
    why = "auto: both databases compute their own digests"
    assert (run.comparison["engine"], run.comparison["engine_reason"]) == ("database", why)
    _phases_of(run, "in the databases", 200)
    coverage = run.comparison["coverage"]
    reason = f"{NOT_INCREMENTAL} database was chosen because {why}"
    assert (coverage["mode"], coverage["reason"]) == ("full", reason)
    assert run.line().endswith(f"changed: 1; full run ({reason}); engine database")


def _lake_config(lake: MariaDBLake, engine: str) -> Path:
    """The lake's comparison in 16 key-range leaves, a quarter of them swept each run."""
    path = lake.work / f"{engine}-progress.yaml"
    path.write_text(
        "connections:\n"
        f"  src: {{url: {json.dumps(lake.server.url(lake.database))}}}\n"
        f"  lake: {{lake: {json.dumps(str(lake.lake))}}}\n"
        "comparisons:\n"
        "  - {name: orders, source: {connection: src, table: orders},"
        f" target: {{connection: lake, table: {json.dumps(lake.target)}}},"
        " options: {depth: 4}}\n"
        f"validation: {{lake_wait_timeout_s: 60, engine: {engine}, sweep_share: 0.25}}\n",
        encoding="utf-8",
    )
    return path


@pytest.fixture
def lake(
    mariadb_full: MariaDBServer, mariadb_database: Callable[[MariaDBServer], str], tmp_path: Path
) -> MariaDBLake:
    """300 rows at a MariaDB source and in the lake the pipeline wrote."""
    return MariaDBLake(mariadb_full, mariadb_database(mariadb_full), tmp_path)


@pytest.mark.integration
@pytest.mark.mariadb
def test_local_engine_prints_its_phases_and_what_an_incremental_run_rehashed(
    lake: MariaDBLake, tmp_path: Path
) -> None:
    config = _lake_config(lake, "auto")
    first = _validate(config, tmp_path / "first", "--incremental")
    assert first.comparison["engine"] == "local"
    why = first.comparison["engine_reason"]
    assert why.startswith("auto: the source database computes its digests, DuckDB hashes")
    _phases_of(first, "source in its database, lake in DuckDB", 300)
    assert "; full run (first run: no validation state stored at " in first.line()
    assert first.line().endswith(f"; engine local ({why})")
    second = _validate(config, tmp_path / "second", "--incremental")
    assert second.comparison["coverage"]["mode"] == "incremental"
    # Nothing changed: the sweep's 4 leaves (one in each stripe of 4) are re-hashed.
    assert " in_sync " in second.line()
    assert second.line().endswith(
        "no differences; 4 of 16 leaves re-hashed; every leaf swept within 3 more"
        f" incremental runs; engine local ({why})"
    )
    done = [m for m in map(LEAVES_DONE.fullmatch, second.phases()) if m]
    assert [m.group(4, 5) for m in done] == [("0", "4")]  # only the re-hashed leaves compared


@pytest.mark.integration
@pytest.mark.mariadb
@pytest.mark.spark
def test_hybrid_engine_prints_its_phases_and_spark_stays_quiet(
    lake: MariaDBLake, tmp_path: Path
) -> None:
    run = _validate(_lake_config(lake, "hybrid"), tmp_path / "out")
    assert run.code == 0
    assert (run.comparison["engine"], run.comparison["engine_reason"]) == (
        "hybrid",
        "validation.engine is hybrid",
    )
    assert run.comparison["coverage"] is None  # not asked to keep state
    _phases_of(run, "source in its database, lake in Spark", 300)
    assert run.line().endswith(
        "no differences; full run; engine hybrid (validation.engine is hybrid)"
    )
    _quiet_jvm(run)


@pytest.mark.spark
def test_spark_engine_prints_its_phases_and_says_incremental_did_not_apply(
    tmp_path: Path,
) -> None:
    """SQLite computes no digests: Spark compares, and ``--incremental`` cannot apply."""
    urls = {}
    for name in ("src", "tgt"):
        with closing(sqlite3.connect(tmp_path / f"{name}.db")) as conn, conn:
            conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, note TEXT)")
            conn.executemany("INSERT INTO orders VALUES (?, ?)", [(k, f"n{k}") for k in range(50)])
        urls[name] = f"sqlite:///{tmp_path / f'{name}.db'}"
    config = tmp_path / "spark.yaml"
    config.write_text(
        f"connections:\n  src: {{url: {json.dumps(urls['src'])}}}\n"
        f"  tgt: {{url: {json.dumps(urls['tgt'])}}}\n"
        "comparisons:\n"
        "  - {name: orders, source: {connection: src, table: orders},"
        " target: {connection: tgt, table: orders}}\n"
        "spark: {master: 'local[1]'}\n",
        encoding="utf-8",
    )
    run = _validate(config, tmp_path / "out", "--incremental")
    assert run.code == 0 and run.comparison["engine"] == "spark"
    why = run.comparison["engine_reason"]
    assert why.startswith("auto: the databases cannot compute the digests (")
    assert "comparison orders: source (in Spark)" in run.phases()
    _phases_of(run, "in Spark", 50)
    reason = f"{NOT_INCREMENTAL} spark was chosen because {why}"
    assert (run.comparison["coverage"]["mode"], run.comparison["coverage"]["reason"]) == (
        "full",
        reason,
    )
    assert run.line().endswith(f"no differences; full run ({reason}); engine spark")
    _quiet_jvm(run)
