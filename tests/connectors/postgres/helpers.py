"""Helpers of the Postgres log reader tests: run SQL, read the stream up to the WAL's end,
feed the core, and show raw changes as compact tuples that tests compare exactly."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import psycopg

from cdc_core.buffer.transaction_buffer import BufferConfig, TransactionBuffer
from cdc_core.capture.events import (
    Begin,
    Commit,
    CommittedTransaction,
    PartialRollback,
    RawChange,
    Rollback,
    RowChange,
)
from cdc_core.capture.position import Position
from cdc_core.capture.source import Idle, TableChanged
from cdc_core.rebuild.full_width import RebuildConfig, Rebuilder
from cdc_core.rebuild.image_store import RowImageStore
from connectors.postgres.log_reader import PostgresLogReader
from connectors.postgres.source_config import PostgresSourceConfig
from tests.private_servers import PostgresServer

MAX_READ = 200_000  # changes one read may return before the helper gives up


class PgCase:
    """A database on the private cluster, with readers of its slot."""

    def __init__(self, server: PostgresServer, database: str) -> None:
        self.server = server
        self.database = database
        self.connection = server.connect(database)
        # The cluster runs with synchronous_commit = off; the tests' own commits flush the
        # WAL, so the reader can decode them (and what precedes them) at once.
        self.connection.execute("SET synchronous_commit = on")
        self.readers: list[PostgresLogReader] = []

    def sql(self, *statements: str) -> None:
        """Run statements on one autocommit connection."""
        for statement in statements:
            self.connection.execute(statement)

    def session(self) -> psycopg.Connection[Any]:
        """A second connection (not autocommit) for interleaved transactions."""
        connection = psycopg.connect(self.server.dsn(self.database))
        connection.execute("SET synchronous_commit = on")
        connection.commit()
        self.connection_pool.append(connection)
        return connection

    @property
    def connection_pool(self) -> list[psycopg.Connection[Any]]:
        if not hasattr(self, "_pool"):
            self._pool: list[psycopg.Connection[Any]] = []
        return self._pool

    def config(self, *tables: str, **options: Any) -> PostgresSourceConfig:
        options.setdefault("idle_s", 0.1)
        return PostgresSourceConfig(self.server.url(self.database), tables, **options)

    def reader(self, *tables: str, **options: Any) -> PostgresLogReader:
        reader = PostgresLogReader(self.config(*tables, **options))
        self.readers.append(reader)
        return reader

    def close(self) -> None:
        for reader in self.readers:
            reader.close()
        for connection in self.connection_pool:
            connection.close()
        self.connection.close()


def read_until_end(
    reader: PostgresLogReader,
    start: Position | None,
    end: Position | None = None,
    held: Sequence[str] | None = (),
) -> list[RawChange]:
    """Raw changes from ``start`` until the reader is idle at the WAL's end (or ``end``);
    ``held``: the transactions a buffer holds (None: not told)."""
    end = end if end is not None else reader.end_position()
    changes: list[RawChange] = []
    if held is not None:
        reader.resume_transactions(held)
    iterator = reader.iter_changes(start)
    with contextlib.closing(iterator):
        for item in iterator:
            if isinstance(item, Idle):
                if item.position is not None and item.position >= end:
                    return changes
                continue
            changes.append(item)
            if len(changes) > MAX_READ:
                raise AssertionError("the reader did not become idle at the WAL's end")
    raise AssertionError("the reader stopped on its own")


class Tail:
    """One session of a reader kept open, read up to the WAL's end whenever asked: the
    server decodes transactions while they are still in progress, as in production (a
    transaction already known to be rolled back when decoded is not streamed at all)."""

    def __init__(self, reader: PostgresLogReader, start: Position | None) -> None:
        self.reader = reader
        reader.resume_transactions(())
        self.iterator = reader.iter_changes(start)
        self.changes: list[RawChange] = []

    def catch_up(self) -> list[RawChange]:
        """Read until idle at the WAL's current end; returns the changes read (all so far)."""
        end = self.reader.end_position()
        for item in self.iterator:
            if isinstance(item, Idle):
                if item.position is not None and item.position >= end:
                    return self.changes
                continue
            self.changes.append(item)
            if len(self.changes) > MAX_READ:
                raise AssertionError("the reader did not become idle at the WAL's end")
        raise AssertionError("the reader stopped on its own")

    def close(self) -> None:
        self.iterator.close()


def check_order(changes: Sequence[RawChange]) -> None:
    """Positions never go backwards; commits are at real (8-byte aligned) LSNs."""
    positions = [change.position for change in changes]
    assert positions == sorted(positions), "positions went backwards"
    for change in changes:
        if isinstance(change, Commit):
            assert change.position.value % 8 == 0, change.position


def shown(changes: Iterable[RawChange | TableChanged]) -> list[tuple[Any, ...]]:
    """Changes as tuples: ('B', txid), ('C', txid), ('R', txid), ('P', txid, table, locator),
    (op, txid, table, locator, after, before), ('DDL', table, action); tables without their
    schema."""
    out: list[tuple[Any, ...]] = []
    for change in changes:
        if isinstance(change, TableChanged):
            out.append(("DDL", change.table.split(".", 1)[1], change.action))
        elif isinstance(change, Begin):
            out.append(("B", change.txid))
        elif isinstance(change, Commit):
            out.append(("C", change.txid))
        elif isinstance(change, Rollback):
            out.append(("R", change.txid))
        elif isinstance(change, PartialRollback):
            out.append(("P", change.txid, change.table.split(".", 1)[1], change.locator))
        elif isinstance(change, RowChange):
            table = change.table.split(".", 1)[1]
            after = dict(change.after) if change.after is not None else None
            before = dict(change.before) if change.before is not None else None
            out.append((change.op, change.txid, table, change.locator, after, before))
    return out


def committed(
    changes: Iterable[RawChange], spill_dir: Path, keys: Mapping[str, tuple[str, ...]]
) -> list[tuple[str, list[tuple[Any, ...]]]]:
    """The committed transactions the core's buffer and rebuild make of raw changes:
    (txid, [(op, table, locator, after, before), ...]) in commit order, full-width."""
    buffer = TransactionBuffer(BufferConfig(1 << 20, spill_dir / "spill"))
    out: list[tuple[str, list[tuple[Any, ...]]]] = []
    with RowImageStore(spill_dir / "images") as store:
        rebuilder = Rebuilder(store, RebuildConfig(key_columns=keys))
        for change in changes:
            for transaction in buffer.feed(change):
                out.append((transaction.txid, list(_rebuilt(rebuilder, transaction))))
    return out


def _rebuilt(rebuilder: Rebuilder, transaction: CommittedTransaction) -> Iterator[tuple[Any, ...]]:
    for committed_change in rebuilder.iter_rebuilt(transaction):
        change = committed_change.change
        table = change.table.split(".", 1)[1]
        after = dict(change.after) if change.after is not None else None
        before = dict(change.before) if change.before is not None else None
        yield (change.op, table, change.locator, after, before)


def txids(changes: Iterable[RawChange | TableChanged]) -> list[str]:
    """The transaction ids in order of their first change."""
    seen: list[str] = []
    for change in changes:
        if not isinstance(change, TableChanged) and change.txid not in seen:
            seen.append(change.txid)
    return seen
