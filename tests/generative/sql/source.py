"""A seed's database on a real private server: created fresh, written by several sessions,
read back with plain SQL, and dropped.

A statement the server refuses (a key the generator thought free, a value a widened column
still rejects) is counted and skipped, as a client would: the source's state, whatever it
is, is what the lake must equal. After an item with errors every session is reset and
prepared transactions left behind are rolled back, so the next item starts clean.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from typing import Any

from connectors.postgres.types import read_intervals_as_text
from tests.generative.sql.render import DIALECTS
from tests.generative.sql.workload import SourceKind, Step
from tests.private_servers import MariaDBServer, PostgresServer, drop_postgres_database

# PostgreSQL types the judge reads as their text (``PostgresDatabase._reads``).
TEXT_READ = frozenset(("json", "jsonb", "uuid", "inet", "cidr", "macaddr", "macaddr8", "point",
                       "line", "lseg", "box", "path", "polygon", "circle"))  # fmt: skip
# Each column of a table: name, the type its values are read as (a domain's base type;
# an array's element's) and its kind, and whether it is an array.
_COLUMN_TYPES = """
SELECT a.attname, b.typname, b.typtype, e.oid IS NOT NULL
  FROM pg_attribute a
  JOIN pg_type t ON t.oid = a.atttypid
  LEFT JOIN pg_type e ON e.oid = t.typelem AND t.typcategory = 'A'
  JOIN pg_type s ON s.oid = coalesce(e.oid, t.oid)
  JOIN pg_type b ON b.oid = CASE WHEN s.typtype = 'd' THEN s.typbasetype ELSE s.oid END
 WHERE a.attrelid = %s::regclass AND a.attnum > 0 AND NOT a.attisdropped
 ORDER BY a.attnum
"""
PUBLICATION = "CREATE PUBLICATION replcheck FOR ALL TABLES WITH (publish_via_partition_root = true)"
# Read as another type: money's exact numeric (psycopg has no exact reading of it), a real
# as the double it is (psycopg reads the shortest text of the single: 0.1 for 0.100000001).
_READ_AS = {"money": "numeric", "float4": "float8"}


class SeedDatabase(ABC):
    """One database per seed, with numbered sessions."""

    def __init__(self, kind: SourceKind, name: str) -> None:
        self.kind = kind
        self.name = name
        self.sessions: dict[int, Any] = {}
        self.errors: list[str] = []

    @abstractmethod
    def connect(self) -> Any: ...

    @abstractmethod
    def pipeline_url(self) -> str:
        """The ``cdc run`` source URL."""

    @abstractmethod
    def plain_url(self) -> str:
        """The database's URL for the validator."""

    @abstractmethod
    def pipeline_tables(self) -> str:
        """The pipeline's table glob."""

    @abstractmethod
    def schema(self) -> str:
        """The schema part of the tables' canonical names."""

    @abstractmethod
    def tables(self) -> dict[str, list[str]]:
        """Every table and its key columns."""

    @abstractmethod
    def columns(self, table: str) -> list[str]: ...

    @abstractmethod
    def rows(self, table: str) -> list[dict[str, Any]]:
        """Every row of ``table`` read with plain SQL."""

    @abstractmethod
    def drop(self) -> None: ...

    @abstractmethod
    def _leftover_prepared(self, cursor: Any) -> list[str]: ...

    def session(self, number: int) -> Any:
        if number not in self.sessions:
            connection = self.connect()
            for sql in DIALECTS[self.kind.product].setup_session():
                self._run(connection, sql)
            self.sessions[number] = connection
        return self.sessions[number]

    def run(self, step: Step) -> bool:
        """Run one statement; False when the server refused it (counted in ``errors``)."""
        try:
            self._run(self.session(step.session), step.sql)
        except Exception as exc:  # any refusal: the source is what it is
            self.errors.append(f"{type(exc).__name__}: {exc}"[:300])
            return False
        return True

    def run_setup(self, sql: str) -> bool:
        return self.run(Step(0, sql))

    def _run(self, connection: Any, sql: str) -> None:
        with connection.cursor() as cursor:
            cursor.execute(sql)

    def reset(self) -> None:
        """Close every session and roll back prepared transactions left behind."""
        self.close()
        connection = self.connect()
        with contextlib.closing(connection), connection.cursor() as cursor:
            for statement in self._leftover_prepared(cursor):
                with contextlib.suppress(Exception):
                    cursor.execute(statement)

    def close(self) -> None:
        for connection in self.sessions.values():
            with contextlib.suppress(Exception):
                connection.close()
        self.sessions.clear()


