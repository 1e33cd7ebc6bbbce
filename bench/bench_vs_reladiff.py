"""replcheck vs reladiff: one MariaDB -> PostgreSQL pair with known differences, side by side.

Starts a private MariaDB server and a private PostgreSQL cluster (``tests/private_servers.py``),
loads the same generated rows into both (LOAD DATA / COPY of one tab-separated file), then
injects ``--diffs`` known differences into the PostgreSQL copy: rows deleted (missing in the
target), rows added (extra in the target) and rows changed in one column each. Then it times,
one after the other:

- ``replcheck validate`` as a subprocess, with the config template
  ``bench/bench_vs_reladiff.yaml``, once per engine asked for (``--engines``): ``database``
  (both servers compute their own digests; no Spark) and ``spark`` (Spark start-up included);
- reladiff's CLI, installed by this script in its own virtual environment
  (``bench/.venv-reladiff``), with ``-c`` for every column and ``--skip-sort-results``;

and scores each tool's findings, as (kind, key) pairs, against the injected set.
With ``--floor``, the database engine's floor (``bench.database_floor``) is timed first in
each repeat, and every replcheck run is set against the best floor.

``--replication`` names how the target is fed, per run of ``replcheck validate``
(the comparison's ``replication:``): ``none`` and ``unknown`` (the default lag re-check)
compare the copy loaded by COPY; ``replcheck`` compares a second PostgreSQL database that a
``replcheck cdc run`` pipeline loaded from MariaDB and keeps following while it is read (a
live replica), with the same drift injected into it behind the pipeline's back; reladiff
runs against each target once per repeat.

    python -m bench.bench_vs_reladiff [--rows 1000000] [--diffs 100] [--workdir DIR]
        [--engines database,spark] [--replication none,unknown,replcheck] [--repeat 1]
        [--floor] [--replcheck-code DIR ...]

The table has an integer key, an INT, two DECIMALs, two VARCHARs, a DATETIME(6) (timestamp
without zone), a TIMESTAMP(3) (with zone) and a DOUBLE, with NULLs in four columns.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import itertools
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.database_floor import Floor, measure_floor, server_cpu_seconds
from tests.private_servers import MariaDBServer, PostgresServer, running_mariadb, running_postgres

HERE = Path(__file__).resolve().parent
RELADIFF_VENV = HERE / ".venv-reladiff"
RELADIFF_REQUIREMENT = "reladiff[mysql,postgresql]"
CONFIG_TEMPLATE = HERE / "bench_vs_reladiff.yaml"
DATABASE = "bench"
FED_DATABASE = "bench_fed"  # the PostgreSQL database a replcheck pipeline feeds
TABLE = "orders"
SEED = 20261122
COLUMNS = (
    "id",
    "customer_id",
    "amount",
    "unit_price",
    "status",
    "note",
    "placed_at",
    "shipped_at",
    "weight",
)
MARIADB_TABLE = f"""CREATE TABLE {DATABASE}.{TABLE} (
  id BIGINT PRIMARY KEY, customer_id INT NOT NULL, amount DECIMAL(12,2) NOT NULL,
  unit_price DECIMAL(18,6), status VARCHAR(16) NOT NULL, note VARCHAR(80),
  placed_at DATETIME(6) NOT NULL, shipped_at TIMESTAMP(3) NULL, weight DOUBLE)"""
POSTGRES_TABLE = f"""CREATE TABLE {TABLE} (
  id BIGINT PRIMARY KEY, customer_id INTEGER NOT NULL, amount NUMERIC(12,2) NOT NULL,
  unit_price NUMERIC(18,6), status VARCHAR(16) NOT NULL, note VARCHAR(80),
  placed_at TIMESTAMP(6) NOT NULL, shipped_at TIMESTAMPTZ(3), weight DOUBLE PRECISION)"""
STATUSES = ("new", "paid", "shipped", "delivered", "returned", "cancelled")
NAMES = ("Anna Müller", "Zoë Lefèvre", "Łukasz Wójcik", "Sam O'Neil", "李雷", "Ana Ibáñez")
EPOCH = dt.datetime(2024, 1, 1)
SPAN_MICROS = 2 * 365 * 86_400 * 10**6
# One change per changed row, in turn: (column, SQL expression giving the new value).
CHANGES = (
    ("amount", "amount + 0.01"),
    ("status", "CASE WHEN status = 'paid' THEN 'new' ELSE 'paid' END"),
    ("note", "COALESCE(note, '') || ' (edited)'"),
    ("placed_at", "placed_at + INTERVAL '1 second'"),
    ("weight", "COALESCE(weight, 0) * 1.5 + 1"),
    ("customer_id", "customer_id + 1"),
    ("unit_price", "COALESCE(unit_price, 0) + 0.000001"),
    ("shipped_at", "COALESCE(shipped_at, TIMESTAMPTZ '2025-01-01 00:00:00+00') + INTERVAL '1 ms'"),
)

Finding = tuple[str, str]  # (kind, key as text)


# --- data -------------------------------------------------------------------------------


def _micros_text(stamp: dt.datetime, digits: int) -> str:
    return stamp.isoformat(sep=" ", timespec="microseconds" if digits == 6 else "milliseconds")


def make_row(rng: random.Random, key: int) -> list[str]:
    """One row as tab-separated text fields (``\\N`` is NULL in both loaders' text format)."""
    cents, micros = rng.randrange(100, 10**9), rng.randrange(10**6, 10**10)
    placed = EPOCH + dt.timedelta(microseconds=rng.randrange(SPAN_MICROS))
    shipped = placed + dt.timedelta(milliseconds=rng.randrange(10**9))
    customer = rng.randrange(1, 200_000)
    note = f"order {key} for {rng.choice(NAMES)}" if rng.random() < 0.9 else "\\N"
    return [
        str(key),
        str(customer),
        f"{cents // 100}.{cents % 100:02d}",
        f"{micros // 10**6}.{micros % 10**6:06d}" if rng.random() < 0.95 else "\\N",
        rng.choice(STATUSES),
        note,
        _micros_text(placed, 6),
        _micros_text(shipped, 3) if rng.random() < 0.8 else "\\N",
        repr(rng.random() * 1000) if rng.random() < 0.95 else "\\N",
    ]


def source_key(index: int) -> int:
    """Keys of the loaded rows are odd, so extra rows can be added between them (even)."""
    return 2 * index + 1


def write_rows(path: Path, rows: int) -> None:
    """The rows both servers load, as one tab-separated file."""
    rng = random.Random(SEED)
    with path.open("w", encoding="utf-8") as out:
        for index in range(rows):
            out.write("\t".join(make_row(rng, source_key(index))))
            out.write("\n")


# --- loading ----------------------------------------------------------------------------


def load_mariadb(server: MariaDBServer, data: Path) -> None:
    """LOAD DATA LOCAL INFILE (tab-separated, ``\\N`` = NULL is MariaDB's default format)."""
    import pymysql

    connection = pymysql.connect(
        host=server.host, port=server.port, user=server.user, local_infile=True, autocommit=True
    )
    with contextlib.closing(connection), connection.cursor() as cursor:
        # The private server starts with a 16 MB buffer pool; the comparison should measure
        # reads of a warm table, as on a real server, not the disk.
        cursor.execute("SET GLOBAL innodb_buffer_pool_size = 2147483648")
        cursor.execute("SET SESSION sql_log_bin = 0")  # the load need not fill the binlog
        cursor.execute("SET SESSION time_zone = '+00:00'")  # TIMESTAMP text is UTC
        cursor.execute(f"CREATE DATABASE {DATABASE}")
        cursor.execute(MARIADB_TABLE)
        cursor.execute(f"LOAD DATA LOCAL INFILE '{data}' INTO TABLE {DATABASE}.{TABLE}")
        cursor.execute(f"ANALYZE TABLE {DATABASE}.{TABLE}")


def load_postgres(server: PostgresServer, data: Path) -> None:
    """COPY FROM STDIN in text format (tab-separated, ``\\N`` = NULL), then VACUUM ANALYZE."""
    with contextlib.closing(server.connect("postgres")) as admin:
        admin.execute(f"CREATE DATABASE {DATABASE}")
    with contextlib.closing(server.connect(DATABASE)) as connection:
        connection.execute("SET TimeZone = 'UTC'")  # TIMESTAMPTZ text is UTC
        connection.execute(POSTGRES_TABLE)
        copy_in = f"COPY {TABLE} FROM STDIN"
        with connection.cursor() as cursor, cursor.copy(copy_in) as copy, data.open("rb") as rows:
            while block := rows.read(1 << 20):
                copy.write(block)
        # Set hint bits and statistics now, so neither tool pays for them on its first read.
        connection.execute(f"VACUUM ANALYZE {TABLE}")


# --- differences ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Drift:
    """The keys of the rows deleted from, added to and changed in the target."""

    missing: tuple[int, ...]
    extra: tuple[int, ...]
    changed: tuple[int, ...]

    def expected(self) -> set[Finding]:
        """Every injected difference as the (kind, key) a tool must report."""
        kinds = (
            ("missing_in_target", self.missing),
            ("extra_in_target", self.extra),
            ("changed", self.changed),
        )
        return {(kind, str(key)) for kind, keys in kinds for key in keys}


def plan_drift(rows: int, diffs: int) -> Drift:
    """Which keys to delete, add and change: spread over the whole key range."""
    rng = random.Random(SEED + 1)
    missing, extra = diffs // 3, diffs // 3
    touched = rng.sample(range(rows), diffs - extra)
    added = rng.sample(range(rows), extra)
    return Drift(
        missing=tuple(sorted(source_key(i) for i in touched[:missing])),
        extra=tuple(sorted(2 * i + 2 for i in added)),
        changed=tuple(sorted(source_key(i) for i in touched[missing:])),
    )


def inject(server: PostgresServer, drift: Drift, database: str = DATABASE) -> None:
    """Apply the drift to a PostgreSQL copy."""
    rng = random.Random(SEED + 2)
    with contextlib.closing(server.connect(database)) as connection:
        connection.execute("SET TimeZone = 'UTC'")
        with connection.cursor() as cursor:
            cursor.execute(f"DELETE FROM {TABLE} WHERE id = ANY(%s)", (list(drift.missing),))
            with cursor.copy(f"COPY {TABLE} FROM STDIN") as copy:
                for key in drift.extra:
                    copy.write(("\t".join(make_row(rng, key)) + "\n").encode())
            for index, key in enumerate(drift.changed):
                column, expression = CHANGES[index % len(CHANGES)]
                cursor.execute(f"UPDATE {TABLE} SET {column} = {expression} WHERE id = %s", (key,))
                if cursor.rowcount != 1:
                    raise RuntimeError(f"changing row {key} updated {cursor.rowcount} rows")


# --- the two tools ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Run:
    """One tool's run: its wall time, exit code and findings."""

    tool: str
    seconds: float
    exit_code: int
    findings: set[Finding]
    detail: str = ""
    server_cpu: float = 0.0  # CPU seconds of both servers during the run


def timed(
    argv: Sequence[str], stdout: Path, env: dict[str, str] | None = None
) -> tuple[float, int]:
    """Run ``argv`` to completion with its output in files; wall seconds and exit code."""
    with stdout.open("wb") as out, stdout.with_suffix(".err").open("wb") as err:
        began = time.perf_counter()
        code = subprocess.run(argv, stdout=out, stderr=err, env=env, check=False).returncode
        return time.perf_counter() - began, code


@dataclass(frozen=True, slots=True)
class Target:
    """A PostgreSQL copy of the source table and how it is fed (``replication:``)."""

    database: str
    replication: str


def run_replcheck(
    mariadb: MariaDBServer,
    postgres: PostgresServer,
    workdir: Path,
    code: Path | None,
    engine: str = "database",
    target: Target = Target(DATABASE, "none"),
) -> Run:
    """``replcheck validate`` in its own process, as a user runs it (with the packages of
    the checkout ``code`` ahead of the installed ones, to time another version)."""
    version = code.name if code is not None else "installed"
    name = f"{engine}-{target.replication}-{version}"
    config = workdir / f"replcheck-{name}.yaml"
    config.write_text(
        CONFIG_TEMPLATE.read_text().format(
            mariadb_url=mariadb.url(DATABASE),
            postgres_url=postgres.url(target.database),
            table=TABLE,
            max_reported_rows=10_000,
            engine=engine,
            replication=target.replication,
        )
    )
    out = workdir / f"replcheck-out-{name}"
    argv = [str(_replcheck()), "validate", "--config", str(config), "--out", str(out)]
    cpu = server_cpu_seconds((mariadb.pid, postgres.pid))
    seconds, exit_code = timed(argv, workdir / f"replcheck-{name}.log", _env(code))
    cpu = server_cpu_seconds((mariadb.pid, postgres.pid)) - cpu
    document = json.loads((out / "result.json").read_text())
    comparison = document["comparisons"][0]
    findings = {(d["kind"], d["key"][0]) for d in comparison["differences"]}
    phases = ", ".join(f"{k} {v:.1f} s" for k, v in comparison.get("timings", {}).items())
    tool = (
        f"replcheck ({comparison.get('engine', engine)} engine, replication: {target.replication}"
    )
    tool += f", code: {version})" if code is not None else ")"
    return Run(tool, seconds, exit_code, findings, f"in-job phases: {phases}", cpu)


def _replcheck() -> Path:
    return Path(sys.executable).with_name("replcheck")


def _env(code: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(code), env.get("PYTHONPATH")]))
    return env


