"""Seeded random workloads of SQL statements for one source kind.

A workload is a set-up script (CREATE TABLEs and their first rows, loaded by the pipeline's
initial snapshot) and a list of items run while ``cdc run`` follows the log: transactions
(committed, rolled back, partially rolled back to a savepoint, two-phase), interleaved
transactions of several sessions, DDL, CREATE TABLE of new captured tables, and SIGKILLs of
the pipeline. Items are the unit the shrinker drops; a step is one statement of a session.

Sessions of interleaved transactions work on different tables, so no statement waits for
another session's lock (the runner executes steps one by one on one thread).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable

from tests.generative.sql.columns import KINDS, value
from tests.generative.sql.render import DIALECTS, Dialect
from tests.generative.sql.table_kinds import TableKinds, families, reference_value
from tests.generative.sql.tables import AWKWARD, KEY_BASE, Column, Table, new_table
from tests.generative.sql.vocabulary import (
    CATALOG_KINDS,
    VOCABULARIES,
    locating_kinds,
    setup_types,
)

SIZE = 24  # items per workload
# A table created while the pipeline runs may stay empty (it once got no lake tables: fixed,
# regression test test_an_empty_table_created_while_running_is_in_the_lake).
EMPTY_NEW_TABLES = True


@dataclasses.dataclass(frozen=True, slots=True)
class SourceKind:
    """A source configuration under test."""

    name: str
    product: str
    row_image: str = "FULL"  # MariaDB binlog_row_image
    identity_full: bool = False  # PostgreSQL REPLICA IDENTITY FULL
    live: bool = False  # a server from outside (tests/live_servers.py), not started here


SOURCES = {
    kind.name: kind
    for kind in (
        SourceKind("mariadb-full", "mariadb", "FULL"),
        SourceKind("mariadb-minimal", "mariadb", "MINIMAL"),
        # MySQL 8 through the MariaDB suites, when REPLCHECK_MYSQL_URL names one (issue 40)
        SourceKind("mysql-live", "mariadb", "FULL", live=True),
        SourceKind("postgres-default", "postgres"),
        SourceKind("postgres-full", "postgres", identity_full=True),
    )
}


@dataclasses.dataclass(frozen=True, slots=True)
class Step:
    session: int
    sql: str
    essential: bool = False  # transaction control: the shrinker keeps it


@dataclasses.dataclass(frozen=True, slots=True)
class Item:
    # txn, autocommit, interleaved, ddl, create, kill; late: after the pipeline; drift:
    # changes the binlog never shows; resync: validate and ``resync --apply`` (see runner)
    kind: str
    steps: tuple[Step, ...] = ()


DRIFT_SESSION = 7  # the session of drift: the binlog is off in it while it writes


@dataclasses.dataclass(frozen=True, slots=True)
class Workload:
    source: str
    seed: int
    setup: tuple[str, ...]
    items: tuple[Item, ...]
    memory_budget_mb: float = 0.05  # small: open transactions spill

    def statements(self) -> int:
        return len(self.setup) + sum(len(item.steps) for item in self.items)


class _Generator:
    def __init__(self, seed: int, kind: SourceKind, vocabulary: str = "default") -> None:
        self.rng = random.Random(seed)
        self.kind = kind
        # The column kinds: the hand-picked ones, or the type matrix's (vocabulary.py).
        catalog = vocabulary == "catalog"
        self.kinds = tuple(CATALOG_KINDS[kind.product]) if catalog else KINDS
        self.keyless_kinds = locating_kinds(kind.product) if catalog else None
        self.unique_keys = catalog
        # The table kinds (table_kinds.py): the catalog vocabulary's only, drawing from
        # the same random stream after the default's draws, which stay as they were.
        virtual = kind.row_image != "MINIMAL"
        self.table_kinds = TableKinds(kind.product, self.rng, virtual) if catalog else None
        self.sql: Dialect = DIALECTS[kind.product]
        self.tables: list[Table] = []
        self.seed = seed
        self.gids = 0
        # Around a re-sync no DDL (its table refresh would re-read the drifted rows and so
        # hide whether the re-sync itself lasts), nor range deletes: partial changes.
        self.ddl_ok = True

    # -- tables ------------------------------------------------------------------------

    def create(self) -> list[str]:
        taken = {t.name.lower() for t in self.tables}
        names = [n for n in (*AWKWARD, *(f"t{i}" for i in range(9))) if n.lower() not in taken]
        table = new_table(self.rng.choice(names), self.rng, self.kinds, self.keyless_kinds)
        # A table kind of the catalog vocabulary: a key that is only a unique key.
        table.unique_only = self.unique_keys and table.keyed and self.rng.random() < 0.25
        if self.table_kinds is not None:
            self.table_kinds.shape(table, self.tables)
        self.tables.append(table)
        leaves = self.sql.partitions(table)
        statements = [self.sql.create_table(table), *leaves]
        # PostgreSQL refuses to update or delete rows of a published table without a key
        # unless its replica identity is FULL (or a unique index: USING INDEX); a leaf
        # has its own (ALTER TABLE of the root does not reach it).
        quoted = self.sql.quote(table.name)
        if self.kind.identity_full or (self.kind.product == "postgres" and not table.keyed):
            statements.append(f"ALTER TABLE {quoted} REPLICA IDENTITY FULL")
            for number in range(len(leaves)):
                leaf = self.sql.leaf(table, number)
                statements.append(f"ALTER TABLE {leaf} REPLICA IDENTITY FULL")
        elif self.kind.product == "postgres" and table.unique_only:
            index = self.sql.unique_key(table)
            statements.append(f"ALTER TABLE {quoted} REPLICA IDENTITY USING INDEX {index}")
        return statements

    def row(self, table: Table, key: int | None = None) -> dict[str, object]:
        row: dict[str, object] = {table.key: table.fresh_key() if key is None else key}
        for column in table.value_columns():
            row[column.name] = self.value(column)
        return row

    def value(self, column: Column) -> object:
        """A value of ``column``: a parent's key (or NULL) for a foreign key."""
        if column.references is not None:
            return reference_value(column, self.tables, self.rng)
        return value(column.kind, self.kind.product, self.rng, column.nullable)

    def some_values(self, table: Table) -> dict[str, object]:
        columns = table.value_columns()
        chosen = self.rng.sample(columns, k=min(len(columns), self.rng.randint(1, 2)))
        return {c.name: self.value(c) for c in chosen}

    def key_range(self, table: Table) -> tuple[int, int]:
        low = table.known_key(self.rng)
        return low, low + self.rng.choice((1, 2, 5)) * KEY_BASE

    # -- statements ----------------------------------------------------------------------

    def statement(self, table: Table, others: list[Table]) -> list[str]:
        ops: list[Callable[[Table, list[Table]], list[str]]] = [
            self.insert_one, self.insert_many, self.update_one, self.update_range,
            self.delete_one, self.delete_range, self.key_change, self.key_shift, self.upsert,
            self.delete_reinsert, self.join, self.big_insert,
        ]  # fmt: skip
        weights: tuple[int, ...] = (6, 3, 6, 2, 2, 1, 2, 1, 2, 2, 2 if others else 0, 1)
        if not self.ddl_ok:  # around a re-sync: drifted rows live on, changed in part
            weights = (3, 1, 8, 2, 1, 0, 3, 1, 2, 0, 0, 0)
        if not table.keyed:  # equal rows: copies made, and one copy changed or deleted
            ops += [self.copy_rows, self.update_one_copy, self.delete_one_copy]
            weights = (*weights[:8], 0, *weights[9:], 4, 4, 3)
        return self.rng.choices(ops, weights)[0](table, others)

    def copy_rows(self, table: Table, _: list[Table]) -> list[str]:
        return [self.sql.copy_rows(table, table.known_key(self.rng))]

    def update_one_copy(self, table: Table, _: list[Table]) -> list[str]:
        if not table.value_columns():
            return []
        where, suffix = self.sql.one_row(table, table.known_key(self.rng))
        return [self.sql.update(table, self.some_values(table), where) + suffix]

    def delete_one_copy(self, table: Table, _: list[Table]) -> list[str]:
        where, suffix = self.sql.one_row(table, table.known_key(self.rng))
        return [self.sql.delete(table, where) + suffix]

    def insert_one(self, table: Table, _: list[Table]) -> list[str]:
        return [self.sql.insert(table, [self.row(table)])]

    def insert_many(self, table: Table, _: list[Table]) -> list[str]:
        return [self.sql.insert(table, [self.row(table) for _ in range(self.rng.randint(2, 5))])]

    def update_one(self, table: Table, _: list[Table]) -> list[str]:
        if not table.value_columns():
            return []
        where = self.sql.where_key(table, table.known_key(self.rng))
        return [self.sql.update(table, self.some_values(table), where)]

    def update_range(self, table: Table, _: list[Table]) -> list[str]:
        if not table.value_columns():
            return []
        where = self.sql.where_key(table, *self.key_range(table))
        return [self.sql.update(table, self.some_values(table), where)]

    def delete_one(self, table: Table, _: list[Table]) -> list[str]:
        key = table.known_key(self.rng, hot=False)  # a drifted row stays to be changed
        return [self.sql.delete(table, self.sql.where_key(table, key))]

    def delete_range(self, table: Table, _: list[Table]) -> list[str]:
        return [self.sql.delete(table, self.sql.where_key(table, *self.key_range(table)))]

    def key_change(self, table: Table, _: list[Table]) -> list[str]:
        old = table.known_key(self.rng)
        return [self.sql.change_key(table, old, table.fresh_key())]

    def key_shift(self, table: Table, _: list[Table]) -> list[str]:
        return self.sql.key_shift(table)

    def upsert(self, table: Table, _: list[Table]) -> list[str]:
        key = table.known_key(self.rng) if self.rng.random() < 0.7 else None
        return [self.sql.upsert(table, self.row(table, key), self.rng.randint(0, 1))]

    def delete_reinsert(self, table: Table, _: list[Table]) -> list[str]:
        key = table.known_key(self.rng)
        delete = self.sql.delete(table, self.sql.where_key(table, key))
        return [delete, self.sql.insert(table, [self.row(table, key)])]

    def join(self, table: Table, others: list[Table]) -> list[str]:
        other = self.rng.choice(others)
        if self.rng.random() < 0.5 or not table.value_columns():
            return [self.sql.join_delete(table, other, *self.key_range(table))]
        column = self.rng.choice(table.value_columns())
        fill = self.value(column)
        return [self.sql.join_update(table, other, column, fill)]

    def big_insert(self, table: Table, _: list[Table]) -> list[str]:
        count = self.rng.randint(300, 1500)  # past a 64 kB decoding_work_mem, and spilled
        first = table.next_key * KEY_BASE
        table.next_key += count // KEY_BASE + 2
        table.keys.update(self.rng.sample(range(first, first + count), 3))
        statement = self.sql.big_insert(table, first, count)
        required = [c for c in table.value_columns() if not c.nullable]
        return [_with_zeros(statement, required, self.sql)] if required else [statement]

    # -- items ---------------------------------------------------------------------------

    def transaction(self, session: int, tables: list[Table], others: list[Table]) -> list[Step]:
        body = [
            Step(session, sql)
            for _ in range(self.rng.randint(1, 5))
            for sql in self.statement(self.rng.choice(tables), others)
        ]
        ending = self.rng.choices(("commit", "rollback", "savepoint", "2pc"), (10, 2, 3, 3))[0]
        if ending == "2pc":
            self.gids += 1
            opening, closing = self.sql.two_phase(
                f"g{self.seed}_{self.gids}", self.rng.random() < 0.8
            )
            return _wrap(session, opening, body, closing)
        if ending == "savepoint" and len(body) > 1:
            cut = self.rng.randint(1, len(body) - 1)
            undone = [Step(session, "SAVEPOINT s1", True), *body[cut:]]
            body = [*body[:cut], *undone, Step(session, "ROLLBACK TO SAVEPOINT s1", True)]
            body += [Step(session, sql) for sql in self.insert_one(tables[0], others)]
        end = "ROLLBACK" if ending == "rollback" else "COMMIT"
        return _wrap(session, [self.sql.begin()], body, [end])

    def interleaved(self) -> Item:
        tables = self.rng.sample(self.tables, k=min(len(self.tables), self.rng.randint(2, 3)))
        if self.table_kinds is not None:  # one table per family: no session waits on a lock
            family = families(self.tables)
            tables = [t for i, t in enumerate(tables)
                      if family[t.name] not in {family[u.name] for u in tables[:i]}]  # fmt: skip
        queues = [self.transaction(i + 1, [t], []) for i, t in enumerate(tables)]
        steps: list[Step] = []
        while any(queues):
            queue = self.rng.choice([q for q in queues if q])
            steps.append(queue.pop(0))
        return Item("interleaved", tuple(steps))

    def ddl(self) -> Item:
        table = self.rng.choice(self.tables)
        if self.rng.random() < 0.25 and len(self.tables) < 5:
            created = self.create()
            if not EMPTY_NEW_TABLES:
                created.append(self.sql.insert(self.tables[-1], [self.row(self.tables[-1])]))
            return Item("create", tuple(Step(0, sql, True) for sql in created))
        columns = table.value_columns()
        if not columns:
            return Item("ddl", ())
        column, name = self.rng.choice(columns), table.free_name(self.rng)
        variants = self.sql.ddl_variants(table, column, name)
        chosen = self.rng.choice(sorted(variants))
        _follow(table, chosen, column, name, self.kind.product)
        return Item("ddl", tuple(Step(0, sql, True) for sql in variants[chosen]))

    def drift(self) -> Item:
        """Changes of a keyed table behind the binlog's back (MariaDB ``sql_log_bin``): the
        lake and the pipeline's row images fall out of step with the source until a
        re-sync repairs them."""
        tables = [table for table in self.tables if table.keyed]
        if not tables:
            return Item("drift", ())
        table = self.rng.choice(tables)
        body = [self.drift_one(table) for _ in range(self.rng.randint(2, 4))]
        session = DRIFT_SESSION
        return Item(
            "drift",
            (
                Step(session, "SET SESSION sql_log_bin = 0", True),
                *(Step(session, sql) for sql in body),
                Step(session, "SET SESSION sql_log_bin = 1", True),
            ),
        )

    def drift_one(self, table: Table) -> str:
        """One drifting statement; the row it leaves is hot: later items pick it often."""
        key = table.known_key(self.rng, hot=False)  # each drifts another row
        where = self.sql.where_key(table, key)
        kind = self.rng.choice(("update", "update", "update", "update", "delete", "insert", "key"))
        if kind == "update" and table.value_columns():
            table.hot.append(key)
            return self.sql.update(table, self.some_values(table), where)
        if kind == "key":
            moved = table.fresh_key()
            table.hot.append(moved)
            return self.sql.change_key(table, key, moved)
        if kind == "delete":
            return self.sql.delete(table, where)
        row = self.row(table)
        table.hot.append(int(row[table.key]))  # type: ignore[call-overload]
        return self.sql.insert(table, [row])

    def item(self) -> Item:
        roll = self.rng.random()
        if roll < 0.12 and self.ddl_ok:
            return self.ddl()
        if roll < 0.3 and len(self.tables) > 1:
            return self.interleaved()
        if roll < 0.4:
            table = self.rng.choice(self.tables)
            return Item("autocommit", tuple(Step(0, s) for s in self.insert_one(table, [])))
        others = self.tables[1:] if len(self.tables) > 1 else []
        return Item("txn", tuple(self.transaction(0, self.tables[:1] + others, others)))


