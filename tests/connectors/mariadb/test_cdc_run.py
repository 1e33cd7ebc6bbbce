"""``replcheck cdc run`` with a MariaDB source: the command replicates the configured tables
into the lake (initial snapshot, then the binlog) and stops cleanly on SIGTERM."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from cdc_core.capture.position import Position
from cdc_core.lake.layout import LakeTable, high_water_mark
from cdc_core.pipeline.checkpoint import read_checkpoint
from connectors.mariadb.log_reader import MariaDBLogReader
from connectors.mariadb.log_source import source_config
from tests.connectors.mariadb.pipeline_helpers import execute, lake_rows, source_rows
from tests.private_servers import MariaDBServer

pytestmark = [pytest.mark.integration, pytest.mark.mariadb]

ROOT = Path(__file__).resolve().parents[3]
WAIT_S = 120.0  # how long the test waits for the command to reach a point before failing

SCHEMA = (
    "CREATE TABLE customers (id INT PRIMARY KEY, name VARCHAR(40), tier INT DEFAULT 1)",
    "CREATE TABLE orders (id BIGINT PRIMARY KEY, customer_id INT, amount DECIMAL(10,2),"
    " status ENUM('new','paid','shipped') DEFAULT 'new', placed DATETIME(6))",
)


def _write_config(work: Path, server: MariaDBServer, database: str) -> Path:
    config = work / "replcheck.yaml"
    config.write_text(
        "connections:\n"
        f'  shop: {{url: "{server.url(database)}?heartbeat_s=0.2&server_id=4242"}}\n'
        f"  lake: {{lake: {work / 'lake'}}}\n"
        "pipelines:\n"
        "  - name: shop\n"
        "    source: shop\n"
        "    target: lake\n"
        f"    tables: [{database}.customers, {database}.orders]\n"
        f"    state_dir: {work / 'state'}\n"
        "    batch: {max_events: 200, max_seconds: 0.5}\n",
        encoding="utf-8",
    )
    return config


def _cdc_run(config: Path, *extra: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "validator.cli", "cdc", "run", "--config", str(config)]
    return subprocess.Popen(
        [*command, "--pipeline", "shop", *extra],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _changes(server: MariaDBServer, database: str, first: int) -> None:
    """Inserts (defaults omitted), updates, deletes and a multi-row statement."""
    execute(
        server,
        database,
        f"INSERT INTO customers (id, name) VALUES ({first}, 'c{first}'), ({first + 1}, 'd')",
        f"INSERT INTO orders (id, customer_id, amount) VALUES ({first}, {first}, 9.99)",
        f"UPDATE orders SET status = 'paid', amount = amount + 1 WHERE id < {first // 20}",
        f"DELETE FROM customers WHERE id = {first // 10}",
    )


def _assert_lake_equals_source(work: Path, server: MariaDBServer, database: str) -> None:
    for table in ("customers", "orders"):
        lake = lake_rows(work / "lake", f"{database}.{table}", ["id"])
        assert lake == source_rows(server, database, table, ["id"]), table


@pytest.fixture
def shop(
    mariadb_minimal: MariaDBServer, mariadb_database: Callable[[MariaDBServer], str]
) -> tuple[MariaDBServer, str]:
    database = mariadb_database(mariadb_minimal)
    execute(mariadb_minimal, database, *SCHEMA)
    rows = ", ".join(f"({i}, 'c{i}', {i % 3})" for i in range(1, 301))
    orders = ", ".join(
        f"({i}, {i}, {i}.5, 'new', '2025-01-01 10:00:00.{i:06d}')" for i in range(1, 201)
    )
    execute(
        mariadb_minimal,
        database,
        f"INSERT INTO customers VALUES {rows}",
        f"INSERT INTO orders VALUES {orders}",
    )
    return mariadb_minimal, database


def test_until_caught_up_snapshots_then_streams_into_the_lake(
    shop: tuple[MariaDBServer, str], tmp_path: Path
) -> None:
    server, database = shop
    config = _write_config(tmp_path, server, database)
    first = _cdc_run(config, "--until-caught-up")
    _, err = first.communicate(timeout=WAIT_S)
    assert first.returncode == 0, err[-3000:]
    _assert_lake_equals_source(tmp_path, server, database)  # the initial snapshot

    _changes(server, database, 1000)
    end = _end_position(server, database)
    second = _cdc_run(config, "--until-caught-up")
    out, err = second.communicate(timeout=WAIT_S)
    assert second.returncode == 0, err[-3000:]
    _assert_lake_equals_source(tmp_path, server, database)  # the binlog since
    assert (high_water_mark(LakeTable(tmp_path / "lake", f"{database}.orders")) or 0) >= end.value
    assert "the lake holds everything up to position" in out


def test_sigterm_stops_a_running_pipeline_with_a_checkpoint(
    shop: tuple[MariaDBServer, str], tmp_path: Path
) -> None:
    server, database = shop
    process = _cdc_run(_write_config(tmp_path, server, database))
    try:
        lake = LakeTable(tmp_path / "lake", f"{database}.customers")
        _wait_for(lambda: (high_water_mark(lake) or 0) > 0, process, "the initial load")
        _changes(server, database, 2000)
        end = _end_position(server, database)
        _wait_for(lambda: (high_water_mark(lake) or 0) >= end.value, process, "the changes")
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=WAIT_S)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, err[-3000:]
    assert "stopped cleanly" in err
    saved = read_checkpoint(tmp_path / "state")
    assert saved is not None and saved.lake_position is not None
    assert saved.lake_position >= end
    assert f"everything up to position {saved.lake_position}" in out
    _assert_lake_equals_source(tmp_path, server, database)


def _end_position(server: MariaDBServer, database: str) -> Position:
    reader = MariaDBLogReader(source_config(server.url(database), None, ["customers"]))
    with contextlib.closing(reader):
        return reader.end_position()


def _wait_for(done: Callable[[], bool], process: subprocess.Popen[str], what: str) -> None:
    """Wait until ``done()``; fail naming ``what`` if the command exits or takes too long."""
    deadline = time.monotonic() + WAIT_S
    while not done():
        if process.poll() is not None:
            _, err = process.communicate()
            raise AssertionError(f"cdc run exited before {what}: {err[-3000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"cdc run did not reach {what} within {WAIT_S} s")
        time.sleep(0.2)
