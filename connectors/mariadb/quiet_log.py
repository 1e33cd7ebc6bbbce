"""Whether MariaDB's binlog holds a change of one table between two positions (a
``connectors.model.QuietLog``), so a validator can tell a lake whose pipeline stopped at H
is already whole at a later snapshot position P.

It lists the binlog with ``SHOW BINLOG EVENTS`` (the BINLOG MONITOR privilege, which
``SHOW MASTER STATUS`` needs already: https://mariadb.com/kb/en/show-binlog-events/),
so it registers no replica and cannot disturb a running pipeline. A row change of a
table always follows a ``Table_map`` event naming it, in its transaction; DDL is a
``Query`` event. Both count when they start in ``[H, P)``: a transaction mapping the table
there commits after H. A ``Query`` event merely naming the table counts too (cheap, and a
false alarm only costs a wait).
"""

from __future__ import annotations

import contextlib
import re
from typing import Any

from cdc_core.names import qualify, split_table
from connectors.mariadb.connector import MariaDBConnector
from connectors.mariadb.log_source import source_config
from connectors.model import QuietLog

CHUNK = 5000  # events listed per statement
_OFFSET_BITS = 32  # connectors.mariadb.position: file number << 32 | offset
_PLAIN = re.compile(r"^\s*(BEGIN|COMMIT|ROLLBACK|XA )", re.IGNORECASE)  # no table named


def open_quiet_log(url: str, password: str | None) -> QuietLog:
    """The ``QuietLog`` of a ``mysql``/``mariadb`` pipeline URL."""
    config = source_config(url, password, ("probe",))
    connector = MariaDBConnector(config.url, password, config.endpoint)
    database = config.endpoint.database or ""

    def check(table: str, start: int, end: int) -> str | None:
        name = qualify(table, database)
        with contextlib.closing(connector.connect()) as connection, connection.cursor() as cur:
            return _first_change(cur, name, start, end)

    return check


def _first_change(cursor: Any, table: str, start: int, end: int) -> str | None:
    """Where the binlog first touches ``table`` in ``[start, end)``; None if nowhere."""
    cursor.execute("SHOW BINARY LOGS")
    files = {int(row[0].rpartition(".")[2]): row[0] for row in cursor.fetchall()}
    mask = (1 << _OFFSET_BITS) - 1
    first, last = start >> _OFFSET_BITS, end >> _OFFSET_BITS
    for number in range(first, last + 1):
        if number not in files:
            return f"the binlog file numbered {number} is no longer on the server"
        offset = start & mask if number == first else 4
        stop = end & mask if number == last else None
        found = _in_file(cursor, files[number], offset, stop, table)
        if found is not None:
            return found
    return None


def _in_file(cursor: Any, log_file: str, offset: int, stop: int | None, table: str) -> str | None:
    """Where ``log_file`` touches ``table`` from ``offset`` up to ``stop`` (None: its end)."""
    while stop is None or offset < stop:
        cursor.execute(f"SHOW BINLOG EVENTS IN %s FROM {int(offset)} LIMIT {CHUNK}", (log_file,))
        rows = cursor.fetchall()
        for _name, position, kind, _server, _end, info in rows:
            if stop is not None and position >= stop:
                return None
            if _touches(str(kind), str(info or ""), table):
                return f"a change of {table} at {log_file}:{position} ({kind} event)"
        if len(rows) < CHUNK:
            return None
        offset = rows[-1][4]  # End_log_pos: where the next event starts
    return None


def _touches(kind: str, info: str, table: str) -> bool:
    """Whether an event maps ``table`` for row changes, or is a statement naming it."""
    schema, name = split_table(table, "")
    if kind == "Table_map":
        return info.endswith(f"({schema}.{name})")
    return kind == "Query" and not _PLAIN.match(info) and name.lower() in info.lower()
