"""SQLite's trigger capture (``connectors.trigger_capture``): the only capture SQLite has, so
a pipeline whose source is ``sqlite:///path/file.db`` reads it (tables of ``main`` listed by
name: ``orders`` or ``main.orders``).

Set-up per captured table ``t`` of the ``main`` schema (``replcheck cdc install-capture``):

- ``replcheck_capture_seq``: one ``INTEGER PRIMARY KEY AUTOINCREMENT`` table shared by every
  captured table; each captured row change inserts a row and takes its rowid as the change's
  capture sequence. AUTOINCREMENT never reuses a value, even after the purge deletes rows
  (https://www.sqlite.org/autoinc.html), and its high-water mark lives in
  ``sqlite_sequence``, which changes in the writer's own transaction.
- ``replcheck_log_t``: the sequence, the op, the time and a copy of every column of ``t``,
  declared without a type (BLOB affinity: values are stored exactly as the trigger gives
  them, https://www.sqlite.org/datatype3.html#affinity_name_examples).
- AFTER INSERT / UPDATE / DELETE row triggers writing it: the new row for inserts and for
  updates that keep the key, the old row for deletes; an update that changes the key is
  recorded as the delete of the old row and the insert of the new one.

Guarantees. SQLite has one writer at a time (https://www.sqlite.org/lockingv3.html), so
capture order is commit order and a reader's snapshot holds exactly the changes at or below
the sequence value it sees: there are never gaps to wait for, and a rolled-back
transaction's rows (and sequence values) vanish with it. SQLite records no transaction id,
so the reader cannot tell apart transactions that committed between two of its polls: they
are yielded as one transaction (never split, never reordered). Columns are copied by name
when the triggers are created: after ``ALTER TABLE`` run ``install-capture`` again.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import sqlite3
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from cdc_core.capture.position import Position
from cdc_core.capture.source import SnapshotReader, TableDescription, TableSnapshot
from cdc_core.errors import ConfigError, TerminalError
from cdc_core.names import is_glob, parse_table
from connectors.base import file_path
from connectors.model import POSITION_COLUMN, TableSchema
from connectors.sqlite.connector import SQLiteConnector, value_converter
from connectors.trigger_capture.dialect import (
    CaptureRow,
    CaptureSession,
    TriggerDialect,
    VisibleCommits,
)
from connectors.trigger_capture.position import capture_position

SEQUENCE_TABLE = "replcheck_capture_seq"
GROUPS_TABLE = "replcheck_capture_groups"  # where each transaction the reader yielded ends
LOG_PREFIX = "replcheck_log_"
TRIGGER_PREFIX = "replcheck_"
META = ("_rc_seq", "_rc_op", "_rc_at")
BUSY_TIMEOUT_MS = 30_000  # a writer holds the file's write lock; wait for it, never fail
SNAPSHOT_BATCH_ROWS = 20_000
_NOW = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"


def quote(name: str) -> str:
    """An SQLite identifier."""
    return '"' + name.replace('"', '""') + '"'


def table_part(table: str) -> str:
    """The table's name in ``main`` (trigger capture does not reach attached schemas)."""
    name = parse_table(table)
    if name.schema not in (None, "main"):
        raise ConfigError(f"SQLite trigger capture covers the main schema only, not {table}")
    return name.name


def log_table(table: str) -> str:
    """The logging table of a captured table."""
    return LOG_PREFIX + table_part(table)


