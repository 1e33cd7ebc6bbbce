"""A lake on S3 (moto's server on loopback) against the same lake on local disk, whole commands
timed as a user runs them, and what each S3 validation asks of the store.

Starts a private MariaDB server and moto's S3 server (``tests/private_servers.py``,
``tests/object_store/s3_server.py``), fills a table with M rows (``INSERT ... SELECT`` from
the Sequence engine), then for each lake:

1. ``cdc run --until-caught-up``: the initial load (rows/s);
2. ``validate`` with the local engine, best of ``--repeat`` (rows/s);
3. ``validate --incremental`` once to store the state, ``--changes`` updates of the newest
   rows (the usual shape: recent rows change) carried by the pipeline, then the incremental
   run timed (on S3: how many of the mirror's data files it fetched).

Requests and bytes are counted from moto's request log (one line per HTTP request, with the
response's size), so a user can price a validation on a real store. A loopback emulator has
none of a real store's latency: the times are a floor, the request counts are not.

    python -m bench.bench_object_store [--rows 1000000] [--repeat 2] [--changes 1000]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cdc_core.lake.layout import LakeTable
from cdc_core.lake_location import LakeLocation
from tests.cli_runs import CLI, ROOT, write_config
from tests.object_store.s3_server import MotoS3Server
from tests.private_servers import (
    LOOPBACK,
    MariaDBServer,
    _start_on_free_port,
    running_mariadb,
)

TABLE = "bench.snap"
CREATE = """CREATE TABLE snap (id INT PRIMARY KEY, qty INT, price DECIMAL(10,2),
  name VARCHAR(40), created DATETIME(6))"""
FILL = """INSERT INTO snap SELECT seq, seq % 1000, seq / 7, CONCAT('name-', seq),
  '2026-01-01' + INTERVAL seq SECOND FROM seq_1_to_{rows}"""
_REQUEST = re.compile(
    r"^METER (\w+) (\S+) (\d+) (\S*)$", re.MULTILINE
)  # tests.object_store.metered_moto


class MeteredS3Server(MotoS3Server):
    """moto's S3 server logging each request's method, status and bytes sent back."""

    def _argv(self) -> list[str]:
        return [sys.executable, "-m", "tests.object_store.metered_moto", LOOPBACK, str(self.port)]

    def _environment(self) -> dict[str, str]:
        return {**os.environ, "PYTHONPATH": str(ROOT)}


@dataclass(frozen=True, slots=True)
class Requests:
    """The store's requests in a span of its log: counts by method, and bytes sent back."""

    by_method: Counter[str]
    bytes_out: int
    mirror_files: int  # the mirror's data files fetched
    gets: Counter[str]  # GETs by what they read: Delta logs, data files, replcheck's own

    def __str__(self) -> str:
        methods = ", ".join(f"{m} {n}" for m, n in sorted(self.by_method.items()))
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.gets.items()))
        return (
            f"{sum(self.by_method.values())} requests ({methods}; GETs of {kinds}),"
            f" {self.bytes_out:,} bytes read, {self.mirror_files} mirror data files fetched"
        )


@contextlib.contextmanager
def counted(server: MotoS3Server) -> Iterator[list[Requests]]:
    """The requests the server logs while the block runs (the list gets one item)."""
    start = server.log_path.stat().st_size
    found: list[Requests] = []
    yield found
    time.sleep(0.2)  # the server's last lines reach its log
    with server.log_path.open("rb") as log:
        log.seek(start)
        text = log.read().decode("utf-8", "replace")
    methods, gets = Counter[str](), Counter[str]()
    read, mirror = 0, set()
    for method, _, size, path in _REQUEST.findall(text):
        methods[method] += 1
        if method != "GET":
            continue
        read += int(size)
        gets[_kind(path)] += 1
        if "/mirror/" in path and path.endswith(".parquet"):
            mirror.add(path)
    found.append(Requests(methods, read, len(mirror), gets))


