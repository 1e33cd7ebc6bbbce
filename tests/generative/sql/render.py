"""SQL of each product: identifiers, native types, literals, and the statements whose
spelling differs (upserts, key shifts, multi-table DML, two-phase commit, DDL).

Every statement is plain text a person can paste into ``mariadb`` or ``psql``.
"""

from __future__ import annotations

import datetime as dt
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from decimal import Decimal

from tests.generative.sql.columns import Special, Typed, ZeroDate
from tests.generative.sql.tables import Column, Generated, Table
from tests.generative.sql.vocabulary import native_type

PERIOD = ("valid_from", "valid_to")  # MariaDB's declared period columns (``Table.versioning``)


class Dialect(ABC):
    """How one product writes the generated statements."""

    product: str
    types: Mapping[str, str]

    @abstractmethod
    def quote(self, name: str) -> str:
        """A quoted identifier."""

    @abstractmethod
    def string(self, text: str) -> str:
        """A string literal."""

    @abstractmethod
    def blob(self, data: bytes) -> str:
        """A binary literal."""

    def literal(self, value: object) -> str:
        if value is None:
            return "NULL"
        if isinstance(value, Typed):
            return self.typed(value)
        if isinstance(value, bool):
            return "TRUE" if value else "FALSE"
        if isinstance(value, ZeroDate):
            return self.string(value)
        if isinstance(value, Special):
            return f"'{value}'"
        if isinstance(value, bytes):
            return self.blob(value)
        if isinstance(value, str):
            return self.string(value)
        if isinstance(value, float):
            return repr(value) if value == value else "NULL"
        if isinstance(value, int | Decimal):
            return str(value)
        return self.temporal(value)

    def typed(self, value: Typed) -> str:
        """A catalog kind's value (the product coerces it to the column's type)."""
        return self.literal(value.value)

    def temporal(self, value: object) -> str:
        if isinstance(value, dt.datetime) and value.tzinfo is not None:
            return self.string(value.strftime("%Y-%m-%d %H:%M:%S.%f+00:00"))
        return self.string(
            value.isoformat(sep=" ") if isinstance(value, dt.datetime) else str(value)
        )

    def column_sql(self, column: Column) -> str:
        null = "" if column.nullable else " NOT NULL"
        kind = self.types.get(column.kind) or native_type(column.kind, self.product)
        if column.generated is not None:
            null = " " + self.generated(column.generated)
        if column.invisible:
            null += " INVISIBLE"
        return f"{self.quote(column.name)} {kind}{null}"

    def expression(self, generated: Generated) -> str:
        """A generated column's expression."""
        source = self.quote(generated.source)
        if generated.expression == "twice":
            return f"{source} * 2 + 1"
        if generated.expression == "tenfold":
            return f"coalesce({source}, -1) * 10"
        return self.label(source)

    @abstractmethod
    def label(self, source: str) -> str:
        """The text ``'k'`` followed by integer column ``source``'s digits."""

    @abstractmethod
    def generated(self, generated: Generated) -> str:
        """The clause making a column generated."""

    def create_table(self, table: Table) -> str:
        parts = [self.column_sql(c) for c in table.columns]
        if table.keyed and not table.unique_only:
            parts.append(f"PRIMARY KEY ({self.quote(table.key)})")
        if table.unique_only:
            parts.append(f"CONSTRAINT {self.unique_key(table)} UNIQUE ({self.quote(table.key)})")
        parts += self.table_parts(table)
        parts += [self.foreign_key(c) for c in table.columns if c.references is not None]
        suffix = self.table_suffix(table)
        return f"CREATE TABLE {self.quote(table.name)} ({', '.join(parts)}){suffix}"

    def foreign_key(self, column: Column) -> str:
        reference = column.references
        assert reference is not None
        parent = f"{self.quote(reference.parent)} ({self.quote(reference.parent_key)})"
        return (
            f"FOREIGN KEY ({self.quote(column.name)}) REFERENCES {parent}"
            f" ON DELETE {reference.on_delete} ON UPDATE {reference.on_update}"
        )

    def table_parts(self, table: Table) -> list[str]:
        """Definitions after the columns and keys besides foreign keys (period columns)."""
        return []

    def table_suffix(self, table: Table) -> str:
        """What follows the parenthesised definitions (partitioning, versioning)."""
        return ""

    def partitions(self, table: Table) -> list[str]:
        """Statements creating a partitioned table's leaves."""
        return []

    def leaf(self, table: Table, number: int) -> str:
        """A partitioned table's leaf ``number``."""
        return self.quote(f"{table.name}_p{number}")

    def unique_key(self, table: Table) -> str:
        """The name of a table's unique key (``Table.unique_only``)."""
        return self.quote(f"{table.name}_uk")

    def copy_rows(self, table: Table, key: int) -> str:
        """An insert of an equal copy of each row on ``key`` (a table without a key)."""
        t = self.quote(table.name)
        where = self.where_key(table, key)
        if table.computed():  # generated columns take no value, SELECT * leaves out invisible
            names = self.names([table.key, *(c.name for c in table.value_columns())])
            return f"INSERT INTO {t} ({names}) SELECT {names} FROM {t} WHERE {where}"
        return f"INSERT INTO {t} SELECT * FROM {t} WHERE {where}"

    @abstractmethod
    def one_row(self, table: Table, key: int) -> tuple[str, str]:
        """(condition, suffix) of an UPDATE or DELETE changing one of the rows on ``key``
        (of equal rows, one copy)."""

    def insert(self, table: Table, rows: Sequence[Mapping[str, object]]) -> str:
        names = list(rows[0])
        values = ", ".join("(" + ", ".join(self.literal(r[n]) for n in names) + ")" for r in rows)
        return f"INSERT INTO {self.quote(table.name)} ({self.names(names)}) VALUES {values}"

    def names(self, names: Sequence[str]) -> str:
        return ", ".join(self.quote(n) for n in names)

    def assignments(self, values: Mapping[str, object], prefix: str = "") -> str:
        return ", ".join(f"{prefix}{self.quote(n)} = {self.literal(v)}" for n, v in values.items())

    def where_key(self, table: Table, low: int, high: int | None = None) -> str:
        key = self.quote(table.key)
        return f"{key} = {low}" if high is None else f"{key} BETWEEN {low} AND {high}"

    def update(self, table: Table, values: Mapping[str, object], where: str) -> str:
        return f"UPDATE {self.quote(table.name)} SET {self.assignments(values)} WHERE {where}"

    def delete(self, table: Table, where: str) -> str:
        return f"DELETE FROM {self.quote(table.name)} WHERE {where}"

    def change_key(self, table: Table, old: int, new: int) -> str:
        return self.update(table, {table.key: new}, self.where_key(table, old))

    @abstractmethod
    def upsert(self, table: Table, row: Mapping[str, object], variant: int) -> str:
        """Insert or replace/update the row on a key clash."""

    @abstractmethod
    def key_shift(self, table: Table) -> list[str]:
        """Statements moving every row's key up by one."""

    @abstractmethod
    def join_update(self, a: Table, b: Table, column: Column, value: object) -> str:
        """An UPDATE of ``a`` joined with ``b`` on the key."""

    @abstractmethod
    def join_delete(self, a: Table, b: Table, low: int, high: int) -> str:
        """A DELETE of ``a``'s rows in a key range whose key is also in ``b``."""

    @abstractmethod
    def begin(self) -> str: ...

    @abstractmethod
    def two_phase(self, gid: str, commit: bool) -> tuple[list[str], list[str]]:
        """(statements opening, statements ending) a two-phase transaction."""

    @abstractmethod
    def big_insert(self, table: Table, first: int, count: int) -> str:
        """A set-based insert of ``count`` keys from ``first`` with large text values."""

    @abstractmethod
    def ddl_variants(self, table: Table, column: Column, new_name: str) -> dict[str, list[str]]:
        """DDL kinds → statements, given an existing non-key column and a free name."""

    def setup_session(self) -> list[str]:
        return []