class SQLiteTriggerDialect(TriggerDialect):
    """Trigger capture of an SQLite file.

    Args:
        path: The database file.
        tables: The pipeline's captured tables (the reader reads their logging tables only,
            never another pipeline's).
    """

    name = "SQLite"

    def __init__(self, path: str, tables: Sequence[str]) -> None:
        self.path = path
        self.tables = tuple(tables)
        self.connector = SQLiteConnector(f"sqlite:///{path}")
        self._schemas: dict[str, TableSchema] = {}

    # -- set-up -----------------------------------------------------------------------

    def install_statements(self, tables: Sequence[str]) -> list[str]:
        """The sequence table, then per table its logging table and triggers (re-created,
        so a second run follows added columns)."""
        statements = [
            f"CREATE TABLE IF NOT EXISTS {quote(SEQUENCE_TABLE)}"
            " (seq INTEGER PRIMARY KEY AUTOINCREMENT)",
            f"CREATE TABLE IF NOT EXISTS {quote(GROUPS_TABLE)} (end_seq INTEGER PRIMARY KEY)",
        ]
        for table in tables:
            statements += self._table_statements(table)
        return statements

    def _table_statements(self, table: str) -> list[str]:
        schema = self._reflect(table)
        if not schema.primary_key:
            raise ConfigError(f"SQLite trigger capture needs a primary key on table {table}")
        name, log = table_part(table), log_table(table)
        columns = [column.name for column in schema.columns]
        listed = ", ".join(quote(c) for c in columns)
        meta = ", ".join(f"{quote(c)}" for c in META)
        statements = [
            f"CREATE TABLE IF NOT EXISTS {quote(log)} ({META[0]} INTEGER PRIMARY KEY,"
            f" {META[1]} TEXT NOT NULL, {META[2]} TEXT NOT NULL, {listed})",
            *self._missing_columns(log, columns),
            *(f"DROP TRIGGER IF EXISTS {quote(t)}" for t in _trigger_names(name)),
        ]

        def record(op: str, image: str) -> str:
            values = ", ".join(f"{image}.{quote(c)}" for c in columns)
            return (
                f"INSERT INTO {quote(SEQUENCE_TABLE)} (seq) VALUES (NULL);"
                f" INSERT INTO {quote(log)} ({meta}, {listed})"
                f" VALUES (last_insert_rowid(), '{op}', {_NOW}, {values});"
            )

        same_key = " AND ".join(f"NEW.{quote(k)} IS OLD.{quote(k)}" for k in schema.primary_key)
        insert, update, move, delete = _trigger_names(name)
        on = quote(name)
        statements += [
            f"CREATE TRIGGER {quote(insert)} AFTER INSERT ON {on} BEGIN {record('c', 'NEW')} END",
            f"CREATE TRIGGER {quote(update)} AFTER UPDATE ON {on} WHEN {same_key}"
            f" BEGIN {record('u', 'NEW')} END",
            f"CREATE TRIGGER {quote(move)} AFTER UPDATE ON {on} WHEN NOT ({same_key})"
            f" BEGIN {record('d', 'OLD')} {record('c', 'NEW')} END",
            f"CREATE TRIGGER {quote(delete)} AFTER DELETE ON {on} BEGIN {record('d', 'OLD')} END",
        ]
        return statements

    def _missing_columns(self, log: str, columns: Sequence[str]) -> list[str]:
        """Columns added to the table since its logging table was created."""
        with contextlib.closing(self._connect()) as connection:
            rows = connection.execute("SELECT name FROM pragma_table_info(?)", (log,)).fetchall()
        present = {row[0] for row in rows}
        if not present:
            return []
        added = [column for column in columns if column not in present]
        return [f"ALTER TABLE {quote(log)} ADD COLUMN {quote(column)}" for column in added]

    def removal_statements(self, tables: Sequence[str]) -> list[str]:
        """The triggers and logging tables of ``tables``; the sequence table when no other
        logging table is left."""
        statements: list[str] = []
        for table in tables:
            name = table_part(table)
            statements += [f"DROP TRIGGER IF EXISTS {quote(t)}" for t in _trigger_names(name)]
            statements.append(f"DROP TABLE IF EXISTS {quote(log_table(table))}")
        removed = {log_table(table) for table in tables}
        if not set(self._log_tables()) - removed:
            statements.append(f"DROP TABLE IF EXISTS {quote(SEQUENCE_TABLE)}")
            statements.append(f"DROP TABLE IF EXISTS {quote(GROUPS_TABLE)}")
        return statements

    def table_names(self) -> list[str]:
        """The file's tables, without SQLite's and trigger capture's own."""
        with contextlib.closing(self._connect()) as connection:
            rows = connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'"
                " AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND substr(name, 1, ?) <> ?",
                (len(TRIGGER_PREFIX), TRIGGER_PREFIX),
            ).fetchall()
        return sorted(row[0] for row in rows)

    def _log_tables(self) -> list[str]:
        with contextlib.closing(self._connect()) as connection:
            rows = connection.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND substr(name, 1, ?) = ?",
                (len(LOG_PREFIX), LOG_PREFIX),
            ).fetchall()
        return [row[0] for row in rows]

    def execute(self, statements: Sequence[str]) -> None:
        """Run ``statements`` in one write transaction (SQLite's DDL is transactional)."""
        with contextlib.closing(self._connect()) as connection:
            connection.execute("BEGIN IMMEDIATE")
            try:
                for statement in statements:
                    connection.execute(statement)
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")

    def check_installed(self, tables: Sequence[str]) -> None:
        """Every table has its logging table and its four triggers."""
        with contextlib.closing(self._connect()) as connection:
            found = {
                row[0]
                for row in connection.execute(
                    "SELECT name FROM sqlite_master WHERE type IN ('table', 'trigger')"
                )
            }
        for table in tables:
            wanted = {log_table(table), SEQUENCE_TABLE, GROUPS_TABLE}
            wanted |= set(_trigger_names(table_part(table)))
            if not wanted <= found:
                raise TerminalError(
                    f"trigger capture of table {table} is not set up in {self.path}: run"
                    " replcheck cdc install-capture for the pipeline first",
                    {"table": table, "missing": sorted(wanted - found)},
                )

    # -- reading ------------------------------------------------------------------------

    @contextlib.contextmanager
    def read_session(self) -> Iterator[CaptureSession]:
        """One read transaction."""
        with contextlib.closing(self._connect()) as connection:
            connection.execute("BEGIN")
            try:
                yield _Session(self, connection)
            finally:
                connection.execute("ROLLBACK")

    def end_position(self) -> int:
        """The highest capture sequence value committed."""
        with contextlib.closing(self._connect()) as connection:
            return sequence_value(connection)

    def describe(self, table: str) -> TableDescription:
        """The table's columns (as the snapshot reads them) and primary key."""
        schema = self._reflect(table)
        columns = [column.name for column in schema.columns]
        arrow = self.connector.arrow_schema(schema, columns)
        arrow = arrow.remove(arrow.get_field_index(POSITION_COLUMN))
        return TableDescription(table, arrow, schema.primary_key)

    def converters(self, table: str) -> list[tuple[str, Callable[[Any], Any]]]:
        """Each column's name and the conversion of its stored value."""
        return [(c.name, value_converter(c)) for c in self._reflect(table).columns]

    def snapshots(self, tables: Sequence[str]) -> SnapshotReader:
        """Reads tables in one read transaction at the capture sequence it sees."""
        return SQLiteCaptureSnapshots(self)

    def purge(self, upto: int, batch_rows: int) -> int:
        """Delete up to ``batch_rows`` rows per logging table (and of the sequence table) at
        or below ``upto``."""
        deleted = 0
        with contextlib.closing(self._connect()) as connection:
            connection.execute("BEGIN IMMEDIATE")
            columns = {SEQUENCE_TABLE: "seq", GROUPS_TABLE: "end_seq"}
            for log in [*self._log_tables(), SEQUENCE_TABLE, GROUPS_TABLE]:
                column = columns.get(log, META[0])
                cursor = connection.execute(
                    f"DELETE FROM {quote(log)} WHERE {column} IN (SELECT {column} FROM"
                    f" {quote(log)} WHERE {column} <= ? ORDER BY {column} LIMIT ?)",
                    (upto, batch_rows),
                )
                deleted += cursor.rowcount
            connection.execute("COMMIT")
        return deleted

    def backlog(self) -> int:
        """The logging rows not purged yet."""
        with contextlib.closing(self._connect()) as connection:
            return sum(
                connection.execute(f"SELECT count(*) FROM {quote(log)}").fetchone()[0]
                for log in self._log_tables()
            )

    def next_group(self, after: int) -> int | None:
        """Where the transaction after ``after`` ends: as recorded, or the sequence's value
        now, recorded before the reader yields it.

        SQLite records no transaction ids, so the reader yields what committed between two
        polls as one transaction. Recording where each ends makes a re-read after a restart
        yield the same transactions at the same positions, as the pipeline's exactly-once
        writes and its row image store need (a killed run may have written some of them).
        """
        with contextlib.closing(self._connect()) as connection:
            connection.execute("BEGIN IMMEDIATE")
            row = connection.execute(
                f"SELECT min(end_seq) FROM {quote(GROUPS_TABLE)} WHERE end_seq > ?", (after,)
            ).fetchone()
            end = row[0] if row and row[0] is not None else sequence_value(connection)
            if end > after:
                connection.execute(
                    f"INSERT OR IGNORE INTO {quote(GROUPS_TABLE)} VALUES (?)", (end,)
                )
            connection.execute("COMMIT")
        return end if end > after else None

    def close(self) -> None:
        """Connections are opened per use: nothing to release."""

    def _reflect(self, table: str) -> TableSchema:
        if table not in self._schemas:
            self._schemas[table] = self.connector.reflect(table)
        return self._schemas[table]

    def _connect(self) -> sqlite3.Connection:
        try:
            # mode=rw: a missing file is an error, never an empty database created for it.
            uri = f"file:{urllib.parse.quote(self.path)}?mode=rw"
            connection = sqlite3.connect(uri, uri=True, isolation_level=None)
        except sqlite3.Error as exc:
            raise TerminalError(f"cannot open SQLite file {self.path}: {exc}") from exc
        connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        return connection