def _kind(path: str) -> str:
    """What a GET read: a Delta log (or its listing), a data file, or replcheck's own."""
    if "_delta_log" in path:
        return "Delta logs"
    return "data files" if path.endswith(".parquet") else "other"


def _run(*args: str) -> float:
    began = time.perf_counter()
    done = subprocess.run([*CLI, *args], cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode not in (0, 1):
        raise SystemExit(f"replcheck {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return time.perf_counter() - began


def _fill(server: MariaDBServer, rows: int) -> None:
    with contextlib.closing(server.connect(None)) as conn, conn.cursor() as cur:
        cur.execute("CREATE DATABASE bench")
        cur.execute("USE bench")
        cur.execute(CREATE)
        cur.execute(FILL.format(rows=rows))
        conn.commit()


def _config(work: Path, server: MariaDBServer, lake: str | None) -> Path:
    config = write_config(work, server.url("bench"), [TABLE], compared=(TABLE, TABLE))
    if lake is None:
        return config
    local = f"  lake: {{lake: {json.dumps(str(work / 'lake'))}}}"
    text = config.read_text(encoding="utf-8").replace(local, f"  lake: {{lake: {lake}}}")
    config.write_text(text, encoding="utf-8")
    return config


def _validate(config: Path, out: Path, *extra: str) -> float:
    return _run("validate", "--config", str(config), "--out", str(out), *extra)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--changes", type=int, default=1_000)
    args = parser.parse_args()
    print(f"{platform.node()}: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
    moto = _start_on_free_port(MeteredS3Server)
    assert isinstance(moto, MeteredS3Server)
    os.environ.update(moto.environment())
    try:
        with running_mariadb() as server, tempfile.TemporaryDirectory() as work:
            _fill(server, args.rows)
            lakes = {"local disk": None, "S3 (moto)": f"s3://{moto.create_bucket()}/lake"}
            for name, lake in lakes.items():
                _measure(name, Path(work) / name.split()[0], server, moto, lake, args)
    finally:
        moto.stop()
    print(f"load average after: {os.getloadavg()[0]:.2f}")


def _measure(
    name: str,
    work: Path,
    server: MariaDBServer,
    moto: MotoS3Server,
    lake: str | None,
    args: argparse.Namespace,
) -> None:
    config = _config(work, server, lake)
    with counted(moto) as load:
        seconds = _run(
            "cdc", "run", "--config", str(config), "--pipeline", "p", "--until-caught-up"
        )
    print(f"{name}: initial load of {args.rows:,} rows in {seconds:.1f} s"
          f" = {args.rows / seconds:,.0f} rows/s{_of(lake, load)}")  # fmt: skip
    times = []
    for attempt in range(args.repeat):
        with counted(moto) as full:
            times.append(_validate(config, work / f"full-{attempt}"))
    best = min(times)
    print(f"{name}: validate (local engine) best of {args.repeat}: {best:.1f} s"
          f" = {args.rows / best:,.0f} rows/s{_of(lake, full)}")  # fmt: skip
    _validate(config, work / "incremental-0", "--incremental")
    with contextlib.closing(server.connect("bench")) as conn, conn.cursor() as cur:
        cur.execute(f"UPDATE snap SET qty = qty + 1 WHERE id > {args.rows - args.changes}")
        conn.commit()
    _run("cdc", "run", "--config", str(config), "--pipeline", "p", "--until-caught-up")
    with counted(moto) as incremental:
        seconds = _validate(config, work / "incremental-1", "--incremental")
    files = len(_mirror(lake, work).file_uris())
    print(f"{name}: validate --incremental after {args.changes:,} newest rows changed:"
          f" {seconds:.1f} s{_of(lake, incremental)} of the mirror's {files}")  # fmt: skip


def _mirror(lake: str | None, work: Path) -> Any:
    """The bench table's mirror (a Delta table)."""
    where = LakeLocation.from_config(lake or str(work / "lake"), {})
    return LakeTable(where, TABLE).mirror_at.open_delta()


def _of(lake: str | None, found: list[Requests]) -> str:
    return f"; {found[0]}" if lake is not None else ""


if __name__ == "__main__":
    main()
