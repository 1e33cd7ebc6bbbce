"""PostgreSQL's trigger capture (``connectors.trigger_capture``), for a source whose log
cannot be read (no ``wal_level=logical``, no replication privilege, a managed service):
chosen by ``capture=trigger`` in the pipeline's source URL.

Set-up (``replcheck cdc install-capture``), all in schema ``replcheck_capture``:

- per captured table a logging table (``log_<schema>.<table>``: the row sequence, the
  writing transaction ``pg_current_xact_id()``, the op and a copy of every column) and an
  AFTER INSERT/UPDATE/DELETE row trigger writing it: the new row for inserts and updates
  that keep the key, the old row for deletes; an update that moves the key is recorded as a
  delete and an insert. A statement trigger records TRUNCATE (which fires no row trigger)
  in ``truncates``;
- a *commit sequence*. PostgreSQL exposes no commit order (``pg_xact_commit_timestamp``
  only with ``track_commit_timestamp``, and not as an order), and a row sequence taken at
  write time does not give one: a transaction that started later can commit first. So the
  row trigger, at a transaction's first captured row, inserts a marker whose DEFERRABLE
  INITIALLY DEFERRED constraint trigger runs at COMMIT
  (https://www.postgresql.org/docs/current/sql-createtrigger.html, "constraint trigger")
  and records ``(nextval(commit_seq), xid)`` in ``commits``. A transaction's position is
  its (last) commit sequence value.

Guarantees. Two transactions that write the same row are ordered by the row lock: the
second writes only after the first committed, so it takes the larger commit sequence
value; the order of the positions is therefore a commit order as far as any row can tell
(transactions without a common row may commit in the other order within the instant
between the commit trigger and the commit itself). A commit sequence value taken by a
transaction still committing is a gap the reader waits for, and is closed once every
transaction that could own it has finished (``connectors.trigger_capture.gaps``; running
transactions are those holding the lock on their own id in ``pg_locks``, listed before each
read's snapshot). The commit trigger holds a shared
transaction-level advisory lock, and the initial snapshot takes it exclusively for the
instant it starts, so no transaction is between its commit trigger and its commit then:
the snapshot holds exactly the transactions at or below the commit sequence value it reads.
With ``SET CONSTRAINTS ALL IMMEDIATE`` the marker fires at the end of each statement and the
next captured row marks the transaction again: its last value still follows its last
write. Not supported: two-phase commit (``PREPARE TRANSACTION`` with advisory locks). Columns
are listed when the trigger is created: after ``ALTER TABLE`` run ``install-capture`` again
in the same transaction as the DDL.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cdc_core.capture.position import Position
from cdc_core.capture.source import SnapshotReader, TableDescription, TableSnapshot
from cdc_core.errors import ConfigError, TerminalError
from cdc_core.names import is_glob
from connectors.model import POSITION_COLUMN, Partition, SourceColumn, TableSchema
from connectors.postgres.connector import (
    PostgresConnector,
    partition_query,
    qualified_name,
)
from connectors.postgres.snapshot import describe_table
from connectors.postgres.types import quote, select_expression
from connectors.registry import without_log_parameters
from connectors.trigger_capture.dialect import (
    CaptureRow,
    CaptureSession,
    TriggerDialect,
    VisibleCommits,
)
from connectors.trigger_capture.position import capture_position
from merkle import types as lt

if TYPE_CHECKING:
    import psycopg

SCHEMA = "replcheck_capture"
COMMITS = f"{SCHEMA}.commits"
MARKERS = f"{SCHEMA}.markers"
TRUNCATES = f"{SCHEMA}.truncates"
ROW_SEQUENCE = f"{SCHEMA}.row_seq"
COMMIT_SEQUENCE = f"{SCHEMA}.commit_seq"
TRIGGER = "replcheck_capture"
TRUNCATE_TRIGGER = "replcheck_capture_truncate"
MARKED = "replcheck.capture_xid"  # the transaction-local setting: this transaction is marked
COMMIT_LOCK = 0x7265706C63646301  # the advisory lock between commit triggers and snapshots
META = (
    SourceColumn("_rc_seq", "bigint", lt.IntegerType()),
    SourceColumn("_rc_xid", "xid8", lt.StringType()),
    SourceColumn("_rc_op", '"char"', lt.StringType()),
)

# The functions run with their owner's (the installer's) rights, so an application's role
# needs no grant on the capture's objects; a fixed search_path keeps them from running
# another role's objects (https://www.postgresql.org/docs/current/sql-createfunction.html,
# "Writing SECURITY DEFINER Functions Safely"). Every name in them is schema-qualified.
DEFINER = "SECURITY DEFINER SET search_path = pg_catalog, pg_temp"

_COMMIT_FUNCTION = f"""CREATE OR REPLACE FUNCTION {SCHEMA}.at_commit() RETURNS trigger
LANGUAGE plpgsql {DEFINER} AS $$
BEGIN
  PERFORM pg_advisory_xact_lock_shared({COMMIT_LOCK});
  INSERT INTO {COMMITS} VALUES (nextval('{COMMIT_SEQUENCE}'), NEW.xid, clock_timestamp());
  DELETE FROM {MARKERS} WHERE xid = NEW.xid;
  PERFORM set_config('{MARKED}', '', true);
  RETURN NULL;