# --- a live replica fed by replcheck ------------------------------------------------------


def _pipeline_config(mariadb: MariaDBServer, postgres: PostgresServer, workdir: Path) -> Path:
    """A pipeline from MariaDB's ``bench.orders`` into ``FED_DATABASE``'s ``public.orders``."""
    source = f"{mariadb.url(DATABASE)}?server_id=7792&heartbeat_s=0.5"
    config = workdir / "feed.yaml"
    config.write_text(
        f"connections:\n  src: {{url: {json.dumps(source)}}}\n"
        f"  dst: {{url: {json.dumps(postgres.url(FED_DATABASE))}}}\n"
        "pipelines:\n  - {name: feed, source: src, target: dst, tables: [orders],"
        f" target_schema: public, state_dir: {json.dumps(str(workdir / 'feed-state'))}}}\n",
        encoding="utf-8",
    )
    return config


@contextlib.contextmanager
def fed_replica(
    mariadb: MariaDBServer, postgres: PostgresServer, workdir: Path, drift: Drift
) -> Iterator[Target]:
    """``FED_DATABASE`` loaded by a replcheck pipeline, the drift injected into it behind the
    pipeline's back, and the pipeline following the source while the caller reads it."""
    with contextlib.closing(postgres.connect("postgres")) as admin:
        admin.execute(f"CREATE DATABASE {FED_DATABASE}")
    config = _pipeline_config(mariadb, postgres, workdir)
    run = [str(_replcheck()), "cdc", "run", "--config", str(config), "--pipeline", "feed"]
    began = time.perf_counter()
    seconds, code = timed([*run, "--until-caught-up"], workdir / "feed-load.log")
    if code != 0:
        raise RuntimeError(f"the pipeline's initial load failed: see {workdir / 'feed-load.log'}")
    print(f"pipeline loaded the replica in {seconds:.1f} s")
    with contextlib.closing(postgres.connect(FED_DATABASE)) as connection:
        connection.execute(f"VACUUM ANALYZE {TABLE}")
    inject(postgres, drift, FED_DATABASE)
    with (workdir / "feed.log").open("wb") as log:
        follower = subprocess.Popen(run, stdout=log, stderr=subprocess.STDOUT)
        try:
            yield Target(FED_DATABASE, "replcheck")
        finally:
            follower.terminate()
            follower.wait(timeout=120)
    print(f"replica fed by replcheck: {time.perf_counter() - began:.1f} s in all")


