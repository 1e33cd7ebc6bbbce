"""Events per second through the CDC core, end to end, from a generated source.

Three passes over the same synthetic log (``connectors.synthetic``: interleaved
transactions, rollbacks, partial rollbacks, minimal row images that must be rebuilt):

- ``generate``: producing the raw log alone (the source's own cost, to subtract);
- ``buffer+rebuild``: the transaction buffer and the full-width rebuild (row image store
  on LMDB), no lake;
- ``pipeline``: ``Pipeline.run_until_caught_up`` into a Delta lake (changelog appends,
  mirror MERGEs, progress and checkpoints), with the initial load.

    python -m bench.bench_pipeline [--transactions 20000] [--tables 4] [--batch 20000]
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

from cdc_core.buffer.transaction_buffer import BufferConfig, TransactionBuffer
from cdc_core.capture.filters import TableFilter
from cdc_core.pipeline.loop import Pipeline, PipelineConfig
from cdc_core.rebuild.full_width import RebuildConfig, Rebuilder
from cdc_core.rebuild.image_store import RowImageStore
from connectors.synthetic.log_reader import SyntheticSource
from connectors.synthetic.workload import KEY, Workload, WorkloadSpec


def _generate(workload: Workload) -> tuple[float, int]:
    started = time.perf_counter()
    count = sum(1 for _ in workload.iter_log())
    return time.perf_counter() - started, count


def _buffer_and_rebuild(workload: Workload, work: Path) -> tuple[float, int]:
    started = time.perf_counter()
    buffer = TransactionBuffer(BufferConfig(256 << 20, work / "spill"))
    events = 0
    keys = dict.fromkeys(workload.spec.table_names, KEY)
    with RowImageStore(work / "images") as store:
        for table in workload.spec.table_names:
            for seq, row in enumerate(workload.initial_rows(table)):
                store.put(table, (row["id"],), workload.snapshot_position(), row, seq)
        rebuilder = Rebuilder(store, RebuildConfig(key_columns=keys))
        for change, _ in workload.iter_log():
            for transaction in buffer.feed(change):
                events += sum(1 for _ in rebuilder.iter_rebuilt(transaction))
    return time.perf_counter() - started, events


def _pipeline(workload: Workload, work: Path, batch: int) -> tuple[float, int]:
    source = SyntheticSource(workload)
    config = PipelineConfig(
        "bench",
        work / "lake",
        work / "state",
        TableFilter.of_tables(workload.spec.table_names),
        batch_max_events=batch,
        batch_max_seconds=30.0,
    )
    pipeline = Pipeline(config, source, source)
    started = time.perf_counter()
    pipeline.run_until_caught_up()
    return time.perf_counter() - started, pipeline.metrics().events


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transactions", type=int, default=20_000)
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--batch", type=int, default=20_000)
    args = parser.parse_args()
    spec = WorkloadSpec(
        seed=1, transactions=args.transactions, tables=args.tables, initial_rows=2_000,
        max_changes=10, concurrency=8, rollback_rate=0.05, partial_rollback_rate=0.05,
    )  # fmt: skip
    workload = Workload(spec)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    print(f"workload: {spec}")
    with tempfile.TemporaryDirectory() as directory:
        work = Path(directory)
        for name, (seconds, events) in (
            ("generate", _generate(workload)),
            ("buffer+rebuild", _buffer_and_rebuild(workload, work / "core")),
            ("pipeline", _pipeline(workload, work / "pipe", args.batch)),
        ):
            print(
                f"{name:>15}: {events:>9,} items in {seconds:7.2f} s = {events / seconds:>9,.0f}/s"
            )


if __name__ == "__main__":
    main()