END $$"""

_MARK_FUNCTION = f"""CREATE OR REPLACE FUNCTION {SCHEMA}.mark_transaction() RETURNS void
LANGUAGE plpgsql {DEFINER} AS $$
BEGIN
  IF current_setting('{MARKED}', true) IS DISTINCT FROM pg_current_xact_id()::text THEN
    INSERT INTO {MARKERS} VALUES (pg_current_xact_id());
    PERFORM set_config('{MARKED}', pg_current_xact_id()::text, true);
  END IF;
END $$"""

_TRUNCATE_FUNCTION = f"""CREATE OR REPLACE FUNCTION {SCHEMA}.at_truncate() RETURNS trigger
LANGUAGE plpgsql {DEFINER} AS $$
BEGIN
  PERFORM {SCHEMA}.mark_transaction();
  INSERT INTO {TRUNCATES} VALUES (nextval('{ROW_SEQUENCE}'), pg_current_xact_id(), TG_ARGV[0]);
  RETURN NULL;
END $$"""

_COMMON = [
    f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}",
    f"CREATE SEQUENCE IF NOT EXISTS {ROW_SEQUENCE}",
    f"CREATE SEQUENCE IF NOT EXISTS {COMMIT_SEQUENCE}",
    f"CREATE TABLE IF NOT EXISTS {COMMITS} (commit_seq bigint PRIMARY KEY, xid xid8 NOT NULL,"
    " committed_at timestamptz NOT NULL)",
    f"CREATE INDEX IF NOT EXISTS commits_xid ON {COMMITS} (xid)",
    f"CREATE TABLE IF NOT EXISTS {MARKERS} (xid xid8 NOT NULL)",
    f"CREATE TABLE IF NOT EXISTS {TRUNCATES} (_rc_seq bigint NOT NULL, _rc_xid xid8 NOT NULL,"
    " tbl text NOT NULL)",
    f"CREATE INDEX IF NOT EXISTS truncates_xid ON {TRUNCATES} (_rc_xid)",
    _COMMIT_FUNCTION,
    _MARK_FUNCTION,
    _TRUNCATE_FUNCTION,
    f"DROP TRIGGER IF EXISTS at_commit ON {MARKERS}",
    f"CREATE CONSTRAINT TRIGGER at_commit AFTER INSERT ON {MARKERS} DEFERRABLE INITIALLY"
    f" DEFERRED FOR EACH ROW EXECUTE FUNCTION {SCHEMA}.at_commit()",
]


def log_table(table: str) -> str:
    """The quoted logging table of a captured ``schema.table``."""
    name = f"log_{qualified_name(table)}"
    if len(name.encode()) > 63:  # NAMEDATALEN - 1: a longer name would be cut, and clash
        raise ConfigError(f"table {table}: its name is too long for trigger capture's {name}")
    return f"{SCHEMA}.{quote(name)}"


def capture_function(table: str) -> str:
    """The quoted trigger function of a captured ``schema.table``."""
    return f"{SCHEMA}.{quote('capture_' + qualified_name(table))}"


class PostgresTriggerDialect(TriggerDialect):
    """Trigger capture of a PostgreSQL database.

    Args:
        url: The source URL (its ``capture`` and log parameters are left out).
        password: The user's password.
        tables: The captured tables (a bare name is in ``public``).
    """

    name = "Postgres"

    def __init__(self, url: str, password: str | None, tables: Sequence[str]) -> None:
        self.connector = PostgresConnector(without_log_parameters(url), password)
        self.tables = tuple(qualified_name(table) for table in tables)
        self._descriptions: dict[str, TableDescription] = {}
        self._schemas: dict[str, TableSchema] = {}

    # -- set-up -----------------------------------------------------------------------

    def install_statements(self, tables: Sequence[str]) -> list[str]:
        """The schema, sequences, commit marking, then per table its logging table, trigger
        function and trigger."""
        statements = list(_COMMON)
        for table in tables:
            statements += self._table_statements(qualified_name(table))
        return statements

    def _table_statements(self, table: str) -> list[str]:
        key = self.describe(table).key
        schema = self._reflect(table)
        columns = [column.name for column in schema.columns]
        log, function = log_table(table), capture_function(table)
        listed = ", ".join(quote(c) for c in ["_rc_seq", "_rc_xid", "_rc_op", *columns])

        def record(op: str, image: str) -> str:
            values = ", ".join(f"{image}.{quote(c)}" for c in columns)
            return (
                f"INSERT INTO {log} ({listed}) VALUES (nextval('{ROW_SEQUENCE}'),"
                f" pg_current_xact_id(), '{op}', {values});"
            )

        same_key = " AND ".join(_same_value(schema.column(k)) for k in key)
        body = f"""BEGIN
  PERFORM {SCHEMA}.mark_transaction();
  IF TG_OP = 'INSERT' THEN {record("c", "NEW")}
  ELSIF TG_OP = 'DELETE' THEN {record("d", "OLD")}
  ELSIF {same_key} THEN {record("u", "NEW")}
  ELSE {record("d", "OLD")} {record("c", "NEW")}
  END IF;
  RETURN NULL;
