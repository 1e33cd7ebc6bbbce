"""Changes per second from PostgreSQL's logical replication stream, end to end.

Starts a private PostgreSQL cluster (``tests/private_servers.py``), creates a 10-column
table, lets a pipeline load it (empty) so its slot exists, writes N inserts and N updates in
transactions of 1,000 rows, then times two reads of the same WAL range:

- reader: ``PostgresLogReader.iter_changes`` yielding raw changes until idle at the end
  (decoding pgoutput and every value);
- pipeline: ``Pipeline.run_until_caught_up`` into a Delta lake in a temporary directory
  (reader + transaction buffer + full-width rebuild + lake writes + checkpoints).

``--streamed`` sets the walsender's ``logical_decoding_work_mem`` to 64kB, so every
transaction is streamed while in progress.

    python -m bench.bench_postgres_pipeline [--rows 50000] [--streamed]
"""

from __future__ import annotations

import argparse
import contextlib
import platform
import tempfile
import time
from pathlib import Path

from cdc_core.capture.filters import TableFilter
from cdc_core.capture.position import Position
from cdc_core.capture.source import Idle
from cdc_core.pipeline.loop import Pipeline, PipelineConfig
from connectors.postgres.log_reader import PostgresLogReader
from connectors.postgres.source_config import PostgresSourceConfig
from connectors.registry import log_source_for
from tests.private_servers import PostgresServer, running_postgres

TABLE = """CREATE TABLE b (id int PRIMARY KEY, qty int, price numeric(10,2), name varchar(40),
  note text, created timestamp(6), changed timestamptz, ratio double precision,
  flag boolean, code char(8))"""


def write_workload(server: PostgresServer, rows: int) -> None:
    """N inserts then N updates, 1,000 rows per transaction."""
    with contextlib.closing(server.connect("bench")) as connection:
        for first in range(0, rows, 1000):
            connection.execute(
                "INSERT INTO b SELECT g, g %% 97, g + 0.25, 'name ' || g, 'note ' || g,"
                " '2024-05-01 10:00:00.123456', '2024-05-01 10:00:00.5+02', g / 7.0, true,"
                " 'c' || (g %% 1000) FROM generate_series(%s::int, %s::int) AS g",
                (first, min(first + 1000, rows) - 1),
            )
        for first in range(0, rows, 1000):
            connection.execute(
                "UPDATE b SET qty = qty + 1, note = 'changed' WHERE id >= %s AND id < %s",
                (first, first + 1000),
            )


def read_with_reader(
    server: PostgresServer, start: Position, end: Position, mem: str | None
) -> int:
    """Raw row changes the log reader yields from ``start`` until idle at ``end``."""
    config = PostgresSourceConfig(
        server.url("bench"), ("b",), slot="bench_reader", idle_s=0.2, decoding_work_mem=mem
    )
    reader = PostgresLogReader(config)
    reader.resume_transactions(())
    count = 0
    with contextlib.closing(reader.iter_changes(start)) as changes:
        for item in changes:
            if isinstance(item, Idle):
                if item.position is not None and item.position >= end:
                    break
            elif type(item).__name__ == "RowChange":
                count += 1
    reader.close()
    return count


def _lake_events(lake: Path) -> int:
    """Events in the lake's changelog of the table (the initial load of it was empty)."""
    from deltalake import DeltaTable

    from cdc_core.lake.layout import LakeTable

    return int(DeltaTable(str(LakeTable(lake, "public.b").changelog)).to_pyarrow_table().num_rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--streamed", action="store_true")
    args = parser.parse_args()
    mem = "64kB" if args.streamed else None
    with running_postgres() as server, tempfile.TemporaryDirectory() as work:
        with contextlib.closing(server.connect("postgres")) as admin:
            admin.execute("CREATE DATABASE bench")
        with contextlib.closing(server.connect("bench")) as connection:
            connection.execute(TABLE)
            connection.execute(
                "SELECT pg_create_logical_replication_slot('bench_reader', 'pgoutput')"
            )
        query = "?idle_s=0.2" + (f"&decoding_work_mem={mem}" if mem else "")
        source = log_source_for(server.url("bench") + query, None, ["public.b"])
        config = PipelineConfig(
            "bench", Path(work) / "lake", Path(work) / "state", TableFilter.of_tables(["public.b"])
        )
        pipeline = Pipeline(config, source.reader, source.snapshots)
        pipeline.run_until_caught_up()  # loads the empty table; creates the pipeline's slot
        start = source.reader.end_position()
        began = time.monotonic()
        write_workload(server, args.rows)
        written = time.monotonic() - began
        end = source.reader.end_position()

        began = time.monotonic()
        changes = read_with_reader(server, start, end, mem)
        reader_s = time.monotonic() - began

        began, cpu = time.monotonic(), time.process_time()
        pipeline.run_until(end)
        pipeline_s, cpu = time.monotonic() - began, time.process_time() - cpu
        events = _lake_events(Path(work) / "lake")
        source.reader.close()
    if events != 2 * args.rows or changes != 2 * args.rows:
        raise SystemExit(f"expected {2 * args.rows} changes, read {changes}, lake has {events}")

    print(f"machine: {platform.machine()}, Python {platform.python_version()}")
    print(f"workload: {2 * args.rows} row changes in {written:.1f} s, streamed={args.streamed}")
    print("| read | changes | time | changes/s |")
    print("|---|---:|---:|---:|")
    print(f"| log reader alone | {changes:,} | {reader_s:.1f} s | {changes / reader_s:,.0f} |")
    print(
        f"| pipeline into the lake | {events:,} | {pipeline_s:.1f} s | {events / pipeline_s:,.0f} |"
    )
    # This process's own CPU seconds: steadier than the wall clock on a shared VM.
    print(f"pipeline CPU: {cpu:.2f} s ({events / cpu:,.0f} changes per CPU second)")


if __name__ == "__main__":
    main()