class MariaDB(Dialect):
    product = "mariadb"
    types: Mapping[str, str] = {
             "int": "INT", "bigint": "BIGINT", "dec": "DECIMAL(18,4)", "dbl": "DOUBLE",
             "str": "VARCHAR(40)", "text": "LONGTEXT", "blob": "LONGBLOB", "date": "DATE",
             "dt": "DATETIME(6)", "ts": "TIMESTAMP(6) NULL DEFAULT NULL", "time": "TIME(6)",
    }  # fmt: skip

    def quote(self, name: str) -> str:
        return "`" + name.replace("`", "``") + "`"

    def string(self, text: str) -> str:
        return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"

    def blob(self, data: bytes) -> str:
        return f"X'{data.hex()}'"

    def temporal(self, value: object) -> str:
        if isinstance(value, dt.datetime) and value.tzinfo is not None:
            # The sessions run in UTC (setup_session), so a TIMESTAMP literal is a UTC instant.
            return self.string(value.strftime("%Y-%m-%d %H:%M:%S.%f"))
        return super().temporal(value)

    def setup_session(self) -> list[str]:
        # ALTER TABLE of a system-versioned table is refused unless the session keeps its
        # history (https://mariadb.com/kb/en/system-versioned-tables/, "Altering").
        return ["SET time_zone = '+00:00'", "SET innodb_lock_wait_timeout = 10",
                "SET system_versioning_alter_history = KEEP"]  # fmt: skip

    def label(self, source: str) -> str:
        return f"concat('k', {source})"

    def generated(self, generated: Generated) -> str:
        # PERSISTENT, MariaDB's older word for STORED, is the same kind in the catalog
        # (https://mariadb.com/kb/en/generated-columns/).
        storage = "STORED" if generated.stored else "VIRTUAL"
        return f"AS ({self.expression(generated)}) {storage}"

    def table_parts(self, table: Table) -> list[str]:
        if table.versioning != "declared":
            return []
        return [f"{PERIOD[0]} TIMESTAMP(6) GENERATED ALWAYS AS ROW START",
                f"{PERIOD[1]} TIMESTAMP(6) GENERATED ALWAYS AS ROW END INVISIBLE",
                f"PERIOD FOR SYSTEM_TIME({PERIOD[0]}, {PERIOD[1]})"]  # fmt: skip

    def table_suffix(self, table: Table) -> str:
        return " WITH SYSTEM VERSIONING" if table.versioning else ""

    def upsert(self, table: Table, row: Mapping[str, object], variant: int) -> str:
        if variant == 0:
            return "REPLACE" + self.insert(table, [row])[len("INSERT") :]
        values = {n: v for n, v in row.items() if n != table.key}
        return self.insert(table, [row]) + f" ON DUPLICATE KEY UPDATE {self.assignments(values)}"

    def key_shift(self, table: Table) -> list[str]:
        key = self.quote(table.key)
        return [f"UPDATE {self.quote(table.name)} SET {key} = {key} + 1 ORDER BY {key} DESC"]

    def one_row(self, table: Table, key: int) -> tuple[str, str]:
        return self.where_key(table, key), " LIMIT 1"

    def join_update(self, a: Table, b: Table, column: Column, value: object) -> str:
        on = f"x.{self.quote(a.key)} = y.{self.quote(b.key)}"
        sets = f"x.{self.quote(column.name)} = {self.literal(value)}"
        return f"UPDATE {self.quote(a.name)} x JOIN {self.quote(b.name)} y ON {on} SET {sets}"

    def join_delete(self, a: Table, b: Table, low: int, high: int) -> str:
        on = f"x.{self.quote(a.key)} = y.{self.quote(b.key)}"
        where = f"x.{self.quote(a.key)} BETWEEN {low} AND {high}"
        joined = f"{self.quote(a.name)} x JOIN {self.quote(b.name)} y ON {on}"
        return f"DELETE x FROM {joined} WHERE {where}"

    def begin(self) -> str:
        return "START TRANSACTION"

    def two_phase(self, gid: str, commit: bool) -> tuple[list[str], list[str]]:
        end = f"XA COMMIT '{gid}'" if commit else f"XA ROLLBACK '{gid}'"
        return [f"XA START '{gid}'"], [f"XA END '{gid}'", f"XA PREPARE '{gid}'", end]

    def big_insert(self, table: Table, first: int, count: int) -> str:
        text = next((c for c in table.value_columns() if c.kind in ("str", "text")), None)
        extra = f", {self.quote(text.name)}" if text else ""
        pad = ", REPEAT('x', 40)" if text else ""
        return (
            f"INSERT INTO {self.quote(table.name)} ({self.quote(table.key)}{extra})"
            f" SELECT {first} + seq{pad} FROM seq_0_to_{count - 1}"
        )

    def ddl_variants(self, table: Table, column: Column, new_name: str) -> dict[str, list[str]]:
        t, c, n = self.quote(table.name), self.quote(column.name), self.quote(new_name)
        widened = {"int": "BIGINT", "str": "VARCHAR(80)", "dec": "DECIMAL(20,4)"}
        out = {
            "add_default": [f"ALTER TABLE {t} ADD COLUMN {n} VARCHAR(40) DEFAULT 'dflt'"],
            "add_not_null": [f"ALTER TABLE {t} ADD COLUMN {n} INT NOT NULL"],
            "add_volatile": [
                f"ALTER TABLE {t} ADD COLUMN {n} DATETIME(6) DEFAULT CURRENT_TIMESTAMP(6)"
            ],
            "add_nullable": [f"ALTER TABLE {t} ADD COLUMN {n} INT"],
            "drop": [f"ALTER TABLE {t} DROP COLUMN {c}"],
            "rename": [f"ALTER TABLE {t} RENAME COLUMN {c} TO {n}"],
            "convert": [f"ALTER TABLE {t} CONVERT TO CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"],
        }  # fmt: skip
        if column.kind in widened:
            out["modify"] = [f"ALTER TABLE {t} MODIFY {c} {widened[column.kind]}"]
        return out