END"""
        source = self.connector.qualified(table)
        return [
            f"CREATE TABLE IF NOT EXISTS {log} (_rc_seq bigint NOT NULL, _rc_xid xid8 NOT NULL,"
            f' _rc_op "char" NOT NULL, LIKE {source})',
            *self._missing_columns(table, columns),
            f"CREATE INDEX IF NOT EXISTS {quote('xid_' + qualified_name(table))}"
            f" ON {log} (_rc_xid)",
            f"CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql {DEFINER}"
            f" AS $$\n{body} $$",
            f"CREATE OR REPLACE TRIGGER {TRIGGER} AFTER INSERT OR UPDATE OR DELETE ON {source}"
            f" FOR EACH ROW EXECUTE FUNCTION {function}()",
            f"CREATE OR REPLACE TRIGGER {TRUNCATE_TRIGGER} AFTER TRUNCATE ON {source}"
            f" FOR EACH STATEMENT EXECUTE FUNCTION {SCHEMA}.at_truncate({_literal(table)})",
        ]

    def _missing_columns(self, table: str, columns: Sequence[str]) -> list[str]:
        """Columns added to the table since its logging table was created."""
        schema_name, name = SCHEMA, f"log_{table}"
        with contextlib.closing(self.connector.connect()) as connection:
            rows = connection.execute(
                "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attnum > 0"
                " AND NOT attisdropped",
                (f"{schema_name}.{quote(name)}",),
            ).fetchall()
        present = {row[0] for row in rows}
        if not present:
            return []
        types = {c.name: c.native_type for c in self._reflect(table).columns}
        return [
            f"ALTER TABLE {log_table(table)} ADD COLUMN {quote(c)} {types[c]}"
            for c in columns
            if c not in present
        ]

    def removal_statements(self, tables: Sequence[str]) -> list[str]:
        """The triggers, functions and logging tables of ``tables``; the schema when no
        other table is captured."""
        statements: list[str] = []
        for table in map(qualified_name, tables):
            source = self.connector.qualified(table)
            if self._exists(table):
                statements.append(f"DROP TRIGGER IF EXISTS {TRIGGER} ON {source}")
                statements.append(f"DROP TRIGGER IF EXISTS {TRUNCATE_TRIGGER} ON {source}")
            statements.append(f"DROP FUNCTION IF EXISTS {capture_function(table)}()")
            statements.append(f"DROP TABLE IF EXISTS {log_table(table)}")
        removed = {f"log_{qualified_name(table)}" for table in tables}
        if not set(self._log_tables()) - removed:
            statements.append(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
        return statements

    def _exists(self, table: str) -> bool:
        with contextlib.closing(self.connector.connect()) as connection:
            row = connection.execute(
                "SELECT to_regclass(%s)", (self.connector.qualified(table),)
            ).fetchone()
        return row is not None and row[0] is not None

    def _log_tables(self) -> list[str]:
        with contextlib.closing(self.connector.connect()) as connection:
            rows = connection.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s"
                " AND tablename LIKE 'log\\_%%'",
                (SCHEMA,),
            ).fetchall()
        return [row[0] for row in rows]

    def execute(self, statements: Sequence[str]) -> None:
        """Run ``statements`` in one transaction (PostgreSQL's DDL is transactional)."""
        with contextlib.closing(self.connector.connect(autocommit=False)) as connection:
            for statement in statements:
                connection.execute(statement.encode())
            connection.commit()

    def check_installed(self, tables: Sequence[str]) -> None:
        """Every table has its logging table and trigger."""
        with contextlib.closing(self.connector.connect()) as connection:
            for table in map(qualified_name, tables):
                row = connection.execute(
                    "SELECT to_regclass(%s) IS NOT NULL AND EXISTS (SELECT 1 FROM pg_trigger"
                    " WHERE tgrelid = to_regclass(%s) AND tgname = %s)",
                    (log_table(table), self.connector.qualified(table), TRIGGER),
                ).fetchone()
                if not (row and row[0]):
                    raise TerminalError(
                        f"trigger capture of table {table} is not set up in"
                        f" {self.connector.where}: run replcheck cdc install-capture for the"
                        " pipeline first",
                        {"table": table},
                    )

    # -- reading ------------------------------------------------------------------------

    @contextlib.contextmanager
    def read_session(self) -> Iterator[CaptureSession]:
        """The commit sequence's value, the transactions running then, and a read-only
        REPEATABLE READ transaction whose snapshot starts after both were read."""
        from psycopg import IsolationLevel

        with contextlib.closing(self.connector.connect()) as connection:
            taken = commit_sequence_value(connection)  # autocommit: before the snapshot
            running = running_transactions(connection)
            connection.autocommit = False
            connection.isolation_level = IsolationLevel.REPEATABLE_READ
            connection.read_only = True
            try:
                yield _Session(self, connection, taken, running)
            finally:
                connection.rollback()

    def end_position(self) -> int:
        """The commit sequence's last value: every commit so far is at or below it."""
        with contextlib.closing(self.connector.connect()) as connection:
            return commit_sequence_value(connection)

    def describe(self, table: str) -> TableDescription:
        """The table's columns and key, as the log-based reader describes them."""
        table = qualified_name(table)
        if table not in self._descriptions:
            self._descriptions[table] = describe_table(self.connector, table, {})
        return self._descriptions[table]

    def log_schema(self, table: str) -> TableSchema:
        """The logging table as ``read_query`` reads it: the bookkeeping, then the columns."""
        stored = [c for c in self._reflect(table).columns if c.ltype is not None]
        return TableSchema(log_table(table), (*META, *stored), ())

    def snapshots(self, tables: Sequence[str]) -> SnapshotReader:
        """Reads tables in one snapshot at the commit sequence value it holds."""
        return PostgresCaptureSnapshots(self)

    def table_names(self) -> list[str]:
        """Every table of the database, without trigger capture's own."""
        return [t for t in self.connector.table_names() if not t.startswith(f"{SCHEMA}.")]

    def purge(self, upto: int, batch_rows: int) -> int:
        """Delete the logging and commit rows of up to ``batch_rows`` transactions at or
        below ``upto`` (a transaction whose last commit value is above it stays whole)."""
        with contextlib.closing(self.connector.connect(autocommit=False)) as connection:
            xids = [
                row[0]
                for row in connection.execute(
                    f"SELECT xid::text FROM {COMMITS} GROUP BY xid HAVING max(commit_seq) <= %s"
                    " ORDER BY max(commit_seq) LIMIT %s",
                    (upto, batch_rows),
                )
            ]
            deleted = 0
            for log in [*map(log_table, self.tables), TRUNCATES]:
                cursor = connection.execute(
                    f"DELETE FROM {log} WHERE _rc_xid = ANY(%s::xid8[])", (xids,)
                )
                deleted += cursor.rowcount
            cursor = connection.execute(
                f"DELETE FROM {COMMITS} WHERE xid = ANY(%s::xid8[])", (xids,)
            )
            deleted += cursor.rowcount
            connection.commit()
        return deleted

    def backlog(self) -> int:
        """The logging rows not purged yet."""
        total = 0
        with contextlib.closing(self.connector.connect()) as connection:
            for table in self.tables:
                row = connection.execute(f"SELECT count(*) FROM {log_table(table)}").fetchone()
                total += int(row[0]) if row else 0
        return total

    def close(self) -> None:
        """Connections are opened per use: nothing to release."""

    def _reflect(self, table: str) -> TableSchema:
        table = qualified_name(table)
        if table not in self._schemas:
            self._schemas[table] = self.connector.reflect(table)
        return self._schemas[table]


def _same_value(column: SourceColumn) -> str:
    """Whether an update keeps ``column``'s carried value. A type carried as its text
    (``types.logical_type``) is compared by that text: its `=` can hold different values
    equal ('1 mon' = '30 days', '[1.5,2)' = '[1.50,2)'), which the lake tells apart."""
    name = quote(column.name)
    if isinstance(column.ltype, lt.StringType):
        return f"NEW.{name}::text IS NOT DISTINCT FROM OLD.{name}::text"
    return f"NEW.{name} IS NOT DISTINCT FROM OLD.{name}"


def running_transactions(connection: psycopg.Connection[Any]) -> frozenset[str]:
    """The transactions with an id that are running now: each holds an exclusive lock on its
    own id until it ends, after its commit is visible
    (https://www.postgresql.org/docs/current/view-pg-locks.html). Not the snapshot's ``xip``:
    a transaction whose id is at or above the snapshot's ``xmax`` (one past the highest
    *completed* id) is running but not listed there."""
    rows = connection.execute(
        "SELECT transactionid::text FROM pg_locks WHERE locktype = 'transactionid'"
        " AND mode = 'ExclusiveLock' AND granted"
    ).fetchall()
    return frozenset(row[0] for row in rows)


def commit_sequence_value(connection: psycopg.Connection[Any]) -> int:
    """The commit sequence's last value taken (0 before the first)."""
    row = connection.execute(f"SELECT last_value, is_called FROM {COMMIT_SEQUENCE}").fetchone()
    assert row is not None
    return int(row[0]) if row[1] else 0


class _Session(CaptureSession):
    """One REPEATABLE READ snapshot over the commits and logging tables."""

    def __init__(
        self, dialect: PostgresTriggerDialect, connection: Any, taken: int, running: frozenset[str]
    ) -> None:
        self.dialect = dialect
        self.connection = connection
        self.taken = taken
        self.running = running

    def visible_commits(self, after: int) -> VisibleCommits:
        """The committed commit sequence values above ``after`` (this first query fixes the
        snapshot every later query of the session reads)."""
        positions = self.connection.execute(
            f"SELECT commit_seq FROM {COMMITS} WHERE commit_seq > %s ORDER BY 1", (after,)
        ).fetchall()
        return VisibleCommits(tuple(row[0] for row in positions), self.taken, self.running)

    def iter_rows(self, after: int, upto: int) -> Iterator[CaptureRow]:
        """The transactions whose last commit value is in ``(after, upto]``, in that order."""
        committed = self.connection.execute(
            f"SELECT xid::text, max(commit_seq), max(committed_at) FROM {COMMITS} WHERE xid IN"
            f" (SELECT xid FROM {COMMITS} WHERE commit_seq > %s AND commit_seq <= %s)"
            " GROUP BY xid HAVING max(commit_seq) <= %s",
            (after, upto, upto),
        ).fetchall()
        if not committed:
            return
        by_xid = {xid: (position, at) for xid, position, at in committed}
        rows = [row for table in self.dialect.tables for row in self._rows(table, by_xid)]
        rows += self._truncates(by_xid)
        yield from sorted(rows, key=lambda row: (row.position, row.seq))

    def _truncates(self, by_xid: Mapping[str, tuple[int, Any]]) -> list[CaptureRow]:
        found = self.connection.execute(
            f"SELECT _rc_seq, _rc_xid::text, tbl FROM {TRUNCATES}"
            " WHERE _rc_xid = ANY(%s::xid8[]) AND tbl = ANY(%s)",
            (list(by_xid), list(self.dialect.tables)),
        ).fetchall()
        return [
            CaptureRow(by_xid[xid][0], seq, xid, table, "t", {}, by_xid[xid][1])
            for seq, xid, table in found
        ]

    def _rows(self, table: str, by_xid: Mapping[str, tuple[int, Any]]) -> Iterator[CaptureRow]:
        schema = self.dialect.log_schema(table)
        names = [column.name for column in schema.columns]
        select = ", ".join(select_expression(column) for column in schema.columns)
        sql = f"SELECT {select} FROM {log_table(table)} WHERE _rc_xid = ANY(%s::xid8[])"
        for batch in self.dialect.connector.read_query(
            self.connection, schema, names, sql, [list(by_xid)]
        ):
            for image in batch.drop_columns([POSITION_COLUMN]).to_pylist():
                seq, xid, op = image.pop("_rc_seq"), image.pop("_rc_xid"), image.pop("_rc_op")
                position, at = by_xid[xid]
                yield CaptureRow(position, seq, xid, table, op, image, at)


class PostgresCaptureSnapshots:
    """The initial load's snapshot, at the commit sequence value it holds exactly."""

    def __init__(self, dialect: PostgresTriggerDialect) -> None:
        self.dialect = dialect

    @contextlib.contextmanager
    def snapshot(
        self, tables: Sequence[str], keys: Mapping[str, Sequence[tuple[object, ...]]] | None = None
    ) -> Iterator[tuple[Position, Iterator[TableSnapshot]]]:
        """Take the commit lock, start the snapshot, read the commit sequence, release the
        lock (it is a session lock: the snapshot stays), then read ``tables`` in it."""
        connector = self.dialect.connector
        with contextlib.closing(connector.connect()) as locker:
            locker.execute("SELECT pg_advisory_lock(%s)", (COMMIT_LOCK,))
            try:
                with connector.read_transaction(None) as connection:
                    position = capture_position(commit_sequence_value(connection))
                    locker.execute("SELECT pg_advisory_unlock(%s)", (COMMIT_LOCK,))
                    yield position, self._iter_tables(connection, tables, keys or {})
            finally:
                locker.execute("SELECT pg_advisory_unlock_all()")

    def _iter_tables(
        self, connection: Any, tables: Sequence[str], keys: Mapping[str, Any]
    ) -> Iterator[TableSnapshot]:
        connector = self.dialect.connector
        for table in map(qualified_name, tables):
            description = self.dialect.describe(table)
            schema = connector.reflect(table)
            columns = list(description.schema.names)
            partition = Partition(0)
            if table in keys:
                rows = tuple(tuple(row) for row in keys[table])
                partition = Partition(0, key_columns=description.key, keys=rows)
            sql, params = partition_query(schema, columns, partition)
            batches = (
                batch.drop_columns([POSITION_COLUMN])
                for batch in connector.read_query(connection, schema, columns, sql, params)
            )
            yield TableSnapshot(description, batches)


def _literal(text: str) -> str:
    """An SQL string literal (a trigger's argument cannot be a bound parameter)."""
    return "'" + text.replace("'", "''") + "'"


def capture_dialect(
    url: str, password: str | None, tables: Sequence[str]
) -> PostgresTriggerDialect:
    """The trigger capture of ``tables`` of a ``postgresql`` URL with ``capture=trigger``.

    Raises:
        ConfigError: A glob among the tables (capture is set up table by table).
    """
    globs = [table for table in tables if is_glob(table)]
    if globs or not tables:
        raise ConfigError(
            f"Postgres trigger capture needs its tables listed by name, not {globs or 'none'}"
        )
    return PostgresTriggerDialect(url, password, tables)
