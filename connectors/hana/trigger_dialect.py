"""SAP HANA's trigger capture (``connectors.trigger_capture``): replcheck reads no HANA log,
so a pipeline whose source is ``hana+hdbcli://...`` reads logging tables written by row
triggers, as SAP's own trigger-based replication (SLT) does. SQL: ``trigger_sql``.

Set-up (``replcheck cdc install-capture``): schema ``REPLCHECK_CAPTURE`` with the capture
sequence ``CAPTURE_SEQ`` and, per captured table, a logging table (the sequence value, the
writing transaction's ``CURRENT_UPDATE_TRANSACTION()``, the op, the UTC write time and a
copy of every column), and three row triggers in the table's schema (AFTER INSERT, UPDATE,
DELETE) writing the new row, or the old row for a delete; an update that changes the key is
recorded as the delete of the old row and the insert of the new one.

Positions. A HANA transaction learns its commit ID only once committed, and a trigger runs
before that, so no trigger can record a commit order. A transaction's position is the
sequence value of its *last* captured row. Guarantee: two transactions that write a common
row are ordered as they committed (the second waits on the row lock for the first to end,
so all its later rows take larger values); transactions without a common row are ordered
by their last write, which may differ from their commit order. Either way each transaction
reaches the lake whole, once, at a position no later transaction takes.

Gaps. Each read lists every visible capture value (each row's, so the values a visible
transaction took before its last are no gaps). A value not visible yet belongs to a
transaction still running or to one rolled back: the reader waits for it while any
transaction that could own it still runs (``connectors.trigger_capture.gaps``), the running
ones being the writing transactions in ``M_TRANSACTIONS``, listed after the sequence value
is read and before each read's REPEATABLE READ snapshot starts. This relies on a
transaction staying in ``M_TRANSACTIONS`` until its commit is visible to new snapshots.
The monitoring view shows the server it is queried on: a scale-out system is not supported.

The initial snapshot takes an EXCLUSIVE lock on the captured tables for an instant: granted
when every transaction that wrote them has ended, it keeps new writers out while the
snapshot starts and reads the sequence, so the snapshot holds exactly the transactions at
or below that value. The locks are taken with NOWAIT and all given back while a table is
still written, then tried again: the snapshot never queues writers behind it. The tries are
bounded (``LOCK_WAIT_S``); then the load stops with a transient error naming the table.

Not captured: ``TRUNCATE TABLE`` (HANA fires no trigger for it). Columns are listed when
the triggers are created: after ``ALTER TABLE`` run ``install-capture`` again.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from cdc_core.capture.position import Position
from cdc_core.capture.source import SnapshotReader, TableDescription, TableSnapshot
from cdc_core.errors import ConfigError, TerminalError, TransientError
from cdc_core.names import format_table, is_glob
from connectors.hana import sql
from connectors.hana import trigger_sql as tsql
from connectors.hana.connector import HanaConnector, converters_of, iter_batches
from connectors.hana.types import HanaColumn, catalog_columns, source_columns
from connectors.model import POSITION_COLUMN, Partition, TableSchema
from connectors.registry import without_log_parameters
from connectors.trigger_capture.dialect import (
    CaptureRow,
    CaptureSession,
    TriggerDialect,
    VisibleCommits,
)
from connectors.trigger_capture.position import capture_position

LOCK_WAIT_S = 30.0  # the longest the initial snapshot tries to lock the captured tables
LOCK_RETRY_S = 0.05


class HanaTriggerDialect(TriggerDialect):
    """Trigger capture of a HANA database.

    Args:
        connector: Opens the hdbcli connections (the snapshot connector of the URL).
        tables: The captured tables (a bare name is in the connection's current schema).
    """

    name = "HANA"

    def __init__(self, connector: HanaConnector, tables: Sequence[str]) -> None:
        self.connector = connector
        self._default_schema = connector.default_schema()
        self.tables = tuple(self.qualified(table) for table in tables)
        self._catalog: dict[str, tuple[tuple[HanaColumn, ...], TableSchema]] = {}

    def qualified(self, table: str) -> str:
        """The pipeline's name of ``table``: ``SCHEMA.TABLE`` as the catalog spells it."""
        return format_table(*sql.split_table(table, self._default_schema))

    def located(self, table: str) -> tsql.Located:
        """``table``'s schema and name in the catalog."""
        return tsql.Located(*sql.split_table(table, self._default_schema))

    # -- set-up -----------------------------------------------------------------------

    def install_statements(self, tables: Sequence[str]) -> list[str]:
        """The schema and sequence, then per table its logging table (and columns added
        since) and its triggers, re-created so that they copy every column."""
        statements = [tsql.create_schema(), tsql.create_sequence()]
        for table in tables:
            statements += self._table_statements(self.qualified(table))
        return statements

    def _table_statements(self, table: str) -> list[str]:
        columns, schema = self.catalog(table)
        if not schema.primary_key:
            raise ConfigError(f"HANA trigger capture needs a primary key on table {table}")
        unreadable = [c for c in schema.columns if c.ltype is None]
        if unreadable:
            listed = ", ".join(f"{c.name} ({c.native_type})" for c in unreadable)
            raise ConfigError(
                f"table {table}: replcheck cannot read columns {listed}; leave the table out"
                " of the pipeline or change those columns' types"
            )
        source = self.located(table)
        names = [column.name for column in columns]
        return [
            tsql.create_log_table(source, columns),
            *tsql.add_log_columns(source, self._missing_columns(source, columns)),
            *(tsql.drop_trigger(source, name) for name in tsql.trigger_names(source)),
            *tsql.create_triggers(source, names, schema.primary_key),
        ]

    def _missing_columns(
        self, source: tsql.Located, columns: Sequence[HanaColumn]
    ) -> list[HanaColumn]:
        log = tsql.log_table(source)
        present = {row[0] for row in self._query(sql.COLUMNS, (log.schema, log.name))}
        if not present:
            return []  # not created yet: created with every column
        return [column for column in columns if column.name not in present]

    def removal_statements(self, tables: Sequence[str]) -> list[str]:
        """The triggers and logging tables of ``tables``; the schema and sequence when no
        other table is captured."""
        statements: list[str] = []
        removed = set()
        for table in tables:
            source = self.located(table)
            statements += [tsql.drop_trigger(source, n) for n in tsql.trigger_names(source)]
            statements.append(tsql.drop_table(tsql.log_table(source)))
            removed.add(tsql.log_table(source).name)
        left = {row[0] for row in self._query(tsql.LOG_TABLES, (tsql.SCHEMA,))}
        if not left - removed:
            statements.append(tsql.drop_schema())
        return statements

    def execute(self, statements: Sequence[str]) -> None:
        """Run ``statements`` in one transaction (DDL included: AUTOCOMMIT DDL OFF)."""
        with contextlib.closing(self.connector.connect()) as connection:
            connection.setautocommit(False)
            with contextlib.closing(connection.cursor()) as cursor:
                cursor.execute(tsql.DDL_IN_TRANSACTION)
                for statement in statements:
                    cursor.execute(statement)
            connection.commit()

    def check_installed(self, tables: Sequence[str]) -> None:
        """Every table has its logging table and its three triggers."""
        for table in map(self.qualified, tables):
            source = self.located(table)
            log = tsql.log_table(source)
            (found,) = self._query(tsql.TABLE_EXISTS, (log.schema, log.name))[0]
            located = (source.schema, source.name)
            triggers = {row[0] for row in self._query(tsql.TRIGGERS_OF, located)}
            missing = sorted(set(tsql.trigger_names(source)) - triggers)
            if not int(found) or missing:
                raise TerminalError(
                    f"trigger capture of table {table} is not set up in {self.connector.where}:"
                    " run replcheck cdc install-capture for the pipeline first",
                    {"table": table, "missing": missing if int(found) else [log.name]},
                )

    # -- reading ------------------------------------------------------------------------

    @contextlib.contextmanager
    def read_session(self) -> Iterator[CaptureSession]:
        """The sequence's value, then the running transactions (autocommit reads), then a
        REPEATABLE READ transaction whose snapshot starts at its first query."""
        with contextlib.closing(self.connector.connect()) as connection:
            cursor = connection.cursor()
            taken = _sequence_value(cursor)
            cursor.execute(tsql.RUNNING_TRANSACTIONS)
            running = frozenset(str(row[0]) for row in cursor.fetchall())
            connection.setautocommit(False)
            cursor.execute(tsql.BEGIN_SNAPSHOT)
            try:
                yield _Session(self, cursor, taken, running)
            finally:
                connection.rollback()

    def end_position(self) -> int:
        """The sequence's last value given out: every commit so far is at or below it."""
        with contextlib.closing(self.connector.connect()) as connection:
            return _sequence_value(connection.cursor())

    def describe(self, table: str) -> TableDescription:
        """The table's columns (as the snapshot reads them) and primary key."""
        _, schema = self.catalog(table)
        names = [column.name for column in schema.columns]
        arrow = self.connector.arrow_schema(schema, names)
        arrow = arrow.remove(arrow.get_field_index(POSITION_COLUMN))
        return TableDescription(self.qualified(table), arrow, schema.primary_key)

    def converters(self, table: str) -> list[Callable[[Any], Any]]:
        """The conversion of each column's hdbcli value, in column order."""
        _, schema = self.catalog(table)
        return converters_of(schema, [column.name for column in schema.columns])

    def snapshots(self, tables: Sequence[str]) -> SnapshotReader:
        """Reads tables in one snapshot at the capture position it holds exactly."""
        return HanaCaptureSnapshots(self)

    def table_names(self) -> list[str]:
        """The tables of the captured tables' schemas (the capture's own are elsewhere)."""
        schemas = sorted({self.located(table).schema for table in self.tables})
        return [
            format_table(str(schema), str(name))
            for one in schemas
            for schema, name in self._query(tsql.SCHEMA_TABLES, (one,))
        ]

    def purge(self, upto: int, batch_rows: int) -> int:
        """Delete the rows of up to ``batch_rows`` transactions at or below ``upto`` (a
        transaction above it keeps its rows below it)."""
        logs = self.log_tables()
        with contextlib.closing(self.connector.connect()) as connection:
            connection.setautocommit(False)
            cursor = connection.cursor()
            cursor.execute(tsql.purgeable_transactions(logs, batch_rows), [*[0] * len(logs), upto])
            transactions = [int(row[0]) for row in cursor.fetchall()]
            deleted = 0
            for chunk in tsql.chunks(transactions):
                for log in logs:
                    cursor.execute(tsql.delete_transactions(log, len(chunk)), [upto, *chunk])
                    deleted += max(cursor.rowcount, 0)
            connection.commit()
        return deleted

    def backlog(self) -> int:
        """The logging rows not purged yet."""
        return sum(int(self._query(tsql.count_rows(log), ())[0][0]) for log in self.log_tables())

    def close(self) -> None:
        """Connections are opened per use: nothing to release."""

    def log_tables(self) -> list[tsql.Located]:
        """The captured tables' logging tables, in the order of ``tables``."""
        return [tsql.log_table(self.located(table)) for table in self.tables]

    def catalog(self, table: str) -> tuple[tuple[HanaColumn, ...], TableSchema]:
        """The table's catalog columns and its schema (read once)."""
        table = self.qualified(table)
        if table not in self._catalog:
            source = self.located(table)
            rows = self._query(sql.COLUMNS, located := (source.schema, source.name))
            if not rows:
                raise TerminalError(
                    f"table {table} does not exist in {self.connector.where}", {"table": table}
                )
            key = tuple(str(r[0]) for r in self._query(sql.PRIMARY_KEY, located))
            schema = TableSchema(table, source_columns(rows), key)
            self._catalog[table] = (catalog_columns(rows), schema)
        return self._catalog[table]

    def _query(self, statement: str, params: Sequence[object]) -> list[tuple[Any, ...]]:
        """The rows of one catalog query, on a connection of its own."""
        with contextlib.closing(self.connector.connect()) as connection:
            cursor = connection.cursor()
            cursor.execute(statement, list(params))
            return [tuple(row) for row in cursor.fetchall()]


def _sequence_value(cursor: Any) -> int:
    cursor.execute(tsql.SEQUENCE_VALUE, list(tsql.SEQUENCE_PARAMS))
    row = cursor.fetchone()
    if row is None:
        raise TerminalError(
            f"trigger capture's sequence {tsql.SCHEMA}.{tsql.SEQUENCE} is missing: run"
            " replcheck cdc install-capture for the pipeline first"
        )
    return int(row[0])


class _Session(CaptureSession):
    """One REPEATABLE READ snapshot over the logging tables."""

    def __init__(
        self, dialect: HanaTriggerDialect, cursor: Any, taken: int, running: frozenset[str]
    ) -> None:
        self.dialect = dialect
        self.cursor = cursor
        self.taken = taken
        self.running = running
        self.logs = dialect.log_tables()

    def visible_commits(self, after: int) -> VisibleCommits:
        """The visible capture values above ``after``, every row's (this first query fixes
        the snapshot every later query of the session reads)."""
        self.cursor.execute(tsql.visible_values(self.logs), [after] * len(self.logs))
        positions = tuple(int(row[0]) for row in self.cursor.fetchall())
        return VisibleCommits(positions, self.taken, self.running)

    def iter_rows(self, after: int, upto: int) -> Iterator[CaptureRow]:
        """The transactions whose position is in ``(after, upto]``, whole, in that order."""
        self.cursor.execute(
            tsql.committed_transactions(self.logs), [*[after] * len(self.logs), upto]
        )
        positions = {int(txid): int(position) for txid, position in self.cursor.fetchall()}
        if not positions:
            return
        rows = [
            row
            for table in self.dialect.tables
            for chunk in tsql.chunks(sorted(positions))
            for row in self._rows(table, chunk, positions, upto)
        ]
        yield from sorted(rows, key=lambda row: (row.position, row.seq))

    def _rows(
        self, table: str, chunk: Sequence[int], positions: Mapping[int, int], upto: int
    ) -> Iterator[CaptureRow]:
        _, schema = self.dialect.catalog(table)
        names = [column.name for column in schema.columns]
        converters = self.dialect.converters(table)
        log = tsql.log_table(self.dialect.located(table))
        self.cursor.execute(tsql.transaction_rows(log, names, len(chunk)), [upto, *chunk])
        for seq, txid, op, written, *values in self.cursor.fetchall():
            image = {
                name: None if value is None else convert(value)
                for name, convert, value in zip(names, converters, values, strict=True)
            }
            at = written.replace(tzinfo=dt.UTC)  # CURRENT_UTCTIMESTAMP: a UTC wall clock
            yield CaptureRow(positions[int(txid)], int(seq), str(txid), table, op, image, at)


class HanaCaptureSnapshots:
    """The initial load's snapshot, at the capture position it holds exactly."""

    def __init__(self, dialect: HanaTriggerDialect) -> None:
        self.dialect = dialect

    @contextlib.contextmanager
    def snapshot(
        self, tables: Sequence[str], keys: Mapping[str, Sequence[tuple[object, ...]]] | None = None
    ) -> Iterator[tuple[Position, Iterator[TableSnapshot]]]:
        """Lock the captured tables, start the snapshot and read the sequence in it, release
        the locks, then read ``tables`` in the snapshot."""
        connector = self.dialect.connector
        with (
            contextlib.closing(connector.connect()) as locker,
            contextlib.closing(connector.connect()) as reader,
        ):
            cursor = reader.cursor()
            reader.setautocommit(False)
            cursor.execute(tsql.BEGIN_SNAPSHOT)
            self._lock(locker)
            try:
                position = capture_position(_sequence_value(cursor))  # fixes the snapshot
            finally:
                locker.rollback()  # releases the locks: the snapshot stays
            try:
                yield position, self._iter_tables(cursor, tables, keys or {}, position.value)
            finally:
                reader.rollback()

    def _lock(self, locker: Any) -> None:
        """Every captured table locked EXCLUSIVE: no transaction that wrote one still runs.

        Each attempt takes the locks with NOWAIT and gives them all back when one is held,
        so the snapshot never waits holding a lock (a writer holding one table and asking
        for another would deadlock with it) and never queues writers behind it."""
        locker.setautocommit(False)
        cursor = locker.cursor()
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                for table in self.dialect.tables:
                    cursor.execute(tsql.lock_exclusive(self.dialect.located(table)))
                return
            except self.dialect.connector.driver_error() as exc:
                locker.rollback()
                if time.monotonic() > deadline:
                    raise TransientError(
                        f"the initial snapshot of trigger capture found table {table} in"
                        f" {self.dialect.connector.where} written by an open transaction for"
                        f" {LOCK_WAIT_S} s; start the pipeline again when that transaction"
                        " has ended",
                        {"table": table},
                    ) from exc
                time.sleep(LOCK_RETRY_S)

    def _iter_tables(
        self, cursor: Any, tables: Sequence[str], keys: Mapping[str, Any], position: int
    ) -> Iterator[TableSnapshot]:
        for table in tables:
            description = self.dialect.describe(table)
            _, schema = self.dialect.catalog(table)
            names = list(description.schema.names)
            partition = Partition(0)
            if table in keys:
                rows = tuple(tuple(row) for row in keys[table])
                partition = Partition(0, key_columns=description.key, keys=rows)
            source = self.dialect.located(table)
            query, params = sql.partition_select(source.schema, source.name, names, partition)
            cursor.execute(query, params)
            arrow = self.dialect.connector.arrow_schema(schema, names)
            batches = (
                batch.drop_columns([POSITION_COLUMN])
                for batch in iter_batches(cursor, converters_of(schema, names), arrow, position)
            )
            yield TableSnapshot(description, batches)


def capture_dialect(url: str, password: str | None, tables: Sequence[str]) -> HanaTriggerDialect:
    """The trigger capture of ``tables`` of a ``hana`` URL (its ``capture`` parameter is
    left out of the driver's).

    Raises:
        ConfigError: A glob among the tables (capture is set up table by table).
    """
    globs = [table for table in tables if is_glob(table)]
    if globs or not tables:
        raise ConfigError(
            f"HANA trigger capture needs its tables listed by name, not {globs or 'none'}"
        )
    return HanaTriggerDialect(HanaConnector(without_log_parameters(url), password), tables)
