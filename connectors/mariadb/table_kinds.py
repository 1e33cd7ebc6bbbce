"""Tables whose changes the binlog does not carry whole: refused by name before loading.

- **Cascading foreign keys.** InnoDB performs a foreign key's ``ON DELETE``/``ON UPDATE``
  ``CASCADE``, ``SET NULL`` and ``SET DEFAULT`` inside the storage engine, and the child
  rows they change are not written to the binlog
  (https://mariadb.com/kb/en/replication-and-foreign-keys/): a captured child table would
  keep deleted rows and old parent keys. Whether the parent is captured or not, the child
  misses the cascade's effect, so every captured table with such a key is refused, naming
  the constraint, its parent and its actions. ``ddl.py`` stops the pipeline at a DDL that
  adds one to a captured table.
- **Transaction-precise system versioning.** A system-versioned table whose period counts
  transaction ids has its changes logged as statements, not row images
  (``system_versioning``).

MySQL differs on cascades. Up to 9.5 (8.0 and 8.4 LTS included) InnoDB performs them and
the binlog does not carry them either. From 9.6 the server performs foreign key actions
itself by default (``innodb_native_foreign_keys=OFF``) and writes the cascaded child rows
as row events before the parent's
(https://dev.mysql.com/doc/refman/9.7/en/replication-features-foreign-keys.html). replcheck
refuses cascades on every server all the same: MySQL 9.6 is not among the servers it is
tested against, and the setting can turn the old behaviour back on.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cdc_core.errors import ConfigError
from cdc_core.names import format_table, split_table
from connectors.mariadb.system_versioning import SYSTEM_VERSIONED

if TYPE_CHECKING:
    from connectors.mariadb.connector import MariaDBConnector

CASCADING = ("CASCADE", "SET NULL", "SET DEFAULT")
"""The referential actions that change child rows (InnoDB performs them unlogged)."""


@dataclass(frozen=True, slots=True)
class CascadingKey:
    """A foreign key of a child table whose actions change its rows unlogged.

    Args:
        child: The table holding the foreign key (``schema.table``).
        constraint: The constraint's name.
        parent: The referenced table (``schema.table``).
        actions: Its cascading actions, as SQL writes them (``ON DELETE CASCADE``).
    """

    child: str
    constraint: str
    parent: str
    actions: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.actions:
            raise ValueError(f"foreign key {self.constraint} of {self.child} has no action")


class UncapturableTableError(ConfigError):
    """Captured tables whose changes the binlog does not carry whole (``cdc run`` exits 2)."""

    @classmethod
    def of(cls, cascades: Sequence[CascadingKey], precise: Sequence[str]) -> UncapturableTableError:
        """The error naming every refused table, why, and the way out."""
        problems = [_cascades_text(table, keys) for table, keys in _by_child(cascades).items()]
        problems += [
            f"table {table} is system-versioned by transaction ids (its period columns are"
            " BIGINT UNSIGNED), and MariaDB logs its changes as statements, not row images;"
            " version it by TIMESTAMP(6) period columns or leave it out of the pipeline's"
            " tables"
            for table in precise
        ]
        tables = [*_by_child(cascades), *precise]
        return cls("; ".join(problems), {"tables": ", ".join(dict.fromkeys(tables))})


def _by_child(keys: Sequence[CascadingKey]) -> dict[str, list[CascadingKey]]:
    grouped: dict[str, list[CascadingKey]] = {}
    for key in keys:
        grouped.setdefault(key.child, []).append(key)
    return grouped


def _cascades_text(table: str, keys: Sequence[CascadingKey]) -> str:
    named = ", ".join(
        f"{key.constraint} ({' '.join(key.actions)}) referencing {key.parent}" for key in keys
    )
    return (
        f"table {table} has the cascading foreign key{'s' if len(keys) > 1 else ''} {named}:"
        " InnoDB changes the child rows of a cascade without writing them to the binlog, so"
        " the lake would keep deleted rows and old values; drop the cascading actions (make"
        " them RESTRICT and delete or update the child rows explicitly in the application)"
        " or leave the table out of the pipeline's tables"
    )


def _by_schema(tables: Sequence[str], database: str) -> dict[str, list[str]]:
    """Table names by schema (unqualified names are in ``database``)."""
    grouped: dict[str, list[str]] = {}
    for table in tables:
        schema, name = split_table(table, database)
        grouped.setdefault(schema, []).append(name)
    return grouped


def iter_cascading_keys(
    cursor: Any, tables: Sequence[str], database: str
) -> Iterator[CascadingKey]:
    """The cascading foreign keys of ``tables`` (``REFERENTIAL_CONSTRAINTS`` of
    ``information_schema``), table by table in the given order, each table's by name."""
    found: dict[str, list[CascadingKey]] = {}
    for schema, names in _by_schema(tables, database).items():
        for key in _schema_keys(cursor, schema, names):
            found.setdefault(key.child, []).append(key)
    for table in tables:
        yield from found.get(format_table(*split_table(table, database)), [])


