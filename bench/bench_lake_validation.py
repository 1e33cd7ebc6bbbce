"""A MariaDB table against the lake its pipeline writes: the Spark, the hybrid and the local
engine, and the floor.

Starts a private MariaDB server (``tests/private_servers.py``), loads ``--rows`` generated
rows (the table of ``bench/bench_vs_reladiff.py``), builds the lake with
``replcheck cdc run --until-caught-up``, then changes ``--diffs`` rows at the source with
``sql_log_bin = 0`` (drift the pipeline never sees: rows deleted at the source are extra in
the lake, rows inserted are missing from it, rows updated are changed). Then it times, one
after the other, ``replcheck validate`` as a subprocess with ``engine: spark`` (the source
read into Spark) and ``engine: auto`` (the hybrid engine: MariaDB computes its own digests,
Spark the lake's), Spark start-up included (cold), and scores each run's findings against
the drift (``--engines``: ``auto`` is the local engine now, ``hybrid`` and ``spark`` name
theirs). Warm (``--warm``): the hybrid engine runs twice more as ``replcheck validate`` with
``spark.remote`` on a Spark Connect server started beforehand (its start timed apart,
``connect``), and twice in one process (``bench.lake_validation_phases``, ``phases``: where
a cold run's seconds go, and a second run in the session the first started); the local
engine runs twice in one process (``bench.lake_validation_local``, ``local``: the second
run is its warm figure). The floor is one MD5 pass over the source
table inside MariaDB (``CONCAT_WS`` of every column) plus reading the lake's mirror into
Arrow with ``deltalake``; the canonical digest pass (the hybrid engine's own SQL, on one
connection) is shown beside it.

    python -m bench.bench_lake_validation [--rows 200000] [--diffs 30] [--workdir DIR]
        [--engines spark,auto] [--warm phases,connect,local]

Each figure is printed with the load average (``os.getloadavg``) when it was taken.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.bench_vs_reladiff import (
    COLUMNS,
    DATABASE,
    SEED,
    TABLE,
    load_mariadb,
    make_row,
    source_key,
    timed,
    write_rows,
)
from cdc_core.lake.layout import LakeTable
from tests.private_servers import MariaDBServer, running_mariadb, running_spark_connect

ROOT = Path(__file__).resolve().parents[1]
Finding = tuple[str, str]


def _cli(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "validator.cli", *arguments]


PACKAGES = ("cdc_core", "connectors", "merkle", "reports", "validator")


def compile_checkout() -> None:
    """Byte-compile the checkout, as installing a wheel does: an editable checkout under
    ``PYTHONDONTWRITEBYTECODE`` compiles every module again in every run (0.3 s a run)."""
    import compileall

    for package in PACKAGES:
        compileall.compile_dir(ROOT / package, quiet=1)


def _env() -> dict[str, str]:
    """The checkout this file is in, ahead of any installed replcheck."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def _load() -> str:
    return "load average " + " ".join(f"{value:.2f}" for value in os.getloadavg())


def build_lake(server: MariaDBServer, workdir: Path) -> float:
    """``replcheck cdc run --until-caught-up`` into ``workdir/lake``; its wall seconds."""
    config = workdir / "pipeline.yaml"
    source = f"{server.url(DATABASE)}?server_id=7793&heartbeat_s=0.5"
    config.write_text(
        f"connections:\n  src: {{url: {json.dumps(source)}}}\n"
        f"  lake: {{lake: {json.dumps(str(workdir / 'lake'))}}}\n"
        f"pipelines:\n  - {{name: lake, source: src, target: lake, tables: [{DATABASE}.{TABLE}],"
        f" state_dir: {json.dumps(str(workdir / 'state'))}}}\n",
        encoding="utf-8",
    )
    argv = _cli("cdc", "run", "--config", str(config), "--pipeline", "lake", "--until-caught-up")
    seconds, code = timed(argv, workdir / "pipeline.log", _env())
    if code != 0:
        raise RuntimeError(f"the pipeline failed: see {workdir / 'pipeline.log'}")
    return seconds