def _items(generator: _Generator, size: int, resync: bool) -> list[Item]:
    """``size`` items; with ``resync``, drift items ending the first half, then a re-sync."""
    if not resync:
        return [generator.item() for _ in range(size)]
    if generator.kind.product != "mariadb":
        raise ValueError(f"{generator.kind.name}: only MariaDB's binlog can be bypassed")
    half = size // 2
    generator.ddl_ok = False
    # Drift just before the re-sync, so that the log does not overwrite it all first.
    drifts = set(range(max(0, half - generator.rng.randint(2, 4)), half))
    items: list[Item] = []
    for index in range(size):
        if index in drifts:
            items.append(generator.drift())  # in the tables' shape at this point
        if index == half:
            items.append(Item("resync", (Step(0, "-- validate, then resync --apply", True),)))
        items.append(generator.item())
    return items


def _wrap(session: int, opening: list[str], body: list[Step], closing: list[str]) -> list[Step]:
    return [
        *(Step(session, sql, True) for sql in opening),
        *body,
        *(Step(session, sql, True) for sql in closing),
    ]


def _with_zeros(statement: str, columns: list[Column], sql: Dialect) -> str:
    """``big_insert`` with zeros for NOT NULL columns (added as INT NOT NULL)."""
    head, select = statement.split(") SELECT ", 1)
    names = "".join(f", {sql.quote(c.name)}" for c in columns)
    zeros = "".join(", 0" for _ in columns)
    first, rest = [*select.split(" FROM ", 1), ""][:2]
    return f"{head}{names}) SELECT {first}{zeros} FROM {rest}"