def _schema_keys(cursor: Any, schema: str, tables: Sequence[str]) -> Iterator[CascadingKey]:
    listed = ", ".join(["%s"] * len(tables))
    actions = ", ".join(["%s"] * len(CASCADING))
    cursor.execute(
        "SELECT TABLE_NAME, CONSTRAINT_NAME, UNIQUE_CONSTRAINT_SCHEMA, REFERENCED_TABLE_NAME,"
        " DELETE_RULE, UPDATE_RULE FROM information_schema.REFERENTIAL_CONSTRAINTS"
        f" WHERE CONSTRAINT_SCHEMA = %s AND TABLE_NAME IN ({listed})"
        f" AND (DELETE_RULE IN ({actions}) OR UPDATE_RULE IN ({actions}))"
        " ORDER BY TABLE_NAME, CONSTRAINT_NAME",
        (schema, *tables, *CASCADING, *CASCADING),
    )
    for child, constraint, parent_schema, parent, on_delete, on_update in cursor.fetchall():
        rules = (("DELETE", on_delete), ("UPDATE", on_update))
        cascading = tuple(f"ON {event} {rule}" for event, rule in rules if rule in CASCADING)
        yield CascadingKey(
            format_table(schema, child), constraint, format_table(parent_schema, parent), cascading
        )


def iter_transaction_precise(cursor: Any, tables: Sequence[str], database: str) -> Iterator[str]:
    """The system-versioned tables among ``tables`` whose period counts transaction ids
    (its row-start column is a ``BIGINT UNSIGNED``; implicit periods are timestamps)."""
    found: set[str] = set()
    for schema, names in _by_schema(tables, database).items():
        # Only versioned tables' columns are read: COLUMNS opens every table it lists
        # (and MariaDB 10.11 crashed once under this query over many tables).
        for name in _versioned(cursor, schema, names):
            cursor.execute(
                "SELECT 1 FROM information_schema.COLUMNS"
                " WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s"
                " AND GENERATION_EXPRESSION = 'ROW START' AND DATA_TYPE = 'bigint'",
                (schema, name),
            )
            if cursor.fetchall():
                found.add(format_table(schema, name))
    for table in tables:
        if format_table(*split_table(table, database)) in found:
            yield table


def _versioned(cursor: Any, schema: str, names: Sequence[str]) -> list[str]:
    """The system-versioned tables among ``names`` of ``schema``."""
    listed = ", ".join(["%s"] * len(names))
    cursor.execute(
        "SELECT TABLE_NAME FROM information_schema.TABLES"
        f" WHERE TABLE_SCHEMA = %s AND TABLE_NAME IN ({listed}) AND TABLE_TYPE = %s",
        (schema, *names, SYSTEM_VERSIONED),
    )
    return [str(name) for (name,) in cursor.fetchall()]


def refuse_uncapturable(cursor: Any, tables: Sequence[str], database: str) -> None:
    """Refuse the tables whose changes the binlog does not carry whole (see the module doc).

    Args:
        cursor: A cursor on the source.
        tables: The captured tables (``schema.table``, or names in ``database``).
        database: The URL's database (the schema of unqualified names).

    Raises:
        UncapturableTableError: Names every refused table, why, and the way out.
    """
    if not tables:
        return
    cascades = list(iter_cascading_keys(cursor, tables, database))
    precise = list(iter_transaction_precise(cursor, tables, database))
    if cascades or precise:
        raise UncapturableTableError.of(cascades, precise)


def check_capturable(connector: MariaDBConnector, tables: Sequence[str]) -> None:
    """``refuse_uncapturable`` on a connection of its own to ``connector``'s server."""
    with connector.connect() as connection, connection.cursor() as cursor:
        refuse_uncapturable(cursor, tables, connector.database())