def drift_source(server: MariaDBServer, rows: int, diffs: int) -> set[Finding]:
    """Change the source without the binlog; the findings a validation must report."""
    rng = random.Random(SEED + 3)
    picked = rng.sample(range(rows), 2 * (diffs // 3))
    deleted = [source_key(i) for i in picked[: diffs // 3]]
    updated = [source_key(i) for i in picked[diffs // 3 :]]
    inserted = [2 * i + 2 for i in rng.sample(range(rows), diffs - len(picked))]
    marks = ", ".join(["%s"] * len(COLUMNS))
    connection = server.connect(DATABASE)
    with contextlib.closing(connection), connection.cursor() as cursor:
        cursor.execute("SET SESSION sql_log_bin = 0")
        cursor.execute("SET SESSION time_zone = '+00:00'")
        for key in deleted:
            cursor.execute(f"DELETE FROM {TABLE} WHERE id = %s", (key,))
        for key in updated:
            cursor.execute(f"UPDATE {TABLE} SET amount = amount + 0.01 WHERE id = %s", (key,))
        for key in inserted:
            row = [None if v == "\\N" else v for v in make_row(rng, key)]
            cursor.execute(f"INSERT INTO {TABLE} VALUES ({marks})", row)
    return (
        {("extra_in_target", str(k)) for k in deleted}
        | {("changed", str(k)) for k in updated}
        | {("missing_in_target", str(k)) for k in inserted}
    )


@dataclass(frozen=True, slots=True)
class Validation:
    """One ``replcheck validate`` run."""

    engine: str
    seconds: float
    exit_code: int
    findings: set[Finding]
    phases: str
    load: str


def write_config(server: MariaDBServer, workdir: Path, name: str, engine: str, spark: str) -> Path:
    """A validation config of the source against the lake; ``spark`` is its spark section."""
    config = workdir / f"validate-{name}.yaml"
    config.write_text(
        f"connections:\n  src: {{url: {json.dumps(server.url(DATABASE))}}}\n"
        f"  lake: {{lake: {json.dumps(str(workdir / 'lake'))}}}\n"
        f"comparisons:\n  - {{name: {TABLE}, source: {{connection: src, table: {TABLE}}},"
        f" target: {{connection: lake, table: {DATABASE}.{TABLE}}}}}\n"
        f"validation: {{engine: {engine}, lake_wait_timeout_s: 60, max_reported_rows: 10000}}\n"
        f"spark: {spark}\n",
        encoding="utf-8",
    )
    return config


def validate(
    server: MariaDBServer, workdir: Path, engine: str, name: str = "", spark: str = "{}"
) -> Validation:
    """``replcheck validate`` of the source against the lake, in its own process."""
    name = name or engine
    config = write_config(server, workdir, name, engine, spark)
    out = workdir / f"out-{name}"
    argv = _cli("validate", "--config", str(config), "--out", str(out))
    seconds, code = timed(argv, workdir / f"validate-{name}.log", _env())
    comparison = json.loads((out / "result.json").read_text())["comparisons"][0]
    if comparison.get("error"):
        raise RuntimeError(f"engine {engine}: {comparison['error']}")
    findings = {(d["kind"], d["key"][0]) for d in comparison["differences"]}
    phases = ", ".join(f"{k} {v:.1f} s" for k, v in comparison.get("timings", {}).items())
    label = f"{comparison['engine']} engine, {name if name != engine else 'cold'}"
    return Validation(label, seconds, code, findings, phases, _load())


def warm_connect(server: MariaDBServer, workdir: Path) -> tuple[float, list[Validation]]:
    """Start a Spark Connect server (its start timed), then two hybrid runs on it."""
    began = time.perf_counter()
    with running_spark_connect() as remote:
        started = time.perf_counter() - began
        spark = f"{{remote: {json.dumps(remote)}}}"
        names = [f"spark connect, run {n}" for n in (1, 2)]
        runs = [validate(server, workdir, "hybrid", name, spark) for name in names]
    return started, runs


def _one_process(module: str, config: Path, log: Path) -> dict[str, float]:
    """``python -m MODULE CONFIG`` (a cold process): its steps' seconds, and its whole."""
    seconds, code = timed([sys.executable, "-m", module, str(config)], log, _env())
    if code != 0:
        raise RuntimeError(f"{module} failed: see {log.with_suffix('.err')}")
    steps: dict[str, float] = json.loads(log.read_text().splitlines()[-1])
    return {**steps, "(the whole process)": round(seconds, 3)}


def phases_in_one_process(server: MariaDBServer, workdir: Path) -> dict[str, float]:
    """``bench.lake_validation_phases`` (a cold process) on a hybrid config."""
    config = write_config(server, workdir, "phases", "hybrid", "{}")
    return _one_process("bench.lake_validation_phases", config, workdir / "phases.log")


def local_in_one_process(server: MariaDBServer, workdir: Path) -> dict[str, float]:
    """``bench.lake_validation_local`` (a cold process): the local engine run twice."""
    config = write_config(server, workdir, "local-warm", "local", "{}")
    steps = _one_process("bench.lake_validation_local", config, workdir / "local-warm.log")
    return {**steps, "_load": os.getloadavg()[0]}


def floor(server: MariaDBServer, workdir: Path) -> list[tuple[str, float, str]]:
    """The parts of the floor, and the canonical digest pass for comparison."""
    from deltalake import DeltaTable

    parts: list[tuple[str, float, str]] = []
    columns = ", ".join(COLUMNS)
    raw = f"SELECT COUNT(*), SUM(CONV(LEFT(MD5(CONCAT_WS('|', {columns})), 8), 16, 10))"
    connection = server.connect(DATABASE)
    with contextlib.closing(connection), connection.cursor() as cursor:
        began = time.perf_counter()
        cursor.execute(f"{raw} FROM {TABLE}")
        cursor.fetchall()
        parts.append(("one MD5 pass in MariaDB", time.perf_counter() - began, _load()))
        began = time.perf_counter()
        cursor.execute(_canonical_digest_sql(server))
        cursor.fetchall()
        seconds = time.perf_counter() - began
    mirror = LakeTable(workdir / "lake", f"{DATABASE}.{TABLE}").mirror
    began = time.perf_counter()
    DeltaTable(str(mirror)).to_pyarrow_table()
    parts.append(("deltalake: the mirror into Arrow", time.perf_counter() - began, _load()))
    parts.append(("(canonical digest SQL, one connection)", seconds, _load()))
    return parts


def _canonical_digest_sql(server: MariaDBServer) -> str:
    """The hybrid engine's digest query over the whole table, in one leaf."""
    from connectors.pushdown import HashLeaves, digest_sql
    from connectors.registry import connector_for
    from merkle.layout import RowLayout
    from validator.engines.sides.database.plan import plan_side

    connector = connector_for(server.url(DATABASE))
    schema = connector.reflect(TABLE)
    columns = [(c.name, c.ltype) for c in schema.columns if c.ltype is not None]
    layout = RowLayout.of(columns, ["id"])
    same = {name: name for name in layout.names}
    side = plan_side(connector, schema, layout, same, "bench")
    return digest_sql(side.dialect, side.table, HashLeaves(0))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--diffs", type=int, default=30)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--engines", default="spark,auto", help="cold runs (comma-separated)")
    parser.add_argument(
        "--warm", default="phases,connect,local", help="warm runs: phases, connect, local"
    )
    arguments = parser.parse_args(argv)
    compile_checkout()
    warm_kinds = set(filter(None, arguments.warm.split(",")))
    workdir = arguments.workdir or Path(tempfile.mkdtemp(prefix="bench-lake-"))
    workdir.mkdir(parents=True, exist_ok=True)
    with running_mariadb("FULL") as server:
        write_rows(workdir / "rows.tsv", arguments.rows)
        load_mariadb(server, workdir / "rows.tsv")
        print(f"lake built by cdc run in {build_lake(server, workdir):.1f} s ({_load()})")
        expected = drift_source(server, arguments.rows, arguments.diffs)
        runs = [validate(server, workdir, engine) for engine in arguments.engines.split(",")]
        local = local_in_one_process(server, workdir) if "local" in warm_kinds else {}
        steps = phases_in_one_process(server, workdir) if "phases" in warm_kinds else {}
        connect_start, warm = (
            warm_connect(server, workdir) if "connect" in warm_kinds else (0.0, [])
        )
        runs += warm
        parts = floor(server, workdir)
    print(f"\n{arguments.rows:,} rows, {len(expected)} differences injected\n")
    print("| run | wall time | exit | recall | precision | when |")
    print("|---|---|---|---|---|---|")
    for run in runs:
        hits = len(run.findings & expected)
        recall = hits / len(expected) if expected else 1.0
        precision = hits / len(run.findings) if run.findings else 1.0
        print(
            f"| replcheck validate, {run.engine} | {run.seconds:.1f} s | {run.exit_code}"
            f" | {recall:.0%} | {precision:.0%} | {run.load} |"
        )
    for name, seconds, load in parts:
        print(f"| {name} | {seconds:.1f} s | | | | {load} |")
    print(f"\nfloor: {sum(s for n, s, _ in parts if not n.startswith('(')):.1f} s")
    for run in runs:
        print(f"{run.engine}: in-job phases: {run.phases}")
    if warm:
        print(f"\nSpark Connect server start (before the warm runs): {connect_start:.1f} s")
    if steps:
        print(f"\none cold process (bench.lake_validation_phases), {_load()}:\n")
        for step, seconds in steps.items():
            print(f"| {step} | {seconds:.2f} s |")
    if local:
        load = local.pop("_load")
        where = "the local engine twice in one process (bench.lake_validation_local)"
        print(f"\n{where}, load {load:.2f}:\n")
        for step, seconds in local.items():
            print(f"| {step} | {seconds:.2f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
