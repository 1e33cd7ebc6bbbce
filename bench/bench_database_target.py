"""Changes per second a pipeline applies to a database target, against the target's own bulk
loader of the same rows, measured in one run (issue 16).

Starts a private MariaDB server and PostgreSQL cluster (``tests/private_servers.py``). For
each direction (MariaDB -> PostgreSQL, PostgreSQL -> MariaDB) it creates a 6-column table
at the source, lets a pipeline load it (empty: the target table is created), writes N
inserts in transactions of 1,000 rows, then times:

- pipeline: ``open_pipeline(...).run_until_caught_up()`` applying the N inserts to the
  target (log read + buffer + rebuild + the database sink, end to end);
- bulk: the target's bulk loader of the same N rows into an empty table of the same
  definition (PostgreSQL ``COPY FROM STDIN``, MariaDB ``LOAD DATA LOCAL INFILE``).

    python -m bench.bench_database_target [--rows 100000]
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import datetime as dt
import json
import os
import platform
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from connectors.pipeline import open_pipeline
from tests.private_servers import MariaDBServer, PostgresServer, running_mariadb, running_postgres

COLUMNS = "id, qty, price, name, note, created"
MARIADB_TABLE = (
    "CREATE TABLE b (id BIGINT PRIMARY KEY, qty INT, price DECIMAL(10,2), name VARCHAR(40),"
    " note TEXT, created DATETIME(6))"
)
POSTGRES_TABLE = (
    "CREATE TABLE b (id bigint PRIMARY KEY, qty integer, price numeric(10,2), name varchar(40),"
    " note text, created timestamp(6))"
)
STAMP = dt.datetime(2024, 5, 1, 10, 0, 0, 123456)


def rows_of(first: int, last: int) -> list[tuple[object, ...]]:
    """The benchmark's rows ``first`` to ``last - 1``."""
    return [(i, i % 97, f"{i}.25", f"name {i}", f"note {i}", STAMP) for i in range(first, last)]


def _chunks(rows: int) -> Iterator[list[tuple[object, ...]]]:
    for first in range(0, rows, 1000):
        yield rows_of(first, min(first + 1000, rows))


def _config(work: Path, source_url: str, target_url: str) -> Path:
    config = work / "pipeline.yaml"
    config.write_text(
        f"connections:\n  src: {{url: {json.dumps(source_url)}}}\n"
        f"  dst: {{url: {json.dumps(target_url)}}}\n"
        "pipelines:\n  - {name: bench, source: src, target: dst, tables: [b],"
        f" target_schema: replica, state_dir: {json.dumps(str(work / 'state'))}}}\n",
        encoding="utf-8",
    )
    return config


def _time_pipeline(config: Path, write: Callable[[], None]) -> float:
    with open_pipeline(config, "bench") as pipeline:
        pipeline.run_until_caught_up()  # the initial load creates the (empty) target table
        write()
        started = time.perf_counter()
        pipeline.run_until_caught_up()
        return time.perf_counter() - started


def mariadb_to_postgres(
    mariadb: MariaDBServer, postgres: PostgresServer, rows: int
) -> tuple[float, float]:
    """(pipeline seconds, COPY seconds) for ``rows`` inserts."""

    def write() -> None:
        with contextlib.closing(mariadb.connect("bench")) as conn, conn.cursor() as cur:
            for chunk in _chunks(rows):
                cur.executemany(f"INSERT INTO b ({COLUMNS}) VALUES (%s,%s,%s,%s,%s,%s)", chunk)
                conn.commit()

    _fresh_mariadb(mariadb, "bench", MARIADB_TABLE)
    _fresh_postgres(postgres, "replica_db")
    with tempfile.TemporaryDirectory() as work:
        source = f"{mariadb.url('bench')}?server_id=7791&heartbeat_s=0.5"
        applied = _time_pipeline(_config(Path(work), source, postgres.url("replica_db")), write)
    with contextlib.closing(postgres.connect("replica_db")) as conn:
        conn.execute(POSTGRES_TABLE.replace("TABLE b", "TABLE copied"))
        started = time.perf_counter()
        with conn.cursor() as cur, cur.copy(f"COPY copied ({COLUMNS}) FROM STDIN") as copy:
            for chunk in _chunks(rows):
                for row in chunk:
                    copy.write_row(row)
        conn.commit()
        bulk = time.perf_counter() - started
    return applied, bulk


def postgres_to_mariadb(
    mariadb: MariaDBServer, postgres: PostgresServer, rows: int
) -> tuple[float, float]:
    """(pipeline seconds, LOAD DATA seconds) for ``rows`` inserts."""

    def write() -> None:
        with contextlib.closing(postgres.connect("bench")) as conn, conn.cursor() as cur:
            for chunk in _chunks(rows):
                cur.executemany(f"INSERT INTO b ({COLUMNS}) VALUES (%s,%s,%s,%s,%s,%s)", chunk)
                conn.commit()

    _fresh_postgres(postgres, "bench", POSTGRES_TABLE)
    _fresh_mariadb(mariadb, "replica")
    with tempfile.TemporaryDirectory() as work:
        source = f"{postgres.url('bench')}?idle_s=0.5&slot=bench_slot"
        applied = _time_pipeline(_config(Path(work), source, mariadb.url("replica")), write)
        data = Path(work) / "rows.csv"
        with data.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            for chunk in _chunks(rows):
                writer.writerows(chunk)
        import pymysql

        conn = pymysql.connect(
            host="127.0.0.1", port=mariadb.port, user="root", database="replica",
            local_infile=True,
        )  # fmt: skip
        with contextlib.closing(conn), conn.cursor() as cur:
            cur.execute(MARIADB_TABLE.replace("TABLE b", "TABLE loaded"))
            started = time.perf_counter()
            cur.execute(
                f"LOAD DATA LOCAL INFILE %s INTO TABLE loaded FIELDS TERMINATED BY ','"
                f" OPTIONALLY ENCLOSED BY '\"' ({COLUMNS})",
                (str(data),),
            )
            conn.commit()
            bulk = time.perf_counter() - started
    return applied, bulk


def _fresh_mariadb(server: MariaDBServer, database: str, ddl: str | None = None) -> None:
    with contextlib.closing(server.connect(None)) as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {database}")
        cur.execute(f"CREATE DATABASE {database}")
        if ddl is not None:
            cur.execute(f"USE {database}")
            cur.execute(ddl)


def _fresh_postgres(server: PostgresServer, database: str, ddl: str | None = None) -> None:
    with contextlib.closing(server.connect("postgres")) as conn:
        conn.autocommit = True
        conn.execute(f"DROP DATABASE IF EXISTS {database}")
        conn.execute(f"CREATE DATABASE {database}")
    if ddl is not None:
        with contextlib.closing(server.connect(database)) as conn:
            conn.execute(ddl)
            conn.commit()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    args = parser.parse_args()
    print(f"machine: {platform.node()} ({os.cpu_count()} cores), load {os.getloadavg()}")
    with running_mariadb() as mariadb, running_postgres() as postgres:
        for name, run in (("MariaDB -> PostgreSQL", mariadb_to_postgres),
                          ("PostgreSQL -> MariaDB", postgres_to_mariadb)):  # fmt: skip
            applied, bulk = run(mariadb, postgres, args.rows)
            print(
                f"{name}: {args.rows} inserts applied in {applied:.1f} s"
                f" ({args.rows / applied:,.0f}/s); bulk load {bulk:.1f} s"
                f" ({args.rows / bulk:,.0f}/s); pipeline = {bulk / applied:.0%} of the bulk rate",
                flush=True,
            )
    print(f"load after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
