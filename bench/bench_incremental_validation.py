"""Incremental validation against a full one: a MariaDB table and the lake its pipeline writes.

Starts a private MariaDB server (``tests/private_servers.py``), loads ``--rows`` generated
rows (the table of ``bench/bench_vs_reladiff.py``), builds the lake with
``replcheck cdc run --until-caught-up`` and validates it once with ``--incremental`` (a first
run is full and stores the digests). Then:

1. ``--changed`` share of the rows is updated at the source through the binlog and the
   pipeline carries the changes into the lake (``cdc run --until-caught-up`` again);
2. drift the pipeline never sees is made with ``sql_log_bin = 0``: ``--drift`` rows beside
   logged changes (each in a leaf the changelog shows changed: found at once) and one row
   in a leaf no logged change touches (found only when the sweep reaches its leaf);
3. ``replcheck validate --incremental`` and a full ``replcheck validate`` (no state) run one
   after the other, each a subprocess (Spark's start-up included, with ``--engine hybrid``;
   ``auto`` chooses the local engine, no Spark), and are scored;
4. ``replcheck validate --incremental`` runs again until the unlogged change in an unchanged
   leaf is found, which must happen within ``ceil(1 / --sweep-share)`` runs.

    python -m bench.bench_incremental_validation [--rows 1000000] [--changed 0.001]
        [--drift 3] [--sweep-share 0.1] [--depth 0] [--workdir DIR] [--engine hybrid|auto]

Each figure is printed with the load average (``os.getloadavg``) when it was taken.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import random
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.bench_lake_validation import _cli, _env, _load, build_lake, compile_checkout
from bench.bench_vs_reladiff import (
    DATABASE,
    SEED,
    TABLE,
    load_mariadb,
    source_key,
    timed,
    write_rows,
)
from cdc_core.lake.layout import LakeTable
from connectors.pushdown import RangeLeaves
from tests.private_servers import MariaDBServer, running_mariadb
from validator.config import ValidationSettings
from validator.incremental.changed_leaves import leaf_of
from validator.incremental.state import read_state, state_path
from validator.incremental.sweep import Stripes, source_stripes

Finding = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Validation:
    """One ``replcheck validate`` run."""

    seconds: float
    findings: set[Finding]
    coverage: dict[str, Any] | None
    phases: str
    load: str


def _config(workdir: Path, server: MariaDBServer, args: argparse.Namespace, keep: bool) -> Path:
    path = workdir / f"validate-{'incremental' if keep else 'full'}.yaml"
    path.write_text(
        f"connections:\n  src: {{url: {json.dumps(server.url(DATABASE))}}}\n"
        f"  lake: {{lake: {json.dumps(str(workdir / 'lake'))}}}\n"
        f"comparisons:\n  - {{name: {TABLE}, source: {{connection: src, table: {TABLE}}},"
        f" target: {{connection: lake, table: {DATABASE}.{TABLE}}},"
        f" options: {{{f'depth: {args.depth}' if args.depth else ''}}}}}\n"
        f"validation: {{engine: {args.engine}, lake_wait_timeout_s: 120, max_reported_rows: 10000,"
        f" sweep_share: {args.sweep_share}}}\n",
        encoding="utf-8",
    )
    return path


def validate(workdir: Path, config: Path, name: str, incremental: bool) -> Validation:
    """``replcheck validate`` in its own process (``--incremental`` when asked)."""
    out = workdir / f"out-{name}"
    argv = _cli("validate", "--config", str(config), "--out", str(out))
    argv += ["--incremental"] if incremental else []
    seconds, _ = timed(argv, workdir / f"validate-{name}.log", _env())
    comparison = json.loads((out / "result.json").read_text())["comparisons"][0]
    if comparison.get("error"):
        raise RuntimeError(f"{name}: {comparison['error']}")
    findings = {(d["kind"], d["key"][0]) for d in comparison["differences"]}
    phases = ", ".join(f"{k} {v:.1f} s" for k, v in comparison.get("timings", {}).items())
    return Validation(seconds, findings, comparison.get("coverage"), phases, _load())


def change_logged(server: MariaDBServer, rows: int, share: float) -> list[int]:
    """Update ``share`` of the rows through the binlog, in transactions of 100; their keys."""
    keys = [source_key(i) for i in random.Random(SEED + 5).sample(range(rows), int(rows * share))]
    connection = server.connect(DATABASE)
    with contextlib.closing(connection), connection.cursor() as cursor:
        for start in range(0, len(keys), 100):
            chunk = ", ".join(map(str, keys[start : start + 100]))
            cursor.execute(
                f"UPDATE {TABLE} SET customer_id = customer_id + 1 WHERE id IN ({chunk})"
            )
            connection.commit()
    return keys


def drift_unlogged(server: MariaDBServer, updates: list[int]) -> None:
    """Change rows at the source with no binlog record."""
    connection = server.connect(DATABASE)
    with contextlib.closing(connection), connection.cursor() as cursor:
        cursor.execute("SET SESSION sql_log_bin = 0")
        for key in updates:
            cursor.execute(f"UPDATE {TABLE} SET amount = amount + 0.01 WHERE id = %s", (key,))
        connection.commit()


def pick_drift(
    scheme: RangeLeaves, logged: list[int], rows: int, count: int, share: float
) -> tuple[list[int], int]:
    """Keys beside logged changes (in the same leaf), and one key, as high as can be, in a
    leaf none touches and the sweep reaches only in the last run of its cycle (the last
    window of its stripe)."""
    changed = {leaf_of(k, scheme) for k in logged}
    beside = []
    for key in logged:
        other = key + 2
        if leaf_of(other, scheme) == leaf_of(key, scheme) and other not in logged:
            beside.append(other)
        if len(beside) == count:
            break
    parts = source_stripes(scheme, ValidationSettings().database_parallelism)
    stripes = Stripes.of(scheme.count, share, parts)
    starts = [scheme.count * i // stripes.parts for i in range(stripes.parts)]
    last_window = (stripes.runs - 1) * stripes.step
    for index in range(rows - 1, -1, -1):
        lone = source_key(index)
        leaf = leaf_of(lone, scheme)
        offset = leaf - max(s for s in starts if s <= leaf)  # in its stripe
        if offset >= last_window and leaf not in changed:
            return beside, lone
    raise RuntimeError("no unchanged leaf in the last sweep window")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--changed", type=float, default=0.001)
    parser.add_argument("--drift", type=int, default=3)
    parser.add_argument("--sweep-share", type=float, default=0.1)
    parser.add_argument("--depth", type=int, default=0, help="0: the depth replcheck chooses")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--engine", default="hybrid", help="auto (local where it can), hybrid")
    args = parser.parse_args(argv)
    compile_checkout()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-incremental-"))
    workdir.mkdir(parents=True, exist_ok=True)
    with running_mariadb("FULL") as server:
        write_rows(workdir / "rows.tsv", args.rows)
        load_mariadb(server, workdir / "rows.tsv")
        print(f"lake built by cdc run in {build_lake(server, workdir):.1f} s ({_load()})")
        keep, full = _config(workdir, server, args, True), _config(workdir, server, args, False)
        first = validate(workdir, keep, "first", incremental=True)
        print(f"first run ({first.coverage and first.coverage['mode']}): {first.seconds:.1f} s")
        state = read_state(state_path(LakeTable(workdir / "lake", f"{DATABASE}.{TABLE}"), TABLE))
        assert state is not None
        logged = change_logged(server, args.rows, args.changed)
        print(
            f"{len(logged):,} rows changed through the binlog; pipeline caught up in"
            f" {build_lake(server, workdir):.1f} s ({_load()})"
        )
        beside, lone = pick_drift(state.scheme, logged, args.rows, args.drift, args.sweep_share)
        drift_unlogged(server, [*beside, lone])
        incremental = validate(workdir, keep, "incremental-1", incremental=True)
        reference = validate(workdir, full, "full", incremental=False)
        report(args, incremental, reference, beside, lone)
        sweep(workdir, keep, args, lone, incremental)
    return 0


def report(
    args: argparse.Namespace,
    incremental: Validation,
    reference: Validation,
    beside: list[int],
    lone: int,
) -> None:
    expected = {("changed", str(k)) for k in [*beside, lone]}
    change_path = {("changed", str(k)) for k in beside}
    assert reference.findings == expected, reference.findings ^ expected
    assert change_path <= incremental.findings <= expected
    coverage = incremental.coverage or {}
    print(
        f"\n{args.rows:,} rows, {args.changed:.1%} changed through the log,"
        f" {len(expected)} unlogged changes ({len(change_path)} beside logged ones)\n"
    )
    print("| run | wall time | found | leaves re-hashed | when |")
    print("|---|---:|---|---|---|")
    rehashed = coverage.get("leaves_changed", 0) + coverage.get("leaves_swept", 0)
    total = rehashed + coverage.get("leaves_reused", 0)
    print(
        f"| incremental | {incremental.seconds:.1f} s | {len(incremental.findings)} of"
        f" {len(expected)} | {rehashed:,} of {total:,} | {incremental.load} |"
    )
    print(
        f"| full | {reference.seconds:.1f} s | {len(reference.findings)} of {len(expected)}"
        f" | all | {reference.load} |"
    )
    print(f"\nspeed-up: {reference.seconds / incremental.seconds:.1f}x")
    print(f"incremental phases: {incremental.phases}\nfull phases: {reference.phases}")


def sweep(
    workdir: Path, config: Path, args: argparse.Namespace, lone: int, first: Validation
) -> None:
    """Incremental runs until the unlogged change in an unchanged leaf is found."""
    promised = math.ceil(1 / args.sweep_share)
    wanted = ("changed", str(lone))
    run, found = 1, first
    while wanted not in found.findings:
        run += 1
        if run > promised:
            raise AssertionError(f"not found within the promised {promised} runs")
        found = validate(workdir, config, f"incremental-{run}", incremental=True)
        print(f"incremental run {run}: {found.seconds:.1f} s ({found.load})")
    print(
        f"the unlogged change in an unchanged leaf was found by incremental run {run}"
        f" (promised: within {promised})"
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
