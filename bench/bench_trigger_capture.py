"""Trigger capture: what the triggers cost the writer, and captured changes per second end to
end (issue 18).

For SQLite (a temporary file) and PostgreSQL (a private cluster, ``tests/private_servers.py``)
it runs one workload twice on a fresh table of 6 columns — N inserts in transactions of 1,000
rows, then N updates of one column in transactions of 1,000 — once without capture and once
with ``replcheck cdc install-capture``'s triggers, and reports the writer's time for each.
Then the pipeline (``open_pipeline(...).run_until_caught_up()``: the reader over the logging
tables, buffer, rebuild, Delta sink) replicates the 2N captured changes into a lake, timed.

    python -m bench.bench_trigger_capture [--rows 50000] [--products sqlite,postgres]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from connectors.pipeline import open_pipeline
from tests.private_servers import PostgresServer, running_postgres
from validator.commands.capture import change_capture

TABLE_SQL = (
    "CREATE TABLE b (id BIGINT PRIMARY KEY, qty INTEGER, price DECIMAL(10,2), name TEXT,"
    " note TEXT, created TIMESTAMP)"
)
INSERT = "INSERT INTO b VALUES ({})"
BATCH = 1_000
Write = Callable[[list[str]], None]  # runs statements as one transaction


def _statements(rows: int) -> Iterator[list[str]]:
    """The workload, one transaction at a time: inserts, then updates."""
    for first in range(0, rows, BATCH):
        values = ", ".join(
            f"({i}, {i % 97}, {i}.25, 'name {i}', 'note {i}', '2024-05-01 10:00:00.123456')"
            for i in range(first, min(first + BATCH, rows))
        )
        yield [f"INSERT INTO b VALUES {values}"]
    for first in range(0, rows, BATCH):
        yield [f"UPDATE b SET qty = qty + 1 WHERE id >= {first} AND id < {first + BATCH}"]


def _timed_workload(write: Write, rows: int) -> float:
    started = time.perf_counter()
    for transaction in _statements(rows):
        write(transaction)
    return time.perf_counter() - started


def _config(work: Path, url: str) -> Path:
    config = work / "pipeline.yaml"
    config.write_text(
        f'connections:\n  src: {{url: "{url}"}}\n  lake: {{lake: "{work / "lake"}"}}\n'
        "pipelines:\n  - {name: bench, source: src, target: lake, tables: [b],"
        f' state_dir: "{work / "state"}"}}\n',
        encoding="utf-8",
    )
    return config


def _captured_run(work: Path, url: str, write: Write, rows: int) -> tuple[float, float]:
    """(writer seconds with triggers, pipeline seconds for the 2N changes)."""
    config = _config(work, url)
    change_capture(config, "bench", "install", lambda _: None)
    with open_pipeline(config, "bench") as pipeline:
        pipeline.run_until_caught_up()  # the (empty) initial load
        written = _timed_workload(write, rows)
        started = time.perf_counter()
        pipeline.run_until_caught_up()
        return written, time.perf_counter() - started


def _sqlite_writer(path: Path) -> Write:
    def write(statements: list[str]) -> None:
        connection = sqlite3.connect(path, isolation_level=None)
        with contextlib.closing(connection):
            connection.execute("BEGIN")
            for statement in statements:
                connection.execute(statement)
            connection.execute("COMMIT")

    return write


def sqlite(rows: int) -> tuple[float, float, float]:
    """(writer without triggers, writer with them, pipeline) seconds on SQLite files."""
    with tempfile.TemporaryDirectory() as work:
        plain, captured = Path(work) / "plain.db", Path(work) / "captured.db"
        for path in (plain, captured):
            _sqlite_writer(path)([TABLE_SQL])
        bare = _timed_workload(_sqlite_writer(plain), rows)
        written, applied = _captured_run(
            Path(work), f"sqlite:///{captured}", _sqlite_writer(captured), rows
        )
    return bare, written, applied


def _postgres_writer(server: PostgresServer, database: str) -> Write:
    def write(statements: list[str]) -> None:
        with contextlib.closing(server.connect(database)) as connection:
            for statement in statements:
                connection.execute(statement)
            connection.commit()

    return write


def postgres(server: PostgresServer, rows: int) -> tuple[float, float, float]:
    """(writer without triggers, writer with them, pipeline) seconds on PostgreSQL."""
    with contextlib.closing(server.connect("postgres")) as admin:
        admin.autocommit = True
        for database in ("bench_plain", "bench_captured"):
            admin.execute(f"DROP DATABASE IF EXISTS {database}")
            admin.execute(f"CREATE DATABASE {database}")
    for database in ("bench_plain", "bench_captured"):
        _postgres_writer(server, database)([TABLE_SQL])
    bare = _timed_workload(_postgres_writer(server, "bench_plain"), rows)
    with tempfile.TemporaryDirectory() as work:
        url = server.url("bench_captured") + "?capture=trigger"
        written, applied = _captured_run(
            Path(work), url, _postgres_writer(server, "bench_captured"), rows
        )
    return bare, written, applied


def _report(product: str, rows: int, bare: float, written: float, applied: float) -> None:
    changes = 2 * rows
    print(
        f"{product}: {changes} changes; writer {bare:.1f} s without triggers, {written:.1f} s"
        f" with them ({written / bare - 1:+.0%}); pipeline {applied:.1f} s"
        f" ({changes / applied:,.0f} changes/s); load {os.getloadavg()}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--products", default="sqlite,postgres")
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()}")
    products = args.products.split(",")
    if "sqlite" in products:
        _report("SQLite", args.rows, *sqlite(args.rows))
    if "postgres" in products:
        with running_postgres() as server:
            _report("PostgreSQL", args.rows, *postgres(server, args.rows))


if __name__ == "__main__":
    main()
