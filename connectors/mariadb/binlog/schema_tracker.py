"""The schema in force at each binlog position: table maps and the DDL between them.

With ``binlog_row_metadata=FULL`` every table map event carries the table's column names,
types, signedness, character sets, ENUM/SET values and primary key *as they were when the
row events after it were written* (https://mariadb.com/kb/en/replication-and-binary-log-system-variables/#binlog_row_metadata).
So rows are decoded with the layout of the table map their event refers to by table id,
never with ``information_schema`` (which holds today's schema, not the schema at the
event) and never with "the last table map seen" (a trigger's statement maps several tables
before its row events). DDL statements in the log (ALTER, RENAME, TRUNCATE, DROP, CREATE
... SELECT) are recognised here: TRUNCATE becomes a ``t`` change, the others invalidate what
``describe`` cached.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any, Literal

from cdc_core.names import format_table
from connectors.mariadb.binlog.values import (
    STRING,
    ColumnCodec,
    dated_type,
    decoder_of,
    kept_type,
    uuid_text,
)
from connectors.mariadb.errors import BinlogMetadataError, KeyConfigError
from connectors.mariadb.system_versioning import SystemPeriod, without_period_end

logger = logging.getLogger(__name__)

KeySource = Literal["primary key", "configured key", "all columns"]


@dataclass(frozen=True, slots=True)
class TableCatalog:
    """What a table map does not say about a table, from the catalog (today's definition).

    Args:
        period: The period of a system-versioned table.
        uuids: The ``UUID`` columns (a table map shows them as ``BINARY(16)``).
        virtual: The ``VIRTUAL`` generated columns an after-image must hold (``generated``):
            none on a server that does not log FULL images (they are refused there).
    """

    period: SystemPeriod | None = None
    uuids: frozenset[str] = frozenset()
    virtual: frozenset[str] = frozenset()


CatalogLookup = Callable[[str, tuple[str, ...]], TableCatalog]
"""The catalog's facts of a table (``schema.table``) whose table map has these columns."""


def _no_catalog(table: str, columns: tuple[str, ...]) -> TableCatalog:
    return TableCatalog()


@dataclass(frozen=True, slots=True)
class TableLayout:
    """How the rows of one table map are decoded and located.

    Args:
        table: ``schema.table``.
        codecs: One per column of the table map, in column order.
        key: The columns whose values, in this order, form a row's locator.
        key_source: Where ``key`` came from.
        period: The period columns of a system-versioned table (``system_versioning``):
            its images are followed as changes of its current rows.
        virtual: The virtual generated columns every after-image must hold.
    """

    table: str
    codecs: tuple[ColumnCodec, ...]
    key: tuple[str, ...]
    key_source: KeySource
    period: SystemPeriod | None = None
    virtual: tuple[str, ...] = ()
    dated: tuple[str, ...] = field(init=False)  # the columns that may hold NOT_A_DATE

    def __post_init__(self) -> None:
        dated = tuple(codec.name for codec in self.codecs if codec.dated)
        object.__setattr__(self, "dated", dated)


DdlKind = Literal["truncate", "rename", "alter", "drop", "create"]


@dataclass(frozen=True, slots=True)
class DdlChange:
    """A DDL statement of the log, as far as replication cares.

    Args:
        kind: What the statement does.
        tables: The tables it acts on (``schema.table``).
        renamed_to: For ``rename``, the new name of each table in ``tables``.
        specification: For ``alter``, the clauses after the table name.
        ignore: For ``alter``, ``ALTER IGNORE TABLE``.
    """

    kind: DdlKind
    tables: tuple[str, ...]
    renamed_to: tuple[str, ...] = ()
    specification: str = ""
    ignore: bool = False


# A table name part as MariaDB SQL writes it: backtick-quoted with any content (a backtick
# doubled), double-quoted (ANSI_QUOTES), or unquoted: ASCII letters, digits, $, _ and
# U+0080..U+FFFF (https://mariadb.com/kb/en/identifier-names/).
_NAME = r'(?:`(?:[^`]|``)+`|"(?:[^"]|"")+"|[\w$\u0080-\uffff]+)'
_QUALIFIED = rf"({_NAME}(?:\s*\.\s*{_NAME})?)"
# Comments, skipping quoted names and strings (a `#` or `--` inside them is not a comment).
_COMMENTS = re.compile(
    r"(`(?:[^`]|``)*`|'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.|\"\")*\")"
    r"|/\*.*?\*/|#[^\n]*|--\s[^\n]*",
    re.S,
)
_TRUNCATE = re.compile(rf"^TRUNCATE\s+(?:TABLE\s+)?{_QUALIFIED}", re.I)
_RENAME = re.compile(r"^RENAME\s+TABLES?\s+(.*)$", re.I | re.S)
_RENAME_PAIR = re.compile(rf"{_QUALIFIED}\s+(?:WAIT\s+\d+\s+|NOWAIT\s+)?TO\s+{_QUALIFIED}", re.I)
_ALTER = re.compile(
    rf"^ALTER\s+(?:ONLINE\s+)?(IGNORE\s+)?TABLE\s+(?:IF\s+EXISTS\s+)?{_QUALIFIED}(.*)$",
    re.I | re.S,
)
_ALTER_RENAME = re.compile(rf"\bRENAME\s+(?:TO\s+|AS\s+)?{_QUALIFIED}\s*(?:,|$)", re.I)
_DROP = re.compile(r"^DROP\s+(?:TEMPORARY\s+)?TABLES?\s+(?:IF\s+EXISTS\s+)?(.*)$", re.I | re.S)
_CREATE = re.compile(
    rf"^CREATE\s+(?:OR\s+REPLACE\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?{_QUALIFIED}", re.I
)


# Index statements: a UNIQUE key of NOT NULL columns can become (or stop being) the key
# the server locates rows by in a table without a primary key (``connector._primary_key``).
_CREATE_INDEX = re.compile(
    rf"^CREATE\s+(?:OR\s+REPLACE\s+)?(UNIQUE\s+|FULLTEXT\s+|SPATIAL\s+)?(?:INDEX|KEY)\s+"
    rf"(?:IF\s+NOT\s+EXISTS\s+)?{_NAME}\s+(?:USING\s+\w+\s+)?ON\s+{_QUALIFIED}",
    re.I,
)
_DROP_INDEX = re.compile(rf"^DROP\s+INDEX\s+(?:IF\s+EXISTS\s+)?({_NAME})\s+ON\s+{_QUALIFIED}", re.I)


def _unquote(name: str) -> str:
    name = name.strip()
    if name[:1] in ("`", '"'):
        return name[1:-1].replace(name[0] * 2, name[0])
    return name


def qualify(name: str, default_schema: str) -> str:
    """The canonical ``schema.table`` (``cdc_core.names``) of a SQL table name of a DDL
    statement: possibly quoted, possibly unqualified."""
    parts = [_unquote(part) for part in re.findall(_NAME, name)]
    return format_table(parts[0] if len(parts) == 2 else default_schema, parts[-1])


def parse_ddl(query: str, default_schema: str) -> DdlChange | None:
    """The DDL change a query event makes, or ``None`` for anything else."""
    sql = _COMMENTS.sub(lambda match: match[1] or " ", query).strip()
    if match := _TRUNCATE.match(sql):
        return DdlChange("truncate", (qualify(match[1], default_schema),))
    if match := _RENAME.match(sql):
        pairs = _RENAME_PAIR.findall(match[1])
        olds = tuple(qualify(old, default_schema) for old, _ in pairs)
        return DdlChange("rename", olds, tuple(qualify(new, default_schema) for _, new in pairs))
    if match := _ALTER.match(sql):
        table = qualify(match[2], default_schema)
        if renamed := _ALTER_RENAME.search(match[3]):
            return DdlChange("rename", (table,), (qualify(renamed[1], default_schema),))
        return DdlChange("alter", (table,), specification=match[3], ignore=bool(match[1]))
    if match := _DROP.match(sql):
        names = re.findall(_QUALIFIED, match[1].split(" RESTRICT")[0].split(" CASCADE")[0])
        return DdlChange("drop", tuple(qualify(name, default_schema) for name in names))
    if match := _CREATE.match(sql):
        return DdlChange("create", (qualify(match[1], default_schema),))
    if match := _CREATE_INDEX.match(sql):  # as the ALTER TABLE clause it equals
        added = f"ADD {(match[1] or '').strip()} INDEX".replace("  ", " ")
        return DdlChange("alter", (qualify(match[2], default_schema),), specification=added)
    if match := _DROP_INDEX.match(sql):
        table = qualify(match[2], default_schema)
        return DdlChange("alter", (table,), specification=f"DROP INDEX {match[1]}")
    return None


@dataclass(slots=True)
class SchemaTracker:
    """Table layouts by table id, for the captured tables only.

    Args:
        tables: The captured tables, ``schema.table`` (the reader may add to them).
        keys: Per table, a configured key for tables without a primary key.
        catalog: Where a table's period and UUID columns are looked up.
    """

    tables: AbstractSet[str]
    keys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    catalog: CatalogLookup = _no_catalog
    _layouts: dict[int, tuple[object, TableLayout]] = field(default_factory=dict)
    _warned: set[str] = field(default_factory=set)

    def captures(self, table: str) -> bool:
        """Whether changes of ``table`` are read."""
        return table in self.tables

    def on_table_map(self, event: Any) -> TableLayout | None:
        """The layout of a table map event; ``None`` for a table that is not captured.

        Raises:
            BinlogMetadataError: The table map has no column names.
            KeyConfigError: A configured key names columns the table does not have.
        """
        table = format_table(event.schema, event.table)
        if not self.captures(table):
            return None
        fingerprint = _fingerprint(event)
        cached = self._layouts.get(event.table_id)
        if cached is not None and cached[0] == fingerprint:
            return cached[1]
        layout = self._build(table, event)
        self._layouts[event.table_id] = (fingerprint, layout)
        return layout

    def layout(self, table_id: int) -> TableLayout | None:
        """The layout the last table map with ``table_id`` set; ``None`` if not captured."""
        cached = self._layouts.get(table_id)
        return cached[1] if cached else None

    def forget_table_ids(self) -> None:
        """Table ids are per server run: a new binlog file may reuse them for other tables."""
        self._layouts.clear()

    def _build(self, table: str, event: Any) -> TableLayout:
        names = [column.name for column in event.columns]
        if any(not name for name in names):
            raise BinlogMetadataError.for_table(table)
        facts = self.catalog(table, tuple(names))
        codecs = tuple(_codec(table, column, facts.uuids) for column in event.columns)
        period = _period(facts.period, names)
        hidden = (period.start, period.end) if period is not None and period.hidden else ()
        kept = [codec.name for codec in codecs if codec.kept and codec.name not in hidden]
        primary = without_period_end(_primary_key(event, names), period)
        key, source = choose_key(table, kept, primary, self.keys.get(table))
        if source != "primary key" and table not in self._warned:
            self._warned.add(table)
            logger.warning(key_warning(table, key, source))
        virtual = tuple(name for name in names if name in facts.virtual)
        return TableLayout(table, codecs, key, source, period, virtual)


def _period(period: SystemPeriod | None, names: Sequence[str]) -> SystemPeriod | None:
    """The table's period if this table map has its columns: the catalog holds today's
    definition, and a table map from before ``ADD SYSTEM VERSIONING`` has none."""
    if period is None or period.start not in names or period.end not in names:
        return None
    return period


def choose_key(
    table: str,
    columns: Sequence[str],
    primary: Sequence[str],
    configured: Sequence[str] | None,
) -> tuple[tuple[str, ...], KeySource]:
    """The columns that locate a row: the primary key, else the configured key, else all.

    Raises:
        KeyConfigError: A key is configured for a table whose primary key differs (the
            binlog's MINIMAL before-image carries only the primary key), or it names
            columns the table does not have.
    """
    configured = tuple(configured or ())
    if primary:
        if configured and configured != tuple(primary):
            raise KeyConfigError.conflicts(table, configured, primary)
        return tuple(primary), "primary key"
    if configured:
        missing = [column for column in configured if column not in columns]
        if missing:
            raise KeyConfigError.missing(table, configured, missing)
        return configured, "configured key"
    return tuple(columns), "all columns"


def key_warning(table: str, key: Sequence[str], source: KeySource) -> str:
    """What to tell the user about a table located without a primary key."""
    if source == "configured key":
        return (
            f"table {table} has no primary key; rows are located by the configured key {list(key)}"
        )
    return (
        f"table {table} has no primary key and no configured key; rows are located by all"
        " their columns; equal rows are kept apart in the lake as numbered copies"
    )


def _codec(table: str, column: Any, uuids: AbstractSet[str]) -> ColumnCodec:
    from connectors.mariadb.binlog.values import UnsupportedColumnError

    decode = decoder_of(column)
    if decode is None:
        raise UnsupportedColumnError(
            f"column {column.name} of table {table} has binlog type {column.type}, which"
            " replcheck cannot decode; exclude the table",
            {"table": table, "column": column.name},
        )
    # Only a table map that still shows the catalog's UUID as its 16 bytes: one from
    # before an ALTER that made the column a UUID holds the old type's value.
    if column.name in uuids and column.type == STRING and column.max_length == 16:
        decode = uuid_text(decode)
    return ColumnCodec(column.name, decode, kept_type(column.type), dated_type(column.type))


def _primary_key(event: Any, names: Sequence[str]) -> tuple[str, ...]:
    metadata = getattr(event, "optional_metadata", None)
    indexes = list(getattr(metadata, "simple_primary_key_list", None) or [])
    if not indexes:
        with_prefix = getattr(metadata, "primary_keys_with_prefix", None) or {}
        indexes = list(with_prefix)
    return tuple(names[index] for index in indexes)


def _fingerprint(event: Any) -> object:
    """What a layout depends on; table maps repeat before every statement."""
    return (
        event.schema,
        event.table,
        tuple(
            tuple(sorted(column.data.items(), key=lambda item: item[0])) for column in event.columns
        ),
        tuple(getattr(event.optional_metadata, "simple_primary_key_list", None) or ()),
    )
