"""Changes per second and peak memory of one huge transaction through the buffer.

Feeds one transaction of N small row changes through ``cdc_core.TransactionBuffer`` with a
memory budget, consumes the committed output (checking every change comes back in order),
and prints changes/s and the process's peak RSS (``resource.getrusage``). The transaction
far exceeds the budget, so nearly all of it spills to disk and streams back at commit.

    python -m bench.bench_buffer [--changes 10000000] [--budget-mb 256] [--buffer-mb M]

``--budget-mb`` is the limit the whole process's peak RSS must stay under; the buffer gets
``--buffer-mb`` of it (default: the budget less the interpreter's RSS at start and a 32 MB
margin for I/O buffers and the objects in flight), because the buffer is not the only thing
in the process.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from cdc_core.buffer.transaction_buffer import BufferConfig, TransactionBuffer
from cdc_core.capture.events import Begin, Commit, CommittedTransaction, RowChange
from cdc_core.capture.position import Position

MB = 1 << 20
MARGIN_MB = 32


def rss_mb() -> float:
    """Current resident set size of this process, in MB (Linux)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / MB


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MB (ru_maxrss is KB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def feed_one_transaction(buffer: TransactionBuffer, changes: int) -> CommittedTransaction:
    """Feed Begin, ``changes`` small inserts and Commit; returns the committed transaction."""
    buffer.feed(Begin("big", Position(1, "1")))
    for i in range(changes):
        row = {"id": i, "qty": i % 100, "note": "x"}
        buffer.feed(RowChange("big", Position(i + 2, str(i + 2)), "c", "s.orders", (i,), row))
    (committed,) = buffer.feed(Commit("big", Position(changes + 2, "end"), datetime.now(UTC)))
    return committed


def consume(committed: CommittedTransaction) -> int:
    """Read every change back, checking order; returns the count."""
    count = 0
    for change in committed.changes:
        if change.seq != count or change.change.locator != (count,):
            raise SystemExit(f"FAIL: change {count} came back out of order")
        count += 1
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=1_000_000)
    parser.add_argument("--budget-mb", type=int, default=256)
    parser.add_argument("--buffer-mb", type=int, default=None)
    parser.add_argument("--spill-dir", type=Path, default=None)
    args = parser.parse_args()
    baseline = rss_mb()
    buffer_mb = args.buffer_mb or int(args.budget_mb - baseline - MARGIN_MB)
    with tempfile.TemporaryDirectory(dir=args.spill_dir) as directory:
        buffer = TransactionBuffer(BufferConfig(buffer_mb * MB, Path(directory)))
        start = time.perf_counter()
        committed = feed_one_transaction(buffer, args.changes)
        fed = time.perf_counter()
        spilled_mb = sum(p.stat().st_size for p in Path(directory).iterdir()) / MB
        count = consume(committed)
        done = time.perf_counter()
    if count != args.changes:
        raise SystemExit(f"FAIL: {count} changes came back, {args.changes} went in")
    report(args, baseline, buffer_mb, spilled_mb, (fed - start, done - fed))


def report(
    args: argparse.Namespace,
    baseline: float,
    buffer_mb: int,
    spilled_mb: float,
    seconds: tuple[float, float],
) -> None:
    feed_s, read_s = seconds
    peak = peak_rss_mb()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    print(f"changes: {args.changes:,} in one transaction; buffer budget {buffer_mb} MB")
    print(f"feed:    {feed_s:8.1f} s  {args.changes / feed_s:10,.0f} changes/s")
    print(f"commit:  {read_s:8.1f} s  {args.changes / read_s:10,.0f} changes/s (read back)")
    print(f"total:   {feed_s + read_s:8.1f} s  {args.changes / (feed_s + read_s):10,.0f} changes/s")
    print(f"spilled: {spilled_mb:8.1f} MB on disk at commit")
    verdict = "PASS" if peak < args.budget_mb else "FAIL"
    print(
        f"peak RSS: {peak:.1f} MB (start {baseline:.1f} MB), limit {args.budget_mb} MB: {verdict}"
    )
    if verdict == "FAIL":
        raise SystemExit(1)


if __name__ == "__main__":
    main()
