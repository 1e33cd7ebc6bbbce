"""Table kinds read from the servers' catalogs (issue 36): those a server offers, and those
the tables of a database have.

A table kind is a catalog fact about a table, named as the catalog names it:

- **PostgreSQL**: the partitioning of a table that is no partition (``pg_get_partkeydef``:
  ``partitioned by RANGE``), its key (``pg_constraint.contype`` p, u: ``primary key``,
  ``only a unique key``, ``no key``), generated columns (``pg_attribute.attgenerated``:
  ``generated column STORED``) and each referential action of its foreign keys as
  ``information_schema.referential_constraints`` decodes ``confdeltype``/``confupdtype``
  (``foreign key ON DELETE SET NULL``).
- **MariaDB**: ``information_schema.TABLES.TABLE_TYPE`` (``SYSTEM VERSIONED``), the type
  of declared period columns (``GENERATION_EXPRESSION`` ``ROW START``: ``system-versioned
  by timestamp period columns``, ``... by bigint ...`` for transaction ids), each item of
  ``COLUMNS.EXTRA`` of the other columns (``VIRTUAL GENERATED``, ``STORED GENERATED``,
  ``INVISIBLE``), the key (``TABLE_CONSTRAINTS``) and ``REFERENTIAL_CONSTRAINTS``'s
  ``DELETE_RULE``/``UPDATE_RULE``.

What a server offers is what its catalog records for a probe table of each candidate
definition it accepts (``postgres_probes``, ``mariadb_probes``): the partitionings, the
generated columns of both products (``STORED``, ``VIRTUAL``), system versioning by
timestamps and by transaction ids, invisible columns, the three key shapes, and every
referential action: PostgreSQL's as its own ``information_schema`` view decodes them
(``postgres_actions``), MariaDB's the SQL standard's five, which the server accepts and
records as it implements them (``SET DEFAULT`` as ``RESTRICT``). A candidate the server
refuses (``VIRTUAL`` before PostgreSQL 18) is no kind it offers.
"""

from __future__ import annotations

import contextlib
import re
from typing import Any

STANDARD_ACTIONS = ("NO ACTION", "RESTRICT", "CASCADE", "SET NULL", "SET DEFAULT")
# pg_attribute.attgenerated (https://www.postgresql.org/docs/current/catalog-pg-attribute.html)
POSTGRES_GENERATED = {"s": "STORED", "v": "VIRTUAL"}

_POSTGRES_TABLES = """
SELECT c.oid, pg_get_partkeydef(c.oid),
       ARRAY(SELECT k.contype::text FROM pg_constraint k WHERE k.conrelid = c.oid)
  FROM pg_class c
 WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p')
   AND NOT c.relispartition
"""
_POSTGRES_GENERATED = """
SELECT DISTINCT a.attgenerated::text FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
 WHERE c.relnamespace = 'public'::regnamespace AND a.attgenerated <> '' AND NOT a.attisdropped
"""
_POSTGRES_RULES = """
SELECT DISTINCT delete_rule, update_rule FROM information_schema.referential_constraints
 WHERE constraint_schema = 'public'
"""


def postgres_actions(connection: Any) -> list[str]:
    """The referential actions PostgreSQL's ``information_schema`` decodes ``confdeltype``
    into (its view's ``CASE con.confdeltype WHEN 'c' THEN 'CASCADE' ...``)."""
    (definition,) = connection.execute(
        "SELECT pg_get_viewdef('information_schema.referential_constraints')"
    ).fetchone()
    case = definition[definition.index("CASE con.confdeltype") :]
    case = case[: case.index("END")]
    return re.findall(r"THEN '([A-Z ]+)'", case)


def postgres_probes(actions: list[str]) -> list[list[str]]:
    """Candidate table definitions, each a list of statements (a failing one: not offered)."""
    probes = [
        ["CREATE TABLE pk (id bigint PRIMARY KEY)"],
        ["CREATE TABLE uk (id bigint UNIQUE)"],
        ["CREATE TABLE nk (id bigint)"],
        *(
            [f"CREATE TABLE part_{s} (id bigint) PARTITION BY {s} (id)"]
            for s in ("RANGE", "LIST", "HASH")
        ),
        *(
            [f"CREATE TABLE gen_{s} (id bigint, g bigint GENERATED ALWAYS AS (id * 2) {s})"]
            for s in ("STORED", "VIRTUAL")
        ),
    ]
    for number, action in enumerate(actions):
        for event in ("DELETE", "UPDATE"):
            column = f"p bigint REFERENCES pk (id) ON {event} {action}"
            probes.append([f"CREATE TABLE fk_{event}_{number} (id bigint, {column})"])
    return probes


