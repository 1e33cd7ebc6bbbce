"""Soak: SIGKILL ``replcheck cdc run`` many times over a long generated log, check the lake.

The test suite's version (tests/cdc_core/pipeline/test_pipeline_sigkill.py) uses 20 kill points;
this runs as many as asked over a bigger log, and prints what it did.

    python -m bench.soak_pipeline_sigkill [--kills 200] [--transactions 20000] [--seed 1]
        [--store s3]

``--store s3`` writes the lake into a bucket of moto's S3 server on loopback (started here,
as the tests start it); the pipeline's state directory stays local.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from tests.cdc_core.kill_loop import kill_loop
from tests.object_store.s3_server import lake_in


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=200)
    parser.add_argument("--transactions", type=int, default=20_000)
    parser.add_argument("--pace", type=int, default=3_000, help="log entries per second")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--store", choices=["s3"], help="the lake in an object store")
    args = parser.parse_args()
    url = (
        f"synthetic:///?seed={args.seed}&transactions={args.transactions}&tables=4"
        f"&initial_rows=5000&concurrency=8&big_every=5000&big_changes=20000&pace={args.pace}"
    )
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as work, lake_in(args.store) as store:
        report = kill_loop(
            Path(work), url, kills=args.kills, seed=args.seed, max_alive_s=4.0, store=store
        )
    elapsed = time.monotonic() - started
    print(f"source: {url}; lake: {'a bucket of moto S3' if store else 'local disk'}")
    print(f"{report.live_kills} kills of a running pipeline, {report.runs} runs, {elapsed:.0f} s")
    print("lake equals the reference model" if not report.mismatches else report.mismatches)
    raise SystemExit(1 if report.mismatches else 0)


if __name__ == "__main__":
    main()