class Postgres(Dialect):
    product = "postgres"
    types: Mapping[str, str] = {"int": "integer", "bigint": "bigint", "dec": "numeric(18,4)",
             "dbl": "double precision", "str": "varchar(40)", "text": "text", "blob": "bytea",
             "date": "date", "dt": "timestamp(6)", "ts": "timestamptz(6)", "time": "time(6)",
    }  # fmt: skip

    def quote(self, name: str) -> str:
        return '"' + name.replace('"', '""') + '"'

    def string(self, text: str) -> str:
        return "'" + text.replace("'", "''") + "'"

    def blob(self, data: bytes) -> str:
        return f"'\\x{data.hex()}'::bytea"

    def typed(self, value: Typed) -> str:
        """Cast to the column's type: arrays, ranges, json and the like have no untyped
        literal, and a quoted float keeps its digits and its sign (numeric has no -0)."""
        return f"({self._element(value.value)})::{value.sql_type}"  # -x::t is -(x::t)

    def _element(self, value: object) -> str:
        if isinstance(value, list):
            return "ARRAY[" + ", ".join(self._element(item) for item in value) + "]"
        if isinstance(value, float):
            return f"'{value!r}'"
        if isinstance(value, dt.time) and value.tzinfo is not None:
            return self.string(value.isoformat())
        return self.literal(value)

    def label(self, source: str) -> str:
        return f"'k' || {source}::text"

    def generated(self, generated: Generated) -> str:
        assert generated.stored, "PostgreSQL 15 has stored generated columns only"
        return f"GENERATED ALWAYS AS ({self.expression(generated)}) STORED"

    def table_suffix(self, table: Table) -> str:
        if table.partitioning is None:
            return ""
        return f" PARTITION BY {table.partitioning.upper()} ({self.quote(table.key)})"

    def partitions(self, table: Table) -> list[str]:
        """Two leaves splitting the keys (every key falls in one), named ``<root>_p<n>``."""
        bounds = {
            "range": ("FROM (MINVALUE) TO (4000)", "FROM (4000) TO (MAXVALUE)"),
            "list": ("IN (1000, 2000, 3000)", "DEFAULT"),
            "hash": ("WITH (MODULUS 2, REMAINDER 0)", "WITH (MODULUS 2, REMAINDER 1)"),
        }
        if table.partitioning is None:
            return []
        return [
            f"CREATE TABLE {self.leaf(table, n)} PARTITION OF {self.quote(table.name)}"
            + ("" if bound == "DEFAULT" else " FOR VALUES ")
            + (" DEFAULT" if bound == "DEFAULT" else bound)
            for n, bound in enumerate(bounds[table.partitioning])
        ]

    def setup_session(self) -> list[str]:
        # The cluster runs with synchronous_commit = off; commits flush the WAL here so the
        # stream sees them at once. lock_timeout turns a generator mistake into an error.
        return ["SET synchronous_commit = on", "SET lock_timeout = '10s'"]

    def upsert(self, table: Table, row: Mapping[str, object], variant: int) -> str:
        values = [n for n in row if n != table.key]
        if variant == 0 or not values:
            return self.insert(table, [row]) + f" ON CONFLICT ({self.quote(table.key)}) DO NOTHING"
        sets = ", ".join(f"{self.quote(n)} = EXCLUDED.{self.quote(n)}" for n in values)
        return (
            self.insert(table, [row])
            + f" ON CONFLICT ({self.quote(table.key)}) DO UPDATE SET {sets}"
        )

    def key_shift(self, table: Table) -> list[str]:
        # A non-deferrable key is checked row by row: negate (no clash), then shift back.
        t, key = self.quote(table.name), self.quote(table.key)
        return [f"UPDATE {t} SET {key} = -{key} WHERE {key} > 0",
                f"UPDATE {t} SET {key} = -{key} + 1 WHERE {key} < 0"]  # fmt: skip

    def one_row(self, table: Table, key: int) -> tuple[str, str]:
        first = f"SELECT ctid FROM {self.quote(table.name)} WHERE {self.where_key(table, key)}"
        return f"ctid = ({first} LIMIT 1)", ""

    def join_update(self, a: Table, b: Table, column: Column, value: object) -> str:
        on = f"x.{self.quote(a.key)} = y.{self.quote(b.key)}"
        sets = f"{self.quote(column.name)} = {self.literal(value)}"
        return f"UPDATE {self.quote(a.name)} x SET {sets} FROM {self.quote(b.name)} y WHERE {on}"

    def join_delete(self, a: Table, b: Table, low: int, high: int) -> str:
        on = f"x.{self.quote(a.key)} = y.{self.quote(b.key)}"
        where = f"x.{self.quote(a.key)} BETWEEN {low} AND {high}"
        using = f"{self.quote(a.name)} x USING {self.quote(b.name)} y"
        return f"DELETE FROM {using} WHERE {on} AND {where}"

    def begin(self) -> str:
        return "BEGIN"

    def two_phase(self, gid: str, commit: bool) -> tuple[list[str], list[str]]:
        end = f"COMMIT PREPARED '{gid}'" if commit else f"ROLLBACK PREPARED '{gid}'"
        return ["BEGIN"], [f"PREPARE TRANSACTION '{gid}'", end]

    def big_insert(self, table: Table, first: int, count: int) -> str:
        text = next((c for c in table.value_columns() if c.kind == "text"), None)
        extra = f", {self.quote(text.name)}" if text else ""
        pad = ", repeat('x', 200)" if text else ""
        return (
            f"INSERT INTO {self.quote(table.name)} ({self.quote(table.key)}{extra})"
            f" SELECT {first} + g{pad} FROM generate_series(0, {count - 1}) AS g"
        )

    def ddl_variants(self, table: Table, column: Column, new_name: str) -> dict[str, list[str]]:
        t, c, n = self.quote(table.name), self.quote(column.name), self.quote(new_name)
        out = {
            "add_default": [f"ALTER TABLE {t} ADD COLUMN {n} varchar(40) DEFAULT 'dflt'"],
            "add_not_null": [f"ALTER TABLE {t} ADD COLUMN {n} integer NOT NULL DEFAULT 0"],
            "add_volatile": [
                f"ALTER TABLE {t} ADD COLUMN {n} timestamptz DEFAULT clock_timestamp()"
            ],
            "add_nullable": [f"ALTER TABLE {t} ADD COLUMN {n} integer"],
            "drop": [f"ALTER TABLE {t} DROP COLUMN {c}"],
            "rename": [f"ALTER TABLE {t} RENAME COLUMN {c} TO {n}"],
        }  # fmt: skip
        if column.kind == "int":
            out["modify"] = [f"ALTER TABLE {t} ALTER COLUMN {c} TYPE bigint USING {c} * 2"]
        elif column.kind == "str":
            out["modify"] = [f"ALTER TABLE {t} ALTER COLUMN {c} TYPE text USING upper({c})"]
        if column.kind in ("int", "str"):  # a rewrite keeping the type: only the log shows it
            change = f"{c} / 2" if column.kind == "int" else f"reverse({c})"
            kept = self.types[column.kind]
            out["rewrite"] = [f"ALTER TABLE {t} ALTER COLUMN {c} TYPE {kept} USING {change}"]
        return out


DIALECTS: dict[str, Dialect] = {"mariadb": MariaDB(), "postgres": Postgres()}