def postgres_table_kinds(connection: Any) -> set[str]:
    """The table kinds of the tables in schema ``public`` of ``connection``'s database."""
    kinds = set()
    for _, partitioning, constraints in connection.execute(_POSTGRES_TABLES).fetchall():
        if partitioning:
            kinds.add(f"partitioned by {partitioning.split()[0]}")
        kinds.add(_key_kind("p" in constraints, "u" in constraints))
    for (generated,) in connection.execute(_POSTGRES_GENERATED).fetchall():
        kinds.add(f"generated column {POSTGRES_GENERATED.get(generated, generated)}")
    for delete_rule, update_rule in connection.execute(_POSTGRES_RULES).fetchall():
        kinds |= {f"foreign key ON DELETE {delete_rule}", f"foreign key ON UPDATE {update_rule}"}
    return kinds


def _key_kind(primary: bool, unique: bool) -> str:
    return "primary key" if primary else "only a unique key" if unique else "no key"


def mariadb_probes() -> list[list[str]]:
    """Candidate table definitions, each a list of statements (a failing one: not offered)."""
    period = "PERIOD FOR SYSTEM_TIME(s, e)"
    probes = [
        ["CREATE TABLE pk (id BIGINT PRIMARY KEY)"],
        ["CREATE TABLE uk (id BIGINT UNIQUE)"],
        ["CREATE TABLE nk (id BIGINT)"],
        ["CREATE TABLE vi (id BIGINT) WITH SYSTEM VERSIONING"],
        *(
            [
                f"CREATE TABLE v{n} (id BIGINT, s {t} GENERATED ALWAYS AS ROW START,"
                f" e {t} GENERATED ALWAYS AS ROW END, {period}) WITH SYSTEM VERSIONING"
            ]
            for n, t in enumerate(("TIMESTAMP(6)", "BIGINT UNSIGNED"))
        ),
        *(
            [f"CREATE TABLE gen_{s} (id BIGINT, g BIGINT AS (id * 2) {s})"]
            for s in ("VIRTUAL", "PERSISTENT", "STORED")
        ),
        ["CREATE TABLE inv (id BIGINT, i INT INVISIBLE)"],
    ]
    for number, action in enumerate(STANDARD_ACTIONS):
        for event in ("DELETE", "UPDATE"):
            key = f"FOREIGN KEY (p) REFERENCES pk (id) ON {event} {action}"
            probes.append([f"CREATE TABLE fk_{event}_{number} (id BIGINT, p BIGINT, {key})"])
    return probes


def mariadb_table_kinds(cursor: Any, schema: str) -> set[str]:
    """The table kinds of the tables in database ``schema``."""
    kinds: set[str] = set()
    cursor.execute(
        "SELECT t.TABLE_TYPE, (SELECT GROUP_CONCAT(c.CONSTRAINT_TYPE)"
        " FROM information_schema.TABLE_CONSTRAINTS c WHERE c.TABLE_SCHEMA = t.TABLE_SCHEMA"
        " AND c.TABLE_NAME = t.TABLE_NAME) FROM information_schema.TABLES t"
        " WHERE t.TABLE_SCHEMA = %s",
        (schema,),
    )
    for table_type, constraints in cursor.fetchall():
        kinds |= {table_type, _key_kind("PRIMARY" in (constraints or ""), "UNIQUE" in (
            constraints or ""))}  # fmt: skip
    cursor.execute(
        "SELECT DATA_TYPE, EXTRA, GENERATION_EXPRESSION FROM information_schema.COLUMNS"
        " WHERE TABLE_SCHEMA = %s",
        (schema,),
    )
    for data_type, extra, expression in cursor.fetchall():
        if expression in ("ROW START", "ROW END"):
            kinds.add(f"system-versioned by {data_type} period columns")
        else:
            kinds |= {item for item in str(extra).split(", ") if item}
    cursor.execute(
        "SELECT DELETE_RULE, UPDATE_RULE FROM information_schema.REFERENTIAL_CONSTRAINTS"
        " WHERE CONSTRAINT_SCHEMA = %s",
        (schema,),
    )
    for delete_rule, update_rule in cursor.fetchall():
        kinds |= {f"foreign key ON DELETE {delete_rule}", f"foreign key ON UPDATE {update_rule}"}
    return kinds


def run_probes(execute: Any, probes: list[list[str]]) -> None:
    """Run each probe's statements with ``execute``; a statement the server refuses ends
    its probe (that candidate is not offered)."""
    for probe in probes:
        with contextlib.suppress(Exception):
            for statement in probe:
                execute(statement)