def ensure_reladiff() -> Path:
    """reladiff's CLI in its own virtual environment (created on first use)."""
    program = RELADIFF_VENV / "bin" / "reladiff"
    if not program.exists():
        subprocess.run([sys.executable, "-m", "venv", str(RELADIFF_VENV)], check=True)
        pip = RELADIFF_VENV / "bin" / "pip"
        subprocess.run([str(pip), "install", "--quiet", RELADIFF_REQUIREMENT], check=True)
    return program


def reladiff_argv(
    program: Path, mariadb: MariaDBServer, postgres: PostgresServer, database: str = DATABASE
) -> list[str]:
    """reladiff's hashdiff between the two servers, every column compared."""
    columns = [arg for column in COLUMNS[1:] for arg in ("-c", column)]
    return [
        str(program),
        f"mysql://{mariadb.user}@{mariadb.host}:{mariadb.port}/{DATABASE}",
        TABLE,
        f"postgresql://{postgres.user}@{postgres.host}:{postgres.port}/{database}",
        TABLE,
        "-k",
        "id",
        *columns,
        "--skip-sort-results",
        "--json",
    ]


def iter_reladiff_rows(output: Path) -> Iterator[tuple[str, str]]:
    """(sign, key) of each differing row reladiff printed: ``-`` only in A, ``+`` only in B."""
    for line in output.read_text().splitlines():
        if line.strip():
            sign, row = json.loads(line)
            yield sign, str(row[0])


