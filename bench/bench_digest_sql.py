"""What each canonical-payload SQL expression of the database engine costs, per column.

Loads the table of ``bench_vs_reladiff`` into a private MariaDB server and a private
PostgreSQL cluster, then for each checkout given (``--code``, default: the installed one)
writes the dialects' SQL in a subprocess of that checkout and times, on the same servers
and in turn, per column: ``SUM(LENGTH(payload))`` and ``SUM(LENGTH(CONCAT(field)))`` (the
framed field as the row hash reads it), then the whole digest query (4,096 range leaves)
and the floor's pass (``bench.database_floor``). Each figure is the server's CPU seconds
(``/proc/<pid>/stat``: MariaDB's process, PostgreSQL's backend, parallel workers off), best
of ``--repeat``, so other work on the machine slows the wall time but not the figure.
A field inlines its payload: where the dialect measures the payload's length (PostgreSQL
always; it computes each payload once in the digest query, below a fence), the field's
figure computes it twice.

    python -m bench.bench_digest_sql [--rows 1000000] [--repeat 3] [--code DIR ...]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from bench.bench_vs_reladiff import (
    COLUMNS,
    DATABASE,
    TABLE,
    load_mariadb,
    load_postgres,
    machine,
    write_rows,
)
from bench.database_floor import mariadb_pass, postgres_pass
from tests.private_servers import MariaDBServer, PostgresServer, running_mariadb, running_postgres

# Run in a checkout's own interpreter: its dialects' SQL for the table, as JSON.
WRITE_SQL = """
import json, sys
from connectors.pushdown import RangeLeaves, digest_sql
from connectors.registry import connector_for
from merkle.layout import RowLayout
from validator.engines.sides.database.plan import plan_side
out = {}
for product, url in json.loads(sys.argv[1]).items():
    connector = connector_for(url)
    schema = connector.reflect(sys.argv[2])
    typed = [(c.name, c.ltype) for c in schema.columns if c.ltype is not None]
    layout = RowLayout.of(typed, [typed[0][0]])
    side = plan_side(connector, schema, layout, {n: n for n in layout.names}, product)
    dialect, table = side.dialect, side.table
    columns = {}
    for column in table.columns:
        payload = dialect.payload(column, table.options)
        columns[column.name] = [payload.sql, dialect.field(payload.sql, payload)]
    leaves = RangeLeaves(1, 2 * int(sys.argv[3]) // 4096 + 1, 12)
    out[product] = {"table": dialect.table(sys.argv[2]), "columns": columns,
                    "digest": digest_sql(dialect, table, leaves)}
print(json.dumps(out))
"""
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def best_cpu(execute: Callable[[str], None], pid: int, sql: str, repeat: int) -> float:
    """The least CPU seconds ``pid`` spent running ``sql`` to completion."""
    spent = []
    for _ in range(repeat):
        before = cpu_seconds(pid)
        execute(sql)
        spent.append(cpu_seconds(pid) - before)
    return min(spent)


@contextlib.contextmanager
def mariadb_runner(server: MariaDBServer) -> Iterator[tuple[Callable[[str], None], int]]:
    """A query runner on MariaDB, and the server's pid (nothing else runs on it)."""
    connection = server.connect(DATABASE)
    with contextlib.closing(connection), connection.cursor() as cursor:

        def execute(sql: str) -> None:
            cursor.execute(sql)
            cursor.fetchall()

        yield execute, server.pid


@contextlib.contextmanager
def postgres_runner(server: PostgresServer) -> Iterator[tuple[Callable[[str], None], int]]:
    """A query runner on PostgreSQL, and its backend's pid (parallel workers off)."""
    with contextlib.closing(server.connect(DATABASE)) as connection:
        connection.execute("SET max_parallel_workers_per_gather = 0")
        row = connection.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None

        def execute(sql: str) -> None:
            connection.execute(sql).fetchall()

        yield execute, int(row[0])


def written_sql(code: Path | None, urls: dict[str, str], rows: int) -> dict[str, Any]:
    """The dialects' SQL as the checkout ``code`` writes it."""
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(code), env.get("PYTHONPATH")]))
    argv = [sys.executable, "-c", WRITE_SQL, json.dumps(urls), TABLE, str(rows)]
    # In the checkout's directory: ``python -c`` puts the working directory first on the path.
    result = subprocess.run(argv, env=env, cwd=code, check=True, capture_output=True, text=True)
    sql: dict[str, Any] = json.loads(result.stdout)
    return sql


def time_product(
    product: str, sql: dict[str, Any], runner: Any, repeat: int
) -> Iterator[tuple[str, float]]:
    """(what, CPU seconds) of each column's payload and field, the digest and the floor."""
    length = "LENGTH" if product == "mariadb" else "octet_length"
    table = sql["table"]
    with runner as (execute, pid):
        for name, (payload, field) in sql["columns"].items():
            query = f"SELECT SUM({length}({payload})) FROM {table}"
            yield f"payload {name}", best_cpu(execute, pid, query, repeat)
            query = f"SELECT SUM({length}(CONCAT({field}))) FROM {table}"
            yield f"field {name}", best_cpu(execute, pid, query, repeat)
        yield "digest query", best_cpu(execute, pid, sql["digest"], repeat)
        floor = (mariadb_pass if product == "mariadb" else postgres_pass)(table, COLUMNS)
        yield "floor pass", best_cpu(execute, pid, floor, repeat)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--code", type=Path, action="append", help="a checkout to time")
    args = parser.parse_args(argv)
    print(f"machine: {machine()}")
    with running_mariadb("FULL") as mariadb, running_postgres() as postgres:
        with tempfile.TemporaryDirectory() as workdir:
            data = Path(workdir) / "rows.tsv"
            write_rows(data, args.rows)
            load_mariadb(mariadb, data)
            load_postgres(postgres, data)
        urls = {"mariadb": mariadb.url(DATABASE), "postgres": postgres.url(DATABASE)}
        runners = {
            "mariadb": lambda: mariadb_runner(mariadb),
            "postgres": lambda: postgres_runner(postgres),
        }
        figures: dict[tuple[str, str], dict[str, float]] = {}
        codes = args.code or [None]
        for code in codes:
            began = time.perf_counter()
            for product, sql in written_sql(code, urls, args.rows).items():
                for what, seconds in time_product(product, sql, runners[product](), args.repeat):
                    figures.setdefault((product, what), {})[str(code)] = seconds
            print(f"{code}: timed in {time.perf_counter() - began:.0f} s, {machine()}")
    print("\n| product | SQL | " + " | ".join(str(c) for c in codes) + " |")
    print("|---|---|" + "---:|" * len(codes))
    for (product, what), by_code in figures.items():
        cells = " | ".join(f"{by_code.get(str(c), float('nan')):.2f} s" for c in codes)
        print(f"| {product} | {what} | {cells} |")


if __name__ == "__main__":
    main()