def _trigger_names(name: str) -> tuple[str, str, str, str]:
    """The insert, update, key-moving update and delete triggers of table ``name``."""
    return tuple(f"{TRIGGER_PREFIX}{name}_{what}" for what in ("ins", "upd", "move", "del"))  # type: ignore[return-value]


def sequence_value(connection: sqlite3.Connection) -> int:
    """The capture sequence's high-water mark as ``connection``'s transaction sees it."""
    row = connection.execute(
        "SELECT seq FROM sqlite_sequence WHERE name = ?", (SEQUENCE_TABLE,)
    ).fetchone()
    return 0 if row is None else int(row[0])


class _Session(CaptureSession):
    """One read transaction over the logging tables."""

    def __init__(self, dialect: SQLiteTriggerDialect, connection: sqlite3.Connection) -> None:
        self.dialect = dialect
        self.connection = connection

    def visible_commits(self, after: int) -> VisibleCommits:
        """The next recorded transaction end (``next_group``): everything up to it is
        committed (one writer). Recorded before this read's first statement, so the read's
        snapshot holds it."""
        end = self.dialect.next_group(after)
        return VisibleCommits((end,) if end is not None else (), end or after, frozenset())

    def iter_rows(self, after: int, upto: int) -> Iterator[CaptureRow]:
        """Every table's rows in ``(after, upto]`` as one transaction at ``upto``."""
        txid = f"sqlite:{after + 1}-{upto}"
        rows = [row for table in self._tables() for row in self._rows(table, after, upto, txid)]
        yield from sorted(rows, key=lambda row: row.seq)

    def _tables(self) -> list[str]:
        return list(self.dialect.tables)

    def _rows(self, table: str, after: int, upto: int, txid: str) -> Iterator[CaptureRow]:
        converters = self.dialect.converters(table)
        listed = ", ".join(quote(name) for name, _ in converters)
        cursor = self.connection.execute(
            f"SELECT {', '.join(META)}, {listed} FROM {quote(log_table(table))}"
            f" WHERE {META[0]} > ? AND {META[0]} <= ?",
            (after, upto),
        )
        for seq, op, at, *values in cursor.fetchall():
            row = {
                name: None if value is None else convert(value)
                for (name, convert), value in zip(converters, values, strict=True)
            }
            written = dt.datetime.fromisoformat(at.replace("Z", "+00:00"))
            yield CaptureRow(upto, seq, txid, table, op, row, written)


