"""``replcheck validate`` on a warm Spark: a Spark Connect server started on loopback.

A MariaDB table's lake is written by the product's pipeline, then the source drifts behind
the binlog's back (``sql_log_bin = 0``: rows deleted, inserted and updated that the lake
never sees). ``replcheck validate`` runs as its own process with ``spark.remote`` pointing
at the server, once in the hybrid engine and once in the Spark engine (whose source read
runs Python on the server's workers); both must find exactly the drift, reading the lake
from its mirror (the pipeline wrote it alone, so its histories prove the mirror's state).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc_core.errors import ReplcheckError
from cdc_core.names import format_table
from tests.connectors.mariadb.pipeline_helpers import execute, mariadb_pipeline
from tests.private_servers import MariaDBServer, running_spark_connect
from validator.demo.setup import found_differences
from validator.engines.sides.spark.session import connect_spark_session

pytestmark = [pytest.mark.integration, pytest.mark.mariadb, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[4]
KEYS = range(1, 301)
DRIFT = (
    "SET SESSION sql_log_bin = 0",
    "DELETE FROM orders WHERE id IN (7, 250)",
    "INSERT INTO orders VALUES (1000, 1.00, 'new'), (77777, 2.00, NULL)",
    "UPDATE orders SET note = 'edited' WHERE id = 42",
    "UPDATE orders SET amount = 0.01 WHERE id = 300",
)
FOUND = {
    ("missing_in_target", ("1000",)),
    ("missing_in_target", ("77777",)),
    ("extra_in_target", ("7",)),
    ("extra_in_target", ("250",)),
    ("changed", ("42",)),
    ("changed", ("300",)),
}


@pytest.fixture(scope="module")
def spark_connect() -> Iterator[str]:
    """A Spark Connect server for the module; its ``sc://`` URL."""
    with running_spark_connect() as url:
        yield url


@pytest.fixture(scope="module")
def drifted(
    mariadb_full: MariaDBServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[MariaDBServer, str, Path]]:
    """A MariaDB database, its lake written by the pipeline, and drift at the source."""
    work = tmp_path_factory.mktemp("connect")
    database = f"t_{uuid.uuid4().hex[:12]}"
    execute(mariadb_full, "mysql", f"CREATE DATABASE `{database}`")
    rows = ", ".join(f"({k}, {k}.25, 'note {k}')" for k in KEYS)
    execute(
        mariadb_full,
        database,
        "CREATE TABLE orders (id INT PRIMARY KEY, amount DECIMAL(10,2), note VARCHAR(20))",
        f"INSERT INTO orders VALUES {rows}",
    )
    try:
        with mariadb_pipeline(mariadb_full, database, ["orders"], work) as (pipeline, _):
            pipeline.run_until_caught_up()
        execute(mariadb_full, database, *DRIFT)
        yield mariadb_full, database, work / "lake"
    finally:
        execute(mariadb_full, "mysql", f"DROP DATABASE `{database}`")


def _config(path: Path, drifted: tuple[MariaDBServer, str, Path], remote: str) -> Path:
    server, database, lake = drifted
    target = json.dumps(format_table(database, "orders"))
    comparisons = "".join(
        f"  - {{name: {name}, source: {{connection: src, table: orders}},"
        f" target: {{connection: lake, table: {target}}}, engine: {engine}}}\n"
        for name, engine in (("hybrid", "hybrid"), ("in_spark", "spark"))
    )
    path.write_text(
        f"connections:\n  src: {{url: {json.dumps(server.url(database))}}}\n"
        f"  lake: {{lake: {json.dumps(str(lake))}}}\n"
        f"comparisons:\n{comparisons}"
        f"spark: {{remote: {json.dumps(remote)}}}\n"
        "validation: {lake_wait_timeout_s: 60}\n",
        encoding="utf-8",
    )
    return path


def _validate(config: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """``replcheck validate`` in its own process, this checkout first on its path."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-m", "validator.cli", "validate", "-c", str(config), "--out", str(out)]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, check=False)


def test_validate_through_spark_connect_finds_exactly_the_drift(
    spark_connect: str, drifted: tuple[MariaDBServer, str, Path], tmp_path: Path
) -> None:
    run = _validate(_config(tmp_path / "c.yaml", drifted, spark_connect), tmp_path / "out")

    assert run.returncode == 1, run.stderr
    # The lake is as the pipeline wrote it: read from its mirror, not replayed.
    assert "mirror version" in run.stderr and "replaying" not in run.stderr
    document: dict[str, Any] = json.loads((tmp_path / "out" / "result.json").read_text())
    comparisons = {c["name"]: c for c in document["comparisons"]}
    for name, engine in (("hybrid", "hybrid"), ("in_spark", "spark")):
        comparison = comparisons[name]
        assert comparison["error"] is None, comparison["error"]
        assert comparison["engine"] == engine
        found = found_differences({"comparisons": [comparison]})
        assert {finding[1:] for finding in found} == FOUND, name
    changed = {d["key"][0]: d.get("columns") for d in comparisons["hybrid"]["differences"]}
    assert changed["42"] == [{"column": "note", "source": "edited", "target": "note 42"}]


def test_an_unreachable_server_is_exit_2_naming_the_url_and_the_fix(
    drifted: tuple[MariaDBServer, str, Path], tmp_path: Path
) -> None:
    with socket.socket() as unused:  # a port nothing listens on while it is held unbound
        unused.bind(("127.0.0.1", 0))
        remote = f"sc://127.0.0.1:{unused.getsockname()[1]}"
        run = _validate(_config(tmp_path / "c.yaml", drifted, remote), tmp_path / "out")

    assert run.returncode == 2, run.stderr
    errors = [line for line in run.stderr.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and remote in errors[0], run.stderr
    assert "start-connect-server.sh" in errors[0] and "Traceback" not in run.stderr


@pytest.mark.parametrize("remote", ["sc://127.0.0.1:1/;token=SECRET", "sc://127.0.0.1:1;token=S"])
def test_a_token_in_the_url_is_never_shown(remote: str) -> None:
    """Unreachable, or malformed: the message shows the URL without its parameters."""
    with pytest.raises(ReplcheckError) as raised:
        connect_spark_session(remote)

    assert "sc://127.0.0.1:1" in str(raised.value)
    assert "token" not in str(raised.value) and "SECRET" not in str(raised.value)
