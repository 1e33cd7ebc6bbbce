"""A PostgreSQL cluster with default settings (``wal_level = replica``, as many installations
and managed services run) compared with its copies, read by a role without the REPLICATION
attribute: comparing two tables needs a consistent snapshot, not logical decoding, so the
database, Spark and local engines find exactly the injected differences (and nothing in an
equal copy); only a snapshot that must sit at an exact log position needs a logical slot,
and asking for one on this cluster says so.
"""

from __future__ import annotations

import contextlib
import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc_core.errors import TerminalError
from connectors.registry import connector_for
from tests.private_servers import PostgresServer, running_default_postgres
from validator.config import load_validator_config
from validator.demo.setup import found_differences
from validator.engines.sides.spark.session import LazySparkSession
from validator.job import validate

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

ROOT = Path(__file__).resolve().parents[3]
READER = "reader"  # LOGIN only: no SUPERUSER, no REPLICATION
TABLE_DDL = "CREATE TABLE {} (id bigint PRIMARY KEY, amount numeric(12,2), note text)"
FILL = "INSERT INTO {} SELECT g, g * 1.25, 'row ' || g FROM generate_series(1, 300) g"
DRIFT = (
    "DELETE FROM orders WHERE id = 40",
    "INSERT INTO orders VALUES (9001, 1.50, 'extra')",
    "UPDATE orders SET note = 'changed' WHERE id = 150",
)
FOUND = {
    ("orders", "missing_in_target", ("40",)),
    ("orders", "extra_in_target", ("9001",)),
    ("orders", "changed", ("150",)),
}


@pytest.fixture(scope="module")
def cluster() -> Iterator[PostgresServer]:
    """The default-settings cluster: database ``src`` and its copy ``dst``, both holding
    ``orders`` (the copy drifted) and ``items`` (an equal copy), readable by ``reader``."""
    with running_default_postgres() as server:
        with contextlib.closing(server.connect("postgres")) as conn:
            assert conn.execute("SHOW wal_level").fetchone() == ("replica",)
            conn.execute(f"CREATE ROLE {READER} LOGIN")
            for database in ("src", "dst"):
                conn.execute(f"CREATE DATABASE {database}")
        for database in ("src", "dst"):
            with contextlib.closing(server.connect(database)) as conn:
                for table in ("orders", "items"):
                    conn.execute(TABLE_DDL.format(table))
                    conn.execute(FILL.format(table))
                conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {READER}")
        with contextlib.closing(server.connect("dst")) as conn:
            for statement in DRIFT:
                conn.execute(statement)
        yield server


def _reader_url(server: PostgresServer, database: str) -> str:
    return f"postgresql+psycopg://{READER}@{server.host}:{server.port}/{database}"


def _config(tmp_path: Path, server: PostgresServer, engine: str) -> Path:
    path = tmp_path / f"{engine}.yaml"
    path.write_text(f"""\
connections:
  src: {{url: "{_reader_url(server, "src")}"}}
  dst: {{url: "{_reader_url(server, "dst")}"}}
comparisons:
  - {{name: orders, source: {{connection: src, table: orders}},
      target: {{connection: dst, table: orders}}, engine: {engine}, replication: none}}
  - {{name: items, source: {{connection: src, table: items}},
      target: {{connection: dst, table: items}}, engine: {engine}}}
validation: {{recheck_lag_s: 0}}
""")
    return path


def _checked(document: dict[str, Any], engine: str) -> None:
    """Exactly the injected differences in ``orders``, ``items`` in sync, both by ``engine``."""
    by_name = {c["name"]: c for c in document["comparisons"]}
    for comparison in by_name.values():
        assert comparison["error"] is None, comparison["error"]
        assert comparison["engine"] == engine
    assert found_differences(document) == FOUND
    assert by_name["orders"]["status"] == "differences"
    assert by_name["items"]["status"] == "in_sync"


def _said_snapshot(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "snapshot:" in r.getMessage()]


def test_the_database_engine_compares_a_default_postgres(
    cluster: PostgresServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="validator.engines")
    lazy = LazySparkSession()
    document = validate(lazy, load_validator_config(_config(tmp_path, cluster, "database")))
    _checked(document, "database")
    assert not lazy.started
    said = _said_snapshot(caplog)
    assert said and all("no replication slot" in line for line in said), said


@pytest.mark.spark
def test_the_spark_engine_compares_a_default_postgres(
    spark: Any, cluster: PostgresServer, tmp_path: Path
) -> None:
    document = validate(spark, load_validator_config(_config(tmp_path, cluster, "spark")))
    _checked(document, "spark")


def _replcheck(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "validator.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_local_engine_compares_a_default_postgres_with_its_trigger_fed_lake(
    cluster: PostgresServer, tmp_path: Path
) -> None:
    """Trigger capture feeds the lake (no logical decoding on this cluster); rows changed
    behind the capture's back (``session_replication_role = replica`` skips triggers) are
    the drift ``validate`` must find, run as a user would."""
    url = cluster.url("src") + "?capture=trigger"
    config = tmp_path / "lake.yaml"
    config.write_text(f"""\
connections:
  src: {{url: "{url}"}}
  lake: {{lake: "{tmp_path / "lake"}"}}
pipelines:
  - {{name: p, source: src, target: lake, tables: [public.items], state_dir: "{tmp_path}/s"}}
comparisons:
  - {{name: items, source: {{connection: src, table: items}},
      target: {{connection: lake, table: public.items}}}}
validation: {{engine: local, lake_wait_timeout_s: 30}}
""")
    for command in (["install-capture"], ["run", "--until-caught-up"]):
        done = _replcheck("cdc", *command, "-c", str(config), "--pipeline", "p")
        assert done.returncode == 0, done.stderr[-3000:]
    in_sync = _replcheck("validate", "-c", str(config), "--out", str(tmp_path / "in_sync"))
    assert in_sync.returncode == 0, in_sync.stdout[-3000:] + in_sync.stderr[-3000:]
    assert "no replication slot" in in_sync.stderr + in_sync.stdout
    with contextlib.closing(cluster.connect("src")) as conn:
        conn.execute("SET session_replication_role = replica")
        for statement in DRIFT:
            conn.execute(statement.replace("orders", "items"))
    drifted = _replcheck("validate", "-c", str(config), "--out", str(tmp_path / "drifted"))
    assert drifted.returncode == 1, drifted.stdout[-3000:] + drifted.stderr[-3000:]
    document = json.loads((tmp_path / "drifted" / "result.json").read_text(encoding="utf-8"))
    assert document["comparisons"][0]["engine"] == "local"
    assert found_differences(document) == {  # drift at the source: the lake lacks its news
        ("items", "extra_in_target", ("40",)),
        ("items", "missing_in_target", ("9001",)),
        ("items", "changed", ("150",)),
    }


def test_a_snapshot_at_a_log_position_explains_what_it_needs(cluster: PostgresServer) -> None:
    """Agreeing on a log position with a log-fed copy is the one case that needs a logical
    slot; on this cluster the error names both requirements and why."""
    connector = connector_for(_reader_url(cluster, "src"))
    with pytest.raises(TerminalError) as caught, connector.shared_snapshot(at_log_position=True):
        pass
    message = str(caught.value)
    assert "wal_level" in message and "log position" in message, message