def reladiff_findings(output: Path) -> set[Finding]:
    """A key with both a ``-`` and a ``+`` row changed; one with only one of them is missing
    in (``-``) or extra in (``+``) the target."""
    signs: dict[str, set[str]] = {}
    for sign, key in iter_reladiff_rows(output):
        signs.setdefault(key, set()).add(sign)
    kinds = {frozenset("-+"): "changed", frozenset("-"): "missing_in_target"}
    return {(kinds.get(frozenset(s), "extra_in_target"), key) for key, s in signs.items()}


def run_reladiff(
    mariadb: MariaDBServer, postgres: PostgresServer, workdir: Path, database: str = DATABASE
) -> Run:
    """reladiff's CLI; its installation is not timed."""
    argv = reladiff_argv(ensure_reladiff(), mariadb, postgres, database)
    output = workdir / f"reladiff-{database}.jsonl"
    # reladiff prints through rich, which wraps lines at 80 columns when not on a terminal.
    seconds, code = timed(argv, output, {**os.environ, "COLUMNS": "1000000"})
    return Run(f"reladiff ({database})", seconds, code, reladiff_findings(output))


# --- scoring and the report -------------------------------------------------------------


def score(found: set[Finding], expected: set[Finding]) -> tuple[float, float]:
    """Recall and precision of ``found`` against ``expected``."""
    hits = len(found & expected)
    recall = hits / len(expected) if expected else 1.0
    precision = hits / len(found) if found else 1.0
    return recall, precision