class MariaDBDatabase(SeedDatabase):
    def __init__(self, kind: SourceKind, server: MariaDBServer, name: str) -> None:
        super().__init__(kind, name)
        self.server = server
        with contextlib.closing(server.connect(None)) as connection, connection.cursor() as cur:
            cur.execute(f"CREATE DATABASE `{name}`")

    def connect(self) -> Any:
        return self.server.connect(self.name)

    def pipeline_url(self) -> str:
        return self.server.url(self.name) + "?heartbeat_s=0.2&server_id=7713"

    def plain_url(self) -> str:
        return self.server.url(self.name)

    def pipeline_tables(self) -> str:
        return f"{self.name}.*"

    def schema(self) -> str:
        return self.name

    def _query(self, sql: str, *args: object) -> list[tuple[Any, ...]]:
        with contextlib.closing(self.connect()) as connection, connection.cursor() as cursor:
            cursor.execute("SET time_zone = '+00:00'")  # TIMESTAMPs read as UTC
            cursor.execute(sql, args)
            return list(cursor.fetchall())

    def tables(self) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for table, column in self._query(
            # A system-versioned table's primary key ends with its row end, hidden (absent
            # from COLUMNS) or declared: no key column of its current rows (cdc-mariadb.md).
            "SELECT t.table_name, k.column_name FROM information_schema.tables t"
            " LEFT JOIN (information_schema.key_column_usage k JOIN information_schema.columns c"
            " ON c.table_schema = k.table_schema AND c.table_name = k.table_name"
            " AND c.column_name = k.column_name AND NOT c.generation_expression <=> 'ROW END')"
            " ON k.table_schema = t.table_schema AND k.table_name = t.table_name"
            " AND k.constraint_name = 'PRIMARY'"
            " WHERE t.table_schema = %s ORDER BY k.ordinal_position",
            self.name,
        ):
            found.setdefault(table, []).extend([column] if column else [])
        return found

    def columns(self, table: str) -> list[str]:
        return [row[0] for row in self._query(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = %s"
            " AND table_name = %s ORDER BY ordinal_position", self.name, table)]  # fmt: skip

    def rows(self, table: str) -> list[dict[str, Any]]:
        names = self.columns(table)
        quoted = DIALECTS["mariadb"].quote(table)
        found = self._query(f"SELECT {', '.join(self._reads(table))} FROM {quoted}")
        return [dict(zip(names, row, strict=True)) for row in found]

    def _reads(self, table: str) -> list[str]:
        """How the judge reads each column: a BIT as its number (pymysql gives its bytes),
        a FLOAT as the exact double of its single (the protocol sends ~6 digits of text)."""
        reads = {"bit": "{} + 0", "float": "CAST({} AS DOUBLE)"}
        return [reads.get(kind, "{}").format(DIALECTS["mariadb"].quote(name)) for name, kind in
                self._query("SELECT column_name, data_type FROM information_schema.columns"
                            " WHERE table_schema = %s AND table_name = %s"
                            " ORDER BY ordinal_position", self.name, table)]  # fmt: skip

    def _leftover_prepared(self, cursor: Any) -> list[str]:
        cursor.execute("XA RECOVER")
        return [f"XA ROLLBACK '{row[3]}'" for row in cursor.fetchall()]

    def drop(self) -> None:
        self.close()
        with (
            contextlib.closing(self.server.connect(None)) as connection,
            connection.cursor() as cur,
        ):
            cur.execute(f"DROP DATABASE IF EXISTS `{self.name}`")


