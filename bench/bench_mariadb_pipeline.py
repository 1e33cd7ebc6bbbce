"""MariaDB into the lake: binlog events/s end to end vs the library's decoding, and the time to
replicate a large initial snapshot.

Starts a private MariaDB server (``tests/private_servers.py``), then:

1. End to end: loads an empty 10-column table (``bench.bench_binlog``'s), writes N inserts and
   N updates in transactions of 1,000 rows, and reads that same binlog range three ways:
   mysql-replication alone (``BinLogStreamReader`` decoding every rows event), the log
   reader alone (``MariaDBLogReader.iter_changes``), and the whole pipeline
   (``Pipeline.run_until``: reader, transaction buffer, full-width rebuild with the row
   image store, Delta changelog + mirror MERGE, checkpoints).
2. Initial snapshot: fills a table with M rows (``INSERT ... SELECT`` from the Sequence
   engine) and times a fresh pipeline loading it into the lake (consistent snapshot, row
   image store, changelog and mirror).

    python -m bench.bench_mariadb_pipeline [--rows 50000] [--snapshot-rows 1000000]
        [--image FULL|MINIMAL] [--profile FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import platform
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.bench_binlog import read_with_library, read_with_reader, write_workload
from cdc_core.capture.filters import TableFilter
from cdc_core.pipeline.loop import Pipeline, PipelineConfig
from connectors.registry import log_source_for
from tests.private_servers import MariaDBServer, running_mariadb

SNAPSHOT_TABLE = """CREATE TABLE bench.snap (id INT PRIMARY KEY, qty INT, price DECIMAL(10,2),
  name VARCHAR(40), created DATETIME(6), ratio DOUBLE, code CHAR(8))"""


def _pipeline(server: MariaDBServer, table: str, work: Path) -> tuple[Pipeline, Any]:
    source = log_source_for(server.url("bench") + "?heartbeat_s=0.2", None, [table])
    tables = TableFilter.of_tables([table])
    config = PipelineConfig("bench", work / "lake", work / "state", tables)
    config = replace(config, fetch_missing=source.fetch_missing)
    return Pipeline(config, source.reader, source.snapshots), source


def timed(label: str, unit: str, function: Callable[[], int]) -> float:
    began, cpu = time.perf_counter(), time.process_time()
    count = function()
    seconds, cpu = time.perf_counter() - began, time.process_time() - cpu
    # CPU seconds too: this process's own work, steadier than the wall clock on a shared VM.
    print(
        f"{label}: {count:,} {unit} in {seconds:.2f} s = {count / seconds:,.0f} {unit}/s"
        f" ({cpu:.2f} CPU s)"
    )
    return seconds


def end_to_end(server: MariaDBServer, rows: int, work: Path, profile: str | None) -> None:
    """Part 1: the same binlog range read by the library, the reader and the pipeline."""
    write_workload(server, 0)  # creates the (empty) table
    pipeline, source = _pipeline(server, "bench.b", work)
    with contextlib.ExitStack() as stack:
        stack.callback(source.reader.close)
        pipeline.run_until_caught_up()  # its (empty) initial load: the lake starts here
        start = source.reader.end_position()
        write_workload(server, rows, create=False)
        end = source.reader.end_position()
        events = 2 * rows
        library = timed(
            "library (mysql-replication decoding)",
            "rows",
            lambda: read_with_library(server, start, end),
        )
        reader = timed(
            "log reader (iter_changes)", "rows", lambda: read_with_reader(source.reader, start, end)
        )
        profiler = cProfile.Profile() if profile else None

        def run() -> int:
            if profiler is not None:
                profiler.enable()
            pipeline.run_until(end)
            if profiler is not None:
                profiler.disable()
            return events

        ours = timed("pipeline (binlog -> Delta lake, run_until)", "events", run)
        if profiler is not None and profile is not None:
            profiler.dump_stats(profile)
    print(f"reader / library = {reader / library:.2f}; pipeline / library = {ours / library:.2f}")


def initial_snapshot(server: MariaDBServer, rows: int, work: Path) -> None:
    """Part 2: a fresh pipeline loads a table of ``rows`` rows into the lake."""
    with contextlib.closing(server.connect(None)) as connection, connection.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS bench")
        cur.execute(SNAPSHOT_TABLE)
        cur.execute(
            "INSERT INTO bench.snap SELECT seq, seq % 97, seq / 4, CONCAT('name ', seq),"
            f" '2024-05-01 10:00:00.123456', seq / 7, 'c' FROM bench.seq_1_to_{rows}"
        )
    pipeline, source = _pipeline(server, "bench.snap", work)
    with contextlib.closing(source.reader):
        timed(
            "initial snapshot into the lake",
            "rows",
            lambda: (pipeline.run_until_caught_up(), rows)[1],
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--snapshot-rows", type=int, default=1_000_000)
    parser.add_argument("--image", default="FULL", choices=["FULL", "MINIMAL"])
    parser.add_argument("--profile", help="write a cProfile of the pipeline run here")
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, python {platform.python_version()}")
    with running_mariadb(args.image) as server, tempfile.TemporaryDirectory() as work:
        if args.rows:
            end_to_end(server, args.rows, Path(work) / "e2e", args.profile)
        if args.snapshot_rows:
            initial_snapshot(server, args.snapshot_rows, Path(work) / "snapshot")


if __name__ == "__main__":
    main()
