"""Row events per second: mysql-replication's own decoding vs the MariaDB log reader.

Starts a private MariaDB server (``tests/private_servers.py``), writes N inserts and N
updates of a 10-column table in transactions of 1,000 rows, then reads the same binlog
range twice and times each read:

- library: ``BinLogStreamReader`` (file+offset dump) iterating every rows event's ``rows``;
- reader: ``MariaDBLogReader.iter_changes`` yielding Begin/RowChange/Commit until idle.

Both decode every row; the reader also builds ``RowChange`` values and locators.

    python -m bench.bench_binlog [--rows 100000] [--image FULL|MINIMAL]
"""

from __future__ import annotations

import argparse
import contextlib
import platform
import time
from typing import Any

from cdc_core.capture.events import RowChange
from cdc_core.capture.position import Position
from cdc_core.capture.source import Idle
from connectors.mariadb.log_reader import MariaDBLogReader
from connectors.mariadb.position import split_position
from connectors.mariadb.source_config import MariaDBSourceConfig
from tests.private_servers import MariaDBServer, running_mariadb

TABLE = """CREATE TABLE bench.b (id INT PRIMARY KEY, qty INT, price DECIMAL(10,2),
  name VARCHAR(40), note TEXT, created DATETIME(6), changed TIMESTAMP(6) NULL,
  ratio DOUBLE, flag TINYINT, code CHAR(8))"""


def write_workload(server: MariaDBServer, rows: int, create: bool = True) -> None:
    """N inserts then N updates, 1,000 rows per transaction (after creating the table)."""
    with contextlib.closing(server.connect(None)) as connection, connection.cursor() as cursor:
        if create:
            cursor.execute("CREATE DATABASE bench")
            cursor.execute(TABLE)
        for first in range(0, rows, 1000):
            values = ", ".join(
                f"({i}, {i % 97}, {i}.25, 'name {i}', 'note {i}', '2024-05-01 10:00:00.123456',"
                f" '2024-05-01 10:00:00.5', {i} / 7, 1, 'c{i % 1000}')"
                for i in range(first, min(first + 1000, rows))
            )
            cursor.execute(f"INSERT INTO bench.b VALUES {values}")
        for first in range(0, rows, 1000):
            cursor.execute(
                "UPDATE bench.b SET qty = qty + 1, note = 'changed'"
                f" WHERE id >= {first} AND id < {first + 1000}"
            )


def read_with_library(server: MariaDBServer, start: Position, end: Position) -> int:
    """Rows decoded by mysql-replication alone."""
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    log_file, offset = split_position(start.value, "mariadb-bin")
    end_file, end_offset = split_position(end.value, "mariadb-bin")
    stream = BinLogStreamReader(
        connection_settings={
            "host": server.host,
            "port": server.port,
            "user": server.user,
            "password": server.password,
        },
        server_id=777,
        log_file=log_file,
        log_pos=offset,
        resume_stream=True,
        blocking=False,
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
        only_schemas=["bench"],
        enable_logging=False,
    )
    count = 0
    try:
        for event in stream:
            count += len(event.rows)
            if stream.log_file == end_file and event.packet.log_pos >= end_offset:
                break
    finally:
        stream.close()
    return count


def read_with_reader(reader: MariaDBLogReader, start: Position, end: Position) -> int:
    """Row changes yielded by the log reader until it is idle at ``end``."""
    count = 0
    iterator = reader.iter_changes(start)
    with contextlib.closing(iterator):
        for item in iterator:
            if isinstance(item, RowChange):
                count += 1
            elif isinstance(item, Idle) and item.position is not None and item.position >= end:
                break
    return count


def timed(label: str, function: Any, *args: Any) -> float:
    began = time.perf_counter()
    count = function(*args)
    seconds = time.perf_counter() - began
    print(f"{label}: {count} rows in {seconds:.2f} s = {count / seconds:,.0f} rows/s")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--image", default="FULL", choices=["FULL", "MINIMAL"])
    args = parser.parse_args()
    print(f"machine: {platform.machine()}, python {platform.python_version()}")
    with running_mariadb(args.image) as server:
        config = MariaDBSourceConfig(url=server.url("bench"), tables=("bench.b",))
        reader = MariaDBLogReader(config)
        start = reader.end_position()
        write_workload(server, args.rows)
        end = reader.end_position()
        # The heartbeat that ends the reader's run costs up to heartbeat_s (1 s) of idling.
        library = timed(
            "library (mysql-replication decoding)", read_with_library, server, start, end
        )
        ours = timed("reader (iter_changes)", read_with_reader, reader, start, end)
        reader.close()
    print(f"reader time / library time = {ours / library:.2f}")


if __name__ == "__main__":
    main()
