"""Soak the generative differential tester on one source kind: many seeds, one private
server, one warm Spark session, a fresh database per seed.

    PYTHONPATH=. python bench/soak_differential.py --source mariadb-full --seeds 200 [--start 0]
        [--size 24] [--no-validator] [--no-shrink] [--keep DIR] [--resync]
        [--vocabulary catalog] [--store s3]

``--resync`` (MariaDB sources): each seed drifts behind the binlog's back, is re-synced
with ``validate`` and ``resync --apply`` mid-workload, and goes on (issue 37, item 1).
``--vocabulary catalog``: the tables' column kinds are the type matrix's, which cover the
servers' catalogs (``tests/generative/sql/vocabulary.py``; issue 36, "Method").
``--store s3``: each seed's lake is a prefix of a bucket of moto's S3 server on loopback
(started here), judged by the local engine (issue 39).

Prints each failure (seed, problems, shrunk SQL) as it happens, then a summary: seeds run
and failed, statements, transactions, DDL statements, kills, statements the server refused,
and seconds per seed. Exits 1 if any seed failed.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.generative.sql.runner import Run, check_seed, tally
from tests.generative.sql.vocabulary import VOCABULARIES
from tests.generative.sql.workload import SIZE, SOURCES, generate
from tests.live_servers import MYSQL_PASSWORD, MYSQL_URL, live_mysql
from tests.object_store.s3_server import lake_in
from tests.private_servers import running_mariadb, running_postgres


@contextlib.contextmanager
def _server(source: str) -> Iterator[Any]:
    kind = SOURCES[source]
    if kind.live:
        server = live_mysql()
        if server is None:
            raise SystemExit(f"--source {source} needs {MYSQL_URL} (and {MYSQL_PASSWORD})")
        yield server
    elif kind.product == "postgres":
        with running_postgres() as server:
            yield server
    else:
        with running_mariadb(kind.row_image) as server:
            yield server


def _spark(enabled: bool) -> Any:
    if not enabled:
        return None
    from validator.engines.sides.spark.session import build_spark_session

    return build_spark_session(app_name="replcheck-soak", master="local[2]")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", choices=sorted(SOURCES), required=True)
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--size", type=int, default=SIZE, help="items per workload")
    parser.add_argument("--no-validator", action="store_true", help="independent judge only")
    parser.add_argument("--no-shrink", action="store_true")
    parser.add_argument("--keep", type=Path, help="copy each failing run's directory here")
    parser.add_argument("--resync", action="store_true", help="drift, re-sync, then go on")
    parser.add_argument("--vocabulary", choices=VOCABULARIES, default="default",
                        help="the column kinds: hand-picked, or the servers' catalogs")  # fmt: skip
    parser.add_argument("--store", choices=["s3"], help="the lakes in an object store")
    args = parser.parse_args(argv)
    failed: list[int] = []
    started = time.monotonic()
    spark = _spark(not args.no_validator)
    with (
        _server(args.source) as server,
        tempfile.TemporaryDirectory() as root,
        lake_in(args.store) as store,
    ):
        run = Run(server, spark, Path(root), keep=args.keep, store=store)
        seeds = range(args.start, args.start + args.seeds)
        try:
            for seed in seeds:
                clock = time.monotonic()
                failure = check_seed(
                    seed,
                    args.source,
                    run,
                    size=args.size,
                    minimize=not args.no_shrink,
                    resync=args.resync,
                    vocabulary=args.vocabulary,
                )
                outcome = "ok" if failure is None else "FAILED"
                print(f"seed {seed}: {outcome} in {time.monotonic() - clock:.1f} s", flush=True)
                if failure is not None:
                    failed.append(seed)
                    print(failure.report(), flush=True)
        except KeyboardInterrupt:  # stopped early (Ctrl-C, SIGINT): the summary of those run
            seeds = range(args.start, seed)
            counted = generate(
                seed, args.source, args.size, resync=args.resync, vocabulary=args.vocabulary
            )
            run.totals -= tally(counted)  # counted, not run
            print(f"interrupted in seed {seed}", flush=True)
    elapsed, totals = time.monotonic() - started, run.totals
    print(
        f"{args.source} ({args.vocabulary} vocabulary{', S3 lake' if args.store else ''})"
        f" seeds {seeds.start}..{seeds.stop - 1}:"
        f" {len(seeds) - len(failed)} of"
        f" {len(seeds)} passed; {totals['statements']} statements, {totals['transactions']}"
        f" transactions, {totals['ddl']} DDL statements, {totals['kills']} kills,"
        f" {totals['drift_items']} drift items, {totals['resynced_keys']} keys re-synced,"
        f" {totals['errors']} statements refused by the server; {elapsed:.0f} s in all,"
        f" {elapsed / max(1, len(seeds)):.1f} s per seed; failed seeds: {failed or 'none'}",
        flush=True,
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