def _follow(table: Table, ddl: str, column: Column, name: str, product: str) -> None:
    """Change the generator's picture of ``table`` as the DDL ``ddl`` changes the table."""
    added = {
        "add_default": Column(name, "str"),
        "add_not_null": Column(name, "int", nullable=False),
        "add_volatile": Column(name, "dt" if product == "mariadb" else "ts"),
        "add_nullable": Column(name, "int"),
    }
    index = table.columns.index(column)
    if ddl in added:
        table.columns.append(added[ddl])
    elif ddl == "drop":
        del table.columns[index]
    elif ddl == "rename":  # a foreign key, an invisible column stays one
        table.columns[index] = dataclasses.replace(column, name=name)
    elif ddl == "modify":
        kind = "bigint" if column.kind == "int" else column.kind
        table.columns[index] = dataclasses.replace(column, kind=kind, nullable=True)


def generate(
    seed: int,
    source: str,
    size: int = SIZE,
    kills: bool = True,
    resync: bool = False,
    vocabulary: str = "default",
) -> Workload:
    """The workload of ``seed`` for source kind ``source``: about ``size`` items; a SIGKILL
    of the pipeline in about half the seeds when ``kills``. With ``resync`` (MariaDB: its
    binlog can be turned off per session), drift in the first half, then a re-sync, then
    the rest of the workload on the repaired rows. ``vocabulary="catalog"`` draws the
    columns' kinds from the type matrix (``vocabulary.py``); the default keeps every seed's
    workload as it was."""
    if vocabulary not in VOCABULARIES:
        raise ValueError(f"unknown vocabulary {vocabulary!r}: one of {VOCABULARIES}")
    generator = _Generator(seed, SOURCES[source], vocabulary)
    setup: list[str] = []
    if vocabulary == "catalog":
        setup += setup_types(generator.kind.product)
    for _ in range(generator.rng.randint(2, 3)):
        setup += generator.create()
        table = generator.tables[-1]
        rows = [generator.row(table) for _ in range(generator.rng.randint(2, 6))]
        setup.append(generator.sql.insert(table, rows))
    items = _items(generator, size, resync)
    if resync and kills:  # one kill after the re-sync at least: its request outlives it
        late = next(i for i, item in enumerate(items) if item.kind == "resync") + 1
        items.insert(generator.rng.randint(late, len(items)), Item("kill"))
    if kills and generator.rng.random() < 0.5:
        for _ in range(generator.rng.randint(1, 2)):
            items.insert(generator.rng.randrange(len(items) + 1), Item("kill"))
    budget = generator.rng.choice((0.05, 0.05, 64.0))
    return Workload(
        source, seed, tuple(setup), tuple(i for i in items if i.steps or i.kind == "kill"), budget
    )