class PostgresDatabase(SeedDatabase):
    def __init__(self, kind: SourceKind, server: PostgresServer, name: str) -> None:
        super().__init__(kind, name)
        self.server = server
        with contextlib.closing(server.connect("postgres")) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        with contextlib.closing(server.connect(name)) as connection:
            # Every table, also those created later, is published; a partitioned table
            # through its root, as cdc run requires (docs/cdc-postgres.md).
            connection.execute(PUBLICATION)

    def connect(self) -> Any:
        """A session of the seed's database; an interval reads as the ISO 8601 text the
        lake holds (``connectors.postgres.types.read_intervals_as_text``)."""
        connection = self.server.connect(self.name)
        connection.execute("SET IntervalStyle = 'iso_8601'")
        connection.commit()  # the setting holds for the session; no transaction stays open
        read_intervals_as_text(connection)
        return connection

    def pipeline_url(self) -> str:
        options = f"idle_s=0.2&decoding_work_mem=64kB&slot=slot_{self.name}"
        return f"{self.server.url(self.name)}?{options}"

    def plain_url(self) -> str:
        return self.server.url(self.name)

    def pipeline_tables(self) -> str:
        return "public.*"

    def schema(self) -> str:
        return "public"

    def _query(self, sql: str, *args: object) -> list[tuple[Any, ...]]:
        with contextlib.closing(self.connect()) as connection:
            # Types read as their ::text (a tstzrange's bounds) print in the session's
            # settings: those the connector fixes for that text (docs/cdc-postgres.md).
            connection.execute("SET TimeZone = 'UTC'")
            connection.execute("SET DateStyle = 'ISO'")
            return list(connection.execute(sql, args).fetchall())

    def tables(self) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for table, column in self._query(
            "SELECT c.relname, a.attname FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " LEFT JOIN pg_index i ON i.indrelid = c.oid AND i.indisprimary"
            " LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = ANY(i.indkey)"
            " WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition"
        ):
            found.setdefault(table, []).extend([column] if column else [])
        return found

    def columns(self, table: str) -> list[str]:
        return [row[0] for row in self._query(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = 'public'"
            " AND table_name = %s ORDER BY ordinal_position", table)]  # fmt: skip

    def rows(self, table: str) -> list[dict[str, Any]]:
        names = self.columns(table)
        quoted = DIALECTS["postgres"].quote(table)
        found = self._query(f"SELECT {', '.join(self._reads(quoted))} FROM {quoted}")
        return [dict(zip(names, row, strict=True)) for row in found]

    def _reads(self, quoted: str) -> list[str]:
        """How the judge reads each column: as ``_READ_AS`` says, and the types psycopg
        turns into objects of its own (ranges, network addresses, json documents, UUIDs,
        enums) or leaves as server text (geometry) as their ``::text``, the text replcheck
        documents for them; arrays as arrays of what their elements are read as."""
        reads = []
        for name, base, kind, array in self._query(_COLUMN_TYPES, quoted):
            read = _READ_AS.get(base) or ("text" if base in TEXT_READ or kind in "rme" else "")
            if array:  # psycopg reads an array of a domain or an enum as one text
                read = f"{read or base}[]"
            column = DIALECTS["postgres"].quote(name)
            reads.append(f"{column}::{read}" if read else column)
        return reads

    def _leftover_prepared(self, cursor: Any) -> list[str]:
        cursor.execute("SELECT gid FROM pg_prepared_xacts WHERE database = current_database()")
        return [f"ROLLBACK PREPARED '{row[0]}'" for row in cursor.fetchall()]

    def drop(self) -> None:
        self.close()
        drop_postgres_database(self.server, self.name)


def open_database(
    kind: SourceKind, server: MariaDBServer | PostgresServer, name: str
) -> SeedDatabase:
    """A fresh database ``name`` on ``server`` for a seed of source kind ``kind``."""
    if isinstance(server, MariaDBServer):
        return MariaDBDatabase(kind, server, name)
    return PostgresDatabase(kind, server, name)
