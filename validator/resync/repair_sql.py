"""Repair SQL for a database target, in its dialect, through SQLAlchemy Core.

Each repair action becomes one statement on the reflected target table: ``INSERT`` of a
row the target lacks, ``UPDATE`` of only the columns that differ, ``DELETE`` of a row the
source no longer has. Applied statements carry their values as bound parameters. For the
review file the same statements are compiled with literal values in the target's dialect
(SQLAlchemy escapes quotes, and backslashes where the server treats them as escapes);
values of sensitive columns are never rendered -- they appear as a ``:name`` placeholder
with a comment saying which column to bind.

Values are adapted to the target column's type by ``connectors.sql_target``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cdc_core.config import ConnectionConfig
from cdc_core.errors import ConfigError, TerminalError, TransientError
from cdc_core.names import parse_table
from connectors.model import RepairDialect
from connectors.registry import connector_for
from connectors.sql_target import build_engine, to_target_value, unescaped_backticks
from validator.resync.keys import TypedKey

if TYPE_CHECKING:
    import sqlalchemy as sa
    from sqlalchemy.engine import Engine

ACTION_KINDS = ("insert", "update", "delete")


@dataclass(frozen=True, slots=True)
class RepairAction:
    """One row repair on the target.

    Attributes:
        kind: ``insert``, ``update`` or ``delete``.
        key: The target key's values, in key-column order.
        values: Target column -> the source's value (insert: every compared column;
            update: the differing ones; delete: none).
    """

    kind: str
    key: TypedKey
    values: Mapping[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in ACTION_KINDS:
            raise ValueError(f"unknown repair kind {self.kind!r}")
        if (self.kind == "delete") != (not self.values):
            raise ValueError("a delete has no values; an insert or update has some")


@dataclass(frozen=True, slots=True)
class RepairTarget:
    """The reflected target table a comparison repairs.

    Attributes:
        engine: SQLAlchemy engine whose sessions run in UTC.
        table: The reflected table.
        key: Target key column names, in key order.
        sensitive: Target columns whose values are never rendered.
        dialect: What repair SQL must know of the target's product.
    """

    engine: Engine
    table: sa.Table
    key: tuple[str, ...]
    sensitive: frozenset[str] = frozenset()
    dialect: RepairDialect = field(default_factory=RepairDialect)


def reflect_target(
    connection: ConnectionConfig, table: str, key: Sequence[str], sensitive: frozenset[str]
) -> RepairTarget:
    """Reflect ``table`` (``schema.table`` or ``table``) on a database connection.

    Raises:
        TerminalError: The table does not exist or lacks a key column.
        TransientError: The database cannot be reached.
    """
    import sqlalchemy as sa

    if connection.url is None:
        raise ConfigError(f"connection {connection.name} is a lake, not a database")
    dialect = connector_for(connection.url).repair
    password = connection.password.reveal() if connection.password else None
    engine = build_engine(connection.url, password, dialect)
    name = parse_table(table)
    try:
        reflected = sa.Table(name.name, sa.MetaData(), schema=name.schema, autoload_with=engine)
    except sa.exc.NoSuchTableError as exc:
        raise TerminalError(
            f"target table {table!r} not found in {connection.display()}; check the"
            " comparison's target table",
            {"table": table},
        ) from exc
    except sa.exc.OperationalError as exc:
        raise TransientError(
            f"cannot reach {connection.display()}: {type(exc.orig).__name__}", {"table": table}
        ) from exc
    if dialect.doubled_backticks:
        reflected = unescaped_backticks(reflected)
    missing = [k for k in key if k not in reflected.c]
    if missing:
        raise TerminalError(f"target table {table!r} has no key columns {missing}")
    return RepairTarget(engine, reflected, tuple(key), sensitive, dialect)


def statement_of(target: RepairTarget, action: RepairAction, *, review: int | None = None) -> Any:
    """The SQLAlchemy statement of one action; ``review``: its number in a review file,
    where values are rendered as literals (sensitive ones as numbered placeholders)."""
    import sqlalchemy as sa

    table = target.table
    values = {name: _value(target, name, value, review) for name, value in action.values.items()}
    if action.kind == "insert":
        return sa.insert(table).values(values)
    where = _key_terms(target, action.key, review)
    if action.kind == "update":
        return sa.update(table).where(*where).values(values)
    return sa.delete(table).where(*where)


def _key_terms(target: RepairTarget, key: TypedKey, review: int | None = None) -> list[Any]:
    return [
        _key_term(target, name, part, review) for name, part in zip(target.key, key, strict=True)
    ]


def _key_term(target: RepairTarget, name: str, part: object, review: int | None) -> Any:
    column = target.table.c[name]
    if part is None:
        return column.is_(None)
    return column == _value(target, name, part, review)


def _value(target: RepairTarget, name: str, value: object, review: int | None) -> Any:
    """The SQL expression of one value for column ``name``."""
    import sqlalchemy as sa

    column = target.table.c[name]
    if review is not None and name in target.sensitive:
        label = f"sensitive_{review}_{list(target.table.c.keys()).index(name) + 1}"
        note = name.replace("*/", "* /")
        return sa.literal_column(f":{label} /* sensitive column {note}: bind its value */")
    if value is None:
        return sa.null()
    value = to_target_value(value, column.type, target.dialect)
    if isinstance(value, bytes) and review is not None:
        return sa.literal_column(target.dialect.bytes_literal(value))
    if isinstance(column.type, sa.JSON):
        return sa.cast(sa.literal(value, sa.Text()), column.type)
    return sa.literal(value, column.type)


def render_statement(target: RepairTarget, action: RepairAction, number: int) -> str:
    """Statement ``number`` of a review file: one action as SQL text with literal values."""
    statement = statement_of(target, action, review=number)
    compiled = statement.compile(
        dialect=_review_dialect(target), compile_kwargs={"literal_binds": True}
    )
    return f"{compiled};"


def _review_dialect(target: RepairTarget) -> Any:
    """SQLAlchemy's dialect of the target, rendering string literals as the review file's
    preamble makes the server read them (``standard_strings``: quotes doubled, a backslash
    an ordinary character), whatever the server it was reflected on had set."""
    dialect = target.engine.dialect
    if target.dialect.standard_strings is None:
        return dialect
    review: Any = copy.copy(dialect)
    review._backslash_escapes = False  # read by both dialects' render_literal_value
    return review


def session_preamble(target: RepairTarget) -> list[str]:
    """Statements a review file starts with: a UTC session, and string literals read as
    written (``standard_strings``)."""
    statements = (target.dialect.utc_session, target.dialect.standard_strings)
    return [f"{statement};" for statement in statements if statement]


def execute_actions(target: RepairTarget, connection: Any, actions: Sequence[RepairAction]) -> None:
    """Run ``actions`` with bound parameters on an open transaction's connection."""
    for action in actions:
        connection.execute(statement_of(target, action))


def limit_lock_waits(target: RepairTarget, connection: Any, seconds: float) -> None:
    """Make this transaction's lock waits fail after ``seconds`` instead of waiting on."""
    import sqlalchemy as sa

    if target.dialect.lock_wait is not None:
        connection.execute(sa.text(target.dialect.lock_wait(seconds)))


def lock_keys(target: RepairTarget, connection: Any, keys: Sequence[TypedKey]) -> None:
    """Lock the target rows of ``keys`` until the transaction ends (``SELECT ... FOR
    UPDATE``), so a replication applying newer changes to them waits for the repair."""
    import sqlalchemy as sa

    if not keys or not target.dialect.locks_rows:
        return  # single-writer products: the write transaction itself serialises
    columns = [target.table.c[name] for name in target.key]
    terms = [sa.and_(*_key_terms(target, key)) for key in keys]
    query = sa.select(*columns).where(sa.or_(*terms)).with_for_update()
    connection.execute(query).fetchall()