def report_floors(runs: Sequence[Run], floors: Sequence[Floor]) -> None:
    """Each floor measured, and each replcheck run against the best of them."""
    for floor in floors:
        print(
            f"floor (one MD5 pass over each table, both servers at once): {floor.seconds:.1f} s"
            f" (MariaDB {floor.mariadb:.1f} s, PostgreSQL {floor.postgres:.1f} s);"
            f" servers' CPU {floor.cpu:.1f} s"
        )
    best = min((floor.seconds for floor in floors), default=None)
    best_cpu = min((floor.cpu for floor in floors), default=None)
    for run in runs:
        if best and best_cpu and run.tool.startswith("replcheck"):
            print(
                f"{run.tool}: / best floor = {run.seconds / best:.2f} (wall),"
                f" {run.server_cpu / best_cpu:.2f} (servers' CPU {run.server_cpu:.1f} s)"
            )


def report(runs: Sequence[Run], expected: set[Finding], rows: int) -> None:
    """A Markdown table for bench/RESULTS.md, and what each tool got wrong."""
    print(f"\n{rows:,} rows, {len(expected)} injected differences\n")
    print("| tool | wall time | exit code | found | recall | precision |")
    print("|---|---:|---:|---:|---:|---:|")
    for run in runs:
        recall, precision = score(run.findings, expected)
        print(
            f"| {run.tool} | {run.seconds:.1f} s | {run.exit_code} | {len(run.findings)} "
            f"| {recall:.3f} | {precision:.3f} |"
        )
    for run in runs:
        wrong = sorted(run.findings - expected)[:10]
        missed = sorted(expected - run.findings)[:10]
        print(f"{run.tool}: {run.detail} false: {wrong} missed: {missed}")
    reladiff = [run.seconds for run in runs if run.tool.startswith("reladiff")]
    for run in runs:
        if reladiff and not run.tool.startswith("reladiff"):
            ratio = min(reladiff) / run.seconds
            print(f"reladiff's best time / {run.tool} = {ratio:.2f}")