class SQLiteCaptureSnapshots:
    """The initial load's snapshot: one read transaction, at the capture sequence it sees."""

    def __init__(self, dialect: SQLiteTriggerDialect) -> None:
        self.dialect = dialect

    @contextlib.contextmanager
    def snapshot(
        self, tables: Sequence[str], keys: Mapping[str, Sequence[tuple[object, ...]]] | None = None
    ) -> Iterator[tuple[Position, Iterator[TableSnapshot]]]:
        """Hold one read transaction; its position holds exactly the changes at or below it
        (SQLite's single writer)."""
        with self.dialect.read_session() as session:
            assert isinstance(session, _Session)
            position = capture_position(sequence_value(session.connection))
            yield position, self._iter_tables(session.connection, tables, keys or {})

    def _iter_tables(
        self,
        connection: sqlite3.Connection,
        tables: Sequence[str],
        keys: Mapping[str, Sequence[tuple[object, ...]]],
    ) -> Iterator[TableSnapshot]:
        for table in tables:
            description = self.dialect.describe(table)
            batches = self._batches(connection, description, keys.get(table))
            yield TableSnapshot(description, batches)

    def _batches(
        self,
        connection: sqlite3.Connection,
        description: TableDescription,
        keys: Sequence[tuple[object, ...]] | None,
    ) -> Iterator[Any]:
        import pyarrow as pa

        converters = self.dialect.converters(description.table)
        listed = ", ".join(quote(name) for name, _ in converters)
        cursor = connection.execute(f"SELECT {listed} FROM {quote(table_part(description.table))}")
        wanted = None if keys is None else {tuple(key) for key in keys}
        key_at = [description.schema.names.index(column) for column in description.key]
        while rows := cursor.fetchmany(SNAPSHOT_BATCH_ROWS):
            converted = [
                {
                    name: None if value is None else convert(value)
                    for (name, convert), value in zip(converters, row, strict=True)
                }
                for row in rows
                if wanted is None or tuple(row[i] for i in key_at) in wanted
            ]
            yield pa.RecordBatch.from_pylist(converted, schema=description.schema)


def capture_dialect(url: str, password: str | None, tables: Sequence[str]) -> SQLiteTriggerDialect:
    """The trigger capture of ``tables`` of an ``sqlite`` URL (no password: a file).

    Raises:
        ConfigError: A glob among the tables (capture is set up table by table).
    """
    globs = [table for table in tables if is_glob(table)]
    if globs or not tables:
        raise ConfigError(
            f"SQLite trigger capture needs its tables listed by name, not {globs or 'none'}"
        )
    for table in tables:
        table_part(table)  # in main, or a ConfigError before the file is opened
    path = file_path(url.split("?", 1)[0], "sqlite", "SQLite", "path/file.db")
    return SQLiteTriggerDialect(path, tables)
