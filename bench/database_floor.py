"""The database engine's floor: one MD5 pass over each table, both servers at once.

The cheapest exact-enough pass a tool comparing two tables inside their databases can make
is reladiff's own expression, ``md5(concat_ws('|', ...))`` of every column, summed. The
floor is the wall time of that pass over the source table in MariaDB and the target table
in PostgreSQL, run at the same time on one connection each (each server as configured:
PostgreSQL may use its parallel workers), so it is measured in the same run and under the
same load as the tool it is set against. On a shared machine the wall time mostly measures
the load, so the servers' CPU seconds are counted too (``server_cpu_seconds``).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tests.private_servers import MariaDBServer, PostgresServer


def mariadb_pass(table: str, columns: Sequence[str]) -> str:
    """One MD5 pass in MariaDB: the top 32 bits of each row's hash, summed."""
    joined = ", ".join(columns)
    return (
        f"SELECT COUNT(*), SUM(CONV(LEFT(MD5(CONCAT_WS('|', {joined})), 8), 16, 10)) FROM {table}"
    )


def postgres_pass(table: str, columns: Sequence[str]) -> str:
    """The same pass in PostgreSQL."""
    top = f"('x' || left(md5(concat_ws('|', {', '.join(columns)})), 8))::bit(32)::bigint"
    return f"SELECT count(*), sum({top}) FROM {table}"


TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_ticks(stat: str) -> tuple[int, int]:
    """(parent pid, CPU ticks of the process and of its children it has reaped)."""
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[1]), sum(int(f) for f in fields[11:15])


def server_cpu_seconds(pids: Sequence[int]) -> float:
    """CPU seconds the processes ``pids`` and their children have spent so far: a
    PostgreSQL backend's time moves to the postmaster's own count of its reaped children
    when it exits, and is read from the backend while it runs."""
    ticks = 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):  # a process that ended meanwhile
            parent, spent = _cpu_ticks((proc / "stat").read_text())
            if int(proc.name) in pids or parent in pids:
                ticks += spent
    return ticks / TICKS


@dataclass(frozen=True, slots=True)
class Floor:
    """Wall seconds of the two passes run at once, of each one, and the servers' CPU."""

    seconds: float
    mariadb: float
    postgres: float
    cpu: float


def _timed_mariadb(server: MariaDBServer, database: str, sql: str) -> float:
    connection = server.connect(database)
    with contextlib.closing(connection), connection.cursor() as cursor:
        began = time.perf_counter()
        cursor.execute(sql)
        cursor.fetchall()
        return time.perf_counter() - began


def _timed_postgres(server: PostgresServer, database: str, sql: str) -> float:
    with contextlib.closing(server.connect(database)) as connection:
        began = time.perf_counter()
        connection.execute(sql).fetchall()
        return time.perf_counter() - began


def measure_floor(
    mariadb: MariaDBServer,
    postgres: PostgresServer,
    database: str,
    table: str,
    columns: Sequence[str],
) -> Floor:
    """Both passes at once (MariaDB's ``database.table``, PostgreSQL's ``table`` in
    ``database``); the floor is the later of the two to finish."""
    pids = (mariadb.pid, postgres.pid)
    with ThreadPoolExecutor(2) as pool:
        cpu, began = server_cpu_seconds(pids), time.perf_counter()
        source = pool.submit(_timed_mariadb, mariadb, database, mariadb_pass(table, columns))
        target = pool.submit(_timed_postgres, postgres, database, postgres_pass(table, columns))
        mariadb_seconds, postgres_seconds = source.result(), target.result()
        seconds = time.perf_counter() - began
        return Floor(seconds, mariadb_seconds, postgres_seconds, server_cpu_seconds(pids) - cpu)