def machine() -> str:
    """The machine, as RESULTS.md records it."""
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    python = platform.python_version()
    return f"{platform.machine()}, {os.cpu_count()} cores, python {python}, load average {load}"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--diffs", type=int, default=100)
    parser.add_argument("--workdir", type=Path, default=None, help="default: a temporary dir")
    parser.add_argument("--skip-reladiff", action="store_true", help="time replcheck only")
    parser.add_argument(
        "--replcheck-code",
        type=Path,
        action="append",
        help="time the replcheck of this checkout (repeat to time several, in turn)",
    )
    parser.add_argument(
        "--floor", action="store_true", help="time the floor (database_floor) in each repeat"
    )
    parser.add_argument(
        "--engines", default="database", help="replcheck engines to time: database,spark"
    )
    parser.add_argument(
        "--replication",
        default="none",
        help="how the target is fed, per replcheck run: none,unknown (the COPY-loaded copy),"
        " replcheck (a copy a running replcheck pipeline feeds)",
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs of each tool, in turn")
    args = parser.parse_args(argv)
    if not args.skip_reladiff:
        ensure_reladiff()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-reladiff-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"machine: {machine()}; workdir {workdir}")
    drift = plan_drift(args.rows, args.diffs)
    with running_mariadb("FULL") as mariadb, running_postgres() as postgres:
        began = time.perf_counter()
        data = workdir / "rows.tsv"
        write_rows(data, args.rows)
        load_mariadb(mariadb, data)
        load_postgres(postgres, data)
        inject(postgres, drift)
        data.unlink()
        print(f"generated and loaded in {time.perf_counter() - began:.1f} s")
        kinds = args.replication.split(",")
        loaded = [Target(DATABASE, kind) for kind in kinds if kind != "replcheck"]
        floors: list[Floor] = []
        runs = _run_tools(args, mariadb, postgres, workdir, loaded, floors)
        if "replcheck" in kinds:
            with fed_replica(mariadb, postgres, workdir, drift) as fed:
                runs += _run_tools(args, mariadb, postgres, workdir, [fed], floors)
        print(f"after the runs: {machine()}")
    report(runs, drift.expected(), args.rows)
    report_floors(runs, floors)


def _run_tools(
    args: argparse.Namespace,
    mariadb: MariaDBServer,
    postgres: PostgresServer,
    workdir: Path,
    targets: Sequence[Target],
    floors: list[Floor],
) -> list[Run]:
    """Each replcheck run asked for against ``targets`` (one database), then reladiff; and
    the floor first in each repeat when asked (appended to ``floors``)."""
    runs: list[Run] = []
    for _ in range(args.repeat if targets else 0):
        if args.floor:
            floors.append(measure_floor(mariadb, postgres, DATABASE, TABLE, COLUMNS))
            print(f"floor: {floors[-1].seconds:.1f} s, load {machine()}")
        for target, engine, code in itertools.product(
            targets, args.engines.split(","), args.replcheck_code or [None]
        ):
            run = run_replcheck(mariadb, postgres, workdir, code, engine, target)
            runs.append(run)
            print(f"{run.tool}: {run.seconds:.1f} s, load {machine()}")
        if not args.skip_reladiff:
            runs.append(run_reladiff(mariadb, postgres, workdir, targets[0].database))
            print(f"{runs[-1].tool}: {runs[-1].seconds:.1f} s, load {machine()}")
    return runs


if __name__ == "__main__":
    main()
