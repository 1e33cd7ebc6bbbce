"""Helpers of the binlog connector tests: run SQL, read the log up to its end, and show
raw changes as compact tuples that tests compare exactly."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from cdc_core.capture.events import ABSENT, Begin, Commit, RawChange, Rollback, RowChange
from cdc_core.capture.position import Position
from cdc_core.capture.source import Idle
from connectors.mariadb.log_reader import MariaDBLogReader
from connectors.mariadb.source_config import MariaDBSourceConfig
from tests.private_servers import MariaDBServer

MAX_READ = 100_000  # changes one read may return before the helper gives up


class BinlogCase:
    """A database on a private server, with a reader of its binlog."""

    def __init__(self, server: MariaDBServer, database: str) -> None:
        self.server = server
        self.database = database
        self.minimal = server.binlog_row_image == "MINIMAL"
        self.connection = server.connect(database)
        self.readers: list[MariaDBLogReader] = []

    def sql(self, *statements: str) -> None:
        """Run statements on one autocommit connection."""
        with self.connection.cursor() as cursor:
            for statement in statements:
                cursor.execute(statement)

    def query(self, statement: str) -> list[tuple[Any, ...]]:
        with self.connection.cursor() as cursor:
            cursor.execute(statement)
            return list(cursor.fetchall())

    def reader(self, *tables: str, **options: Any) -> MariaDBLogReader:
        config = MariaDBSourceConfig(
            url=self.server.url(self.database), tables=tables, heartbeat_s=0.2, **options
        )
        reader = MariaDBLogReader(config)
        self.readers.append(reader)
        return reader

    def table(self, name: str) -> str:
        return f"{self.database}.{name}"

    def close(self) -> None:
        for reader in self.readers:
            reader.close()
        self.connection.close()


def read_until_end(
    reader: MariaDBLogReader, start: Position | None, end: Position | None = None
) -> list[RawChange]:
    """Raw changes from ``start`` until the reader is idle at the log's end (or ``end``)."""
    end = end if end is not None else reader.end_position()
    changes: list[RawChange] = []
    iterator = reader.iter_changes(start)
    with contextlib.closing(iterator):
        for item in iterator:
            if isinstance(item, Idle):
                if item.position is not None and item.position >= end:
                    return changes
                continue
            changes.append(item)
            if len(changes) > MAX_READ:
                raise AssertionError("the reader did not become idle at the log's end")
    raise AssertionError("the reader stopped on its own")


def check_order(changes: Sequence[RawChange]) -> None:
    """Positions never go backwards; every change sits between its Begin and its end."""
    positions = [change.position for change in changes]
    assert positions == sorted(positions), "positions went backwards"
    open_txids: set[str] = set()
    for change in changes:
        if isinstance(change, Begin):
            assert change.txid not in open_txids
            open_txids.add(change.txid)
        elif isinstance(change, Commit | Rollback):
            open_txids.discard(change.txid)


def shown(changes: Iterable[RawChange]) -> list[tuple[Any, ...]]:
    """Changes as tuples: ('B',), ('C',), ('R',), (op, table, locator, after, before)."""
    out: list[tuple[Any, ...]] = []
    for change in changes:
        if isinstance(change, Begin):
            out.append(("B",))
        elif isinstance(change, Commit):
            out.append(("C",))
        elif isinstance(change, Rollback):
            out.append(("R",))
        elif isinstance(change, RowChange):
            table = change.table.split(".", 1)[1]
            out.append((change.op, table, change.locator, change.after, change.before))
    return out


def image(columns: Mapping[str, object], carried: Iterable[str] | None) -> dict[str, object]:
    """``columns`` with every column outside ``carried`` ABSENT (``None``: all carried)."""
    if carried is None:
        return dict(columns)
    keep = set(carried)
    return {name: (value if name in keep else ABSENT) for name, value in columns.items()}
