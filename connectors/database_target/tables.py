"""A database target's tables: named after the source's, created with mapped types
(``types.py``), given the columns added at the source, moved aside when their types cannot
hold the source's any more.

DDL runs in transactions of its own, never inside a batch's: MariaDB commits the open
transaction at every DDL statement, which would split a batch from its progress row.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from cdc_core.capture.position import Position
from cdc_core.capture.source import RefusedColumn, TableDescription
from cdc_core.errors import TerminalError
from cdc_core.names import parse_table, same_table
from cdc_core.rebuild.copies import has_copies
from connectors.database_target.types import (
    MYSQL,
    column_type,
    holds_column,
    json_texts,
    target_table,
    unheld,
)
from connectors.model import TableSchema
from connectors.sql_target import unescaped_backticks

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine


class TargetTables:
    """The target tables of one pipeline's source tables.

    Args:
        engine: The target's engine.
        describe_source: The source table's columns with their logical types.
        schema: The schema every table goes to (None: the source table's schema name).
        display: The target as messages name it.
    """

    def __init__(
        self,
        engine: Engine,
        describe_source: Callable[[str], TableSchema],
        schema: str | None,
        display: str,
    ) -> None:
        self.engine = engine
        self.describe_source = describe_source
        self.schema = schema
        self.display = display
        self._tables: dict[str, sa.Table] = {}
        self._owners: dict[tuple[str | None, str], str] = {}

    @property
    def dialect(self) -> str:
        """The target's product as the type map names it: ``mariadb``, ``mysql`` (MySQL
        itself) or ``postgresql`` (SQLAlchemy's dialect is ``mysql`` for both of the first
        two until it has connected and seen the server)."""
        dialect = self.engine.dialect
        if dialect.name in MYSQL and getattr(dialect, "server_version_info", None) is None:
            with self.engine.connect():
                pass
        return "mariadb" if getattr(dialect, "is_mariadb", False) else str(dialect.name)

    def name_of(self, table: str) -> tuple[str | None, str]:
        """The target's ``(schema, table)`` of source table ``table``.

        Raises:
            TerminalError: Two source tables would land on one target table.
        """
        parsed = parse_table(table)
        name = (self.schema or parsed.schema, parsed.name)
        owner = self._owners.setdefault(name, table)
        if not same_table(owner, table):
            raise TerminalError(
                f"source tables {owner} and {table} would both be written to target table"
                f" {self._text(name)}; capture only one, or leave target_schema unset",
                {"table": table},
            )
        return name

    def where(self, table: str) -> str:
        """The target table of ``table`` as messages name it."""
        return f"{self._text(self.name_of(table))} in {self.display}"

    def exists(self, table: str) -> bool:
        """Whether the target has ``table``'s table."""
        if table in self._tables:
            return True
        schema, name = self.name_of(table)
        return bool(sa.inspect(self.engine).has_table(name, schema=schema))

    def get(self, table: str) -> sa.Table:
        """The target table of ``table`` as reflected (cached)."""
        found = self._tables.get(table)
        if found is None:
            found = self._tables[table] = self._reflect(table)
        return found

    def keyed_otherwise(self, description: TableDescription) -> bool:
        """Whether the existing target table's primary key is not the described key (in
        any order: the same columns hold the same rows apart)."""
        key = {column.name for column in self.get(description.table).primary_key.columns}
        return key != set(description.key)

    def ensure(self, description: TableDescription) -> sa.Table:
        """The target table, created with mapped types if missing, with every described
        column (columns new at the source added)."""
        if description.table not in self._tables and not self.exists(description.table):
            self._create(description)
        table = self.get(description.table)
        if any(name not in table.c for name in description.schema.names):
            self.add_columns(description)
            table = self.get(description.table)
        if any(column.name not in description.schema.names for column in table.c):
            self.drop_columns(description)
            table = self.get(description.table)
        return table

    def holds(self, description: TableDescription) -> bool:
        """Whether the table's columns hold every value of the described ones (True when
        it does not exist): the same mapped type, or both integers."""
        if not self.exists(description.table):
            return True
        table, dialect = self.get(description.table), self.engine.dialect
        source = self.describe_source(description.table)
        for name in description.schema.names:
            if name not in table.c:
                continue
            old = table.c[name].type
            new = self._type(source, description, name)
            same = str(new.compile(dialect=dialect)) == str(old.compile(dialect=dialect))
            if not same and not (isinstance(old, sa.Integer) and isinstance(new, sa.Integer)):
                return False
        return True

    def refused(self, description: TableDescription) -> tuple[RefusedColumn, ...]:
        """The described columns this target has no exact type for."""
        source = self.describe_source(description.table)
        columns = [c for c in source.columns if c.name in description.schema.names]
        return tuple(
            unheld(column, self.dialect)
            for column in columns
            if not holds_column(column, self.dialect, column.name in description.key)
        )

    def add_columns(self, description: TableDescription) -> None:
        """Add the described columns the target table lacks (nullable, no default)."""
        table = self.get(description.table)
        missing = [name for name in description.schema.names if name not in table.c]
        if not missing:
            return
        source = self.describe_source(description.table)
        prepare = self.engine.dialect.identifier_preparer
        with self.engine.begin() as connection:
            for name in missing:
                kind = self._type(source, description, name).compile(dialect=self.engine.dialect)
                connection.exec_driver_sql(
                    f"ALTER TABLE {self._quoted(description.table)}"
                    f" ADD COLUMN {prepare.quote(name)} {kind}"
                )
        self._tables.pop(description.table, None)

    def drop_columns(self, description: TableDescription) -> None:
        """Drop the target table's columns the source dropped: descriptions of a table only
        lag behind the source, so a column the target has and the batch's description
        lacks is gone at the source (a key column is never dropped: a new key retires the
        table instead)."""
        table = self.get(description.table)
        names = set(description.schema.names)
        gone = [c.name for c in table.c if c.name not in names and not c.primary_key]
        quote = self.engine.dialect.identifier_preparer.quote
        with self.engine.begin() as connection:
            for name in gone:
                connection.exec_driver_sql(
                    f"ALTER TABLE {self._quoted(description.table)} DROP COLUMN {quote(name)}"
                )
        self._tables.pop(description.table, None)

    def drop(self, table: str) -> None:
        """Drop ``table``'s target table if it exists."""
        with self.engine.begin() as connection:
            connection.exec_driver_sql(f"DROP TABLE IF EXISTS {self._quoted(table)}")
        self._tables.pop(table, None)

    def retire(self, table: str, position: Position) -> str | None:
        """Rename ``table``'s target table aside (``<name>__retired_<position>``); its new
        name (None: it did not exist)."""
        if not self.exists(table):
            return None
        schema, name = self.name_of(table)
        prepare = self.engine.dialect.identifier_preparer
        new = f"{name}__retired_{position.value}"
        qualified_new = self._quoted_name(schema, new)
        with self.engine.begin() as connection:
            if self.dialect in MYSQL:
                connection.exec_driver_sql(f"RENAME TABLE {self._quoted(table)} TO {qualified_new}")
            else:
                connection.exec_driver_sql(
                    f"ALTER TABLE {self._quoted(table)} RENAME TO {prepare.quote(new)}"
                )
        self._tables.pop(table, None)
        return self._text((schema, new))

    def _create(self, description: TableDescription) -> None:
        # A table located by all its columns may hold equal rows and NULLs in them: no key
        # of a target table can hold those apart (the lake numbers them: cdc_core.rebuild.copies).
        if not description.key or has_copies(description.key):
            raise TerminalError(
                f"table {description.table} has no key: a database target applies changes by"
                " key; give the table a primary key at the source, or replicate it into a lake",
                {"table": description.table},
            )
        schema, name = self.name_of(description.table)
        source = self.describe_source(description.table)
        names = description.schema.names
        types = {column: self._type(source, description, column) for column in names}
        texts = json_texts([source.column(column) for column in names], self.dialect)
        table = target_table(name, schema, description.key, types, texts)
        with self.engine.begin() as connection:
            if schema is not None:
                connection.execute(sa.schema.CreateSchema(schema, if_not_exists=True))
            table.create(connection)

    def _type(self, source: TableSchema, description: TableDescription, name: str) -> Any:
        try:
            column = source.column(name)
        except KeyError:
            raise TerminalError(
                f"column {name} of table {description.table} is not in the source's table any"
                " more; restart the pipeline so that it reads the table's definition again",
                {"table": description.table, "column": name},
            ) from None
        return column_type(column, description.table, self.dialect, name in description.key)

    def _reflect(self, table: str) -> sa.Table:
        schema, name = self.name_of(table)
        reflected = sa.Table(name, sa.MetaData(), schema=schema, autoload_with=self.engine)
        if self.dialect in MYSQL:
            return unescaped_backticks(reflected)
        return _json_as_text(reflected)

    def _quoted(self, table: str) -> str:
        return self._quoted_name(*self.name_of(table))

    def _quoted_name(self, schema: str | None, name: str) -> str:
        prepare = self.engine.dialect.identifier_preparer
        quoted = prepare.quote(name)
        return f"{prepare.quote_schema(schema)}.{quoted}" if schema else quoted

    @staticmethod
    def _text(name: tuple[str | None, str]) -> str:
        schema, table = name
        return f"{schema}.{table}" if schema else table


def _json_as_text(table: sa.Table) -> sa.Table:
    """The table with JSON columns bound as text cast to JSON: a source gives JSON as its
    text, which must arrive as written (SQLAlchemy's JSON type would serialise it again)."""
    if not any(isinstance(column.type, sa.JSON) for column in table.columns):
        return table
    columns = [
        sa.Column(c.name, JsonText() if isinstance(c.type, sa.JSON) else c.type,
                  primary_key=c.primary_key, nullable=c.nullable)
        for c in table.columns
    ]  # fmt: skip
    return sa.Table(table.name, sa.MetaData(), *columns, schema=table.schema)


class JsonText(sa.types.TypeDecorator[str]):
    """A JSON column written from its text (cast to JSON by the server)."""

    impl = sa.Text
    cache_ok = True

    def bind_expression(self, bindvalue: Any) -> Any:
        return sa.cast(bindvalue, sa.JSON)
