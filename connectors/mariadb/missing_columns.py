"""Columns a MINIMAL binlog image leaves out, completed for the rebuild (``fetch_missing``).

With ``binlog_row_image=MINIMAL`` an insert's after-image holds only the columns the
statement set; MariaDB also logs columns whose default is an expression (``CURRENT_TIMESTAMP``,
``UUID()``), since only the server knows their value, but not those with a constant default
(https://mariadb.com/kb/en/replication-and-binary-log-system-variables/#binlog_row_image,
verified on MariaDB 10.11). And a row image stored before an ``ALTER TABLE ... ADD COLUMN``
lacks the new column, which the server filled with its default in every existing row.

So a missing column is completed, in this order:

1. from its default, when the default is a constant: exact, since the server stored exactly
   that value. Defaults are read from ``information_schema.COLUMNS`` (the binlog's table
   maps carry none) and read again when a column is not known yet. A default changed by a
   later ``ALTER ... SET DEFAULT`` would be applied to rows written before the change: take
   a new snapshot of a table after changing a default while the pipeline lags behind. A
   zero date default is NULL, and one that is not a calendar date stops the pipeline, as a
   FULL image carrying it would (``zero_dates``).
2. otherwise (an expression default, a non-zero TIMESTAMP literal, which the inserting session's
   time zone interprets, or a type without literals) by reading the row by key from the
   source. That is the fallback because it gives the row as it is *now*: exact while the
   column has not changed since, which is the case for a column the log never carried.

A row the store does not know at all (an update or delete of a table captured without an
initial snapshot) is read whole from the source, as ``cdc_core.rebuild.full_width`` expects of
``fetch_missing``. If the row is gone from the source (deleted or moved to another key
since), or no longer has the column (renamed or dropped since), nothing can tell the value
the log left out: ``UnreadableRowError`` tells the rebuild so, and the pipeline refreshes the
table from that change on (``cdc_core.ddl.table_refresh``) instead of inventing values.
"""

from __future__ import annotations

import datetime as dt
import decimal
import logging
import re
import struct
from collections.abc import Callable, Hashable, Iterator, Mapping
from typing import TYPE_CHECKING, Final

from cdc_core.capture.position import Position
from cdc_core.names import split_table
from cdc_core.rebuild.full_width import FetchedRow, UnreadableRowError
from connectors.base import key_text
from connectors.mariadb.zero_dates import NOT_A_DATE, UnrepresentableDateError, from_text
from connectors.table_changes import retry_while_changing

if TYPE_CHECKING:
    from connectors.mariadb.snapshot import MariaDBSnapshotReader

logger = logging.getLogger(__name__)


class _NotConstant:
    """The default of a column is an expression or cannot be written as a value here."""

    def __repr__(self) -> str:
        return "NOT_CONSTANT"


NOT_CONSTANT: Final = _NotConstant()

_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_ESCAPE = re.compile(r"\\(.)|''", re.S)
# MariaDB's string escapes (https://mariadb.com/kb/en/string-literals/#escape-sequences).
_ESCAPED = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a"}
_INTEGERS = ("tinyint", "smallint", "mediumint", "int", "integer", "bigint")
_STRINGS = ("varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set", "json")
_BYTES = ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob")


def _unescape(body: str) -> str:
    def one(match: re.Match[str]) -> str:
        if match[0] == "''":
            return "'"
        return _ESCAPED.get(match[1], match[1])

    return _ESCAPE.sub(one, body)


def _literal(text: str) -> str | None:
    """The literal a ``COLUMN_DEFAULT`` holds (unquoted), or None for an expression."""
    if len(text) >= 2 and text[0] == "'" and text[-1] == "'":
        return _unescape(text[1:-1])
    if _NUMBER.fullmatch(text):
        return text
    return None


def _time_micros(text: str) -> int:
    sign = -1 if text.startswith("-") else 1
    hours, minutes, seconds = text.lstrip("-").split(":")
    whole, _, fraction = seconds.partition(".")
    total = (int(hours) * 60 + int(minutes)) * 60 + int(whole)
    return sign * (total * 1_000_000 + int((fraction + "000000")[:6]))


def _dated(text: str, parse: Callable[[str], object]) -> object:
    """A DATE or DATETIME literal as the binlog decoder reads the value: the zero date as
    None, any other date that is not a calendar date as ``NOT_A_DATE`` (``zero_dates``)."""
    try:
        return parse(text)
    except ValueError:
        return from_text(text)


def _bit(text: str, width: int) -> object:
    if not (text.startswith("b'") and text.endswith("'")):
        return NOT_CONSTANT
    value = int(text[2:-1] or "0", 2)
    return bool(value) if width == 1 else value


def _width(column_type: str) -> int:
    match = re.search(r"\((\d+)", column_type)
    return int(match[1]) if match else 1


def _typed(literal: str, kind: str, column_type: str) -> object:
    """The value the binlog decoder (``binlog_values``) gives for this literal."""
    unsigned = "unsigned" in column_type
    if kind in _INTEGERS:
        return decimal.Decimal(int(literal)) if kind == "bigint" and unsigned else int(literal)
    if kind in ("decimal", "numeric"):
        return decimal.Decimal(literal)
    if kind == "float":  # stored in single precision, decoded widened
        return struct.unpack("<f", struct.pack("<f", float(literal)))[0]
    if kind in ("double", "real"):
        return float(literal)
    if kind == "year":
        return int(literal)
    if kind == "date":
        return _dated(literal, dt.date.fromisoformat)
    if kind == "datetime":
        return _dated(literal, dt.datetime.fromisoformat)
    if kind == "time":
        return _time_micros(literal)
    if kind == "char":
        return literal.rstrip(" ")  # CHAR is stored and logged without trailing spaces
    if kind in _STRINGS:
        return literal
    if kind in _BYTES and literal.isascii():
        raw = literal.encode("ascii")
        return raw.ljust(_width(column_type), b"\0") if kind == "binary" else raw
    if kind == "timestamp" and from_text(literal) is None:
        return None  # the zero TIMESTAMP is zero in every time zone
    # Another TIMESTAMP: a literal is read in the inserting session's time zone, unknown here
    # (https://mariadb.com/kb/en/timestamp/#time-zones); UUID, INET, spatial: no plain value.
    return NOT_CONSTANT


def constant_default(column_default: str | None, column_type: str, generated: bool) -> object:
    """The value a column's constant default stores, or ``NOT_CONSTANT``.

    Args:
        column_default: ``information_schema.COLUMNS.COLUMN_DEFAULT`` (MariaDB >= 10.2.7:
            literals quoted, ``NULL`` for a NULL default, expressions as written).
        column_type: ``COLUMN_TYPE``, e.g. ``decimal(10,2)`` or ``bigint(20) unsigned``.
        generated: The column is computed (``IS_GENERATED`` is not ``NEVER``).
    """
    if column_default is None or generated:
        return NOT_CONSTANT  # no default at all, or computed from other columns
    if column_default == "NULL":
        return None
    kind = column_type.lower().split("(")[0].split()[0]
    if kind == "bit":
        return _bit(column_default, _width(column_type))
    literal = _literal(column_default)
    if literal is None:
        return NOT_CONSTANT
    try:
        return _typed(literal, kind, column_type.lower())
    except (ValueError, decimal.InvalidOperation):
        return NOT_CONSTANT  # a literal this code does not read: the source row decides


class MissingColumns:
    """The ``fetch_missing`` hook of a MariaDB source's captured tables.

    Args:
        snapshots: Reads a row by key in a consistent snapshot (the fallback).
    """

    def __init__(self, snapshots: MariaDBSnapshotReader) -> None:
        self._snapshots = snapshots
        self._defaults: dict[str, dict[str, object]] = {}

    def fetch(self, table: str, locator: Hashable) -> Mapping[str, object] | None:
        """The row at ``locator`` as far as the rebuild asks for it (read lazily)."""
        return _MissingRow(self, table, locator)

    def default(self, table: str, column: str) -> object:
        """The column's constant default, or ``NOT_CONSTANT``."""
        defaults = self._defaults.get(table)
        if defaults is None or column not in defaults:
            defaults = self._defaults[table] = self._read_defaults(table)
        return defaults.get(column, NOT_CONSTANT)

    def read_row(self, table: str, locator: Hashable) -> tuple[Position, dict[str, object] | None]:
        """The source's row at ``locator`` now (None when it is gone), and where it was read."""
        key = locator if isinstance(locator, tuple) else (locator,)

        def read() -> tuple[Position, list[dict[str, object]]]:
            with self._snapshots.snapshot([table], {table: [key]}) as (position, tables):
                return position, [r for s in tables for b in s.batches for r in b.to_pylist()]

        position, rows = retry_while_changing(read)
        logger.info("table %s: read a row by key from the source to complete a change", table)
        return position, rows[0] if rows else None

    def refused(self, table: str, column: str, locator: Hashable) -> UnrepresentableDateError:
        """The error for a default that is not a calendar date, naming the row's key."""
        from connectors.mariadb.snapshot import describe_table

        key = describe_table(self._snapshots.connector, table, self._snapshots.keys).key
        values = locator if isinstance(locator, tuple) else (locator,)
        return UnrepresentableDateError.of(table, column, key_text(key, values))

    def _read_defaults(self, table: str) -> dict[str, object]:
        import contextlib

        schema, name = split_table(table, self._snapshots.database)
        connector = self._snapshots.connector
        with contextlib.closing(connector.connect()) as connection, connection.cursor() as cur:
            cur.execute(
                "SELECT COLUMN_NAME, COLUMN_DEFAULT, COLUMN_TYPE, IS_GENERATED"
                " FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                (schema, name),
            )
            rows = cur.fetchall()
        return {
            str(column): constant_default(default, str(ctype), str(generated) != "NEVER")
            for column, default, ctype, generated in rows
        }


class _MissingRow(FetchedRow):
    """A row of the source, answered column by column: constant defaults first.

    Asked for single columns (an insert's omitted ones, or columns added since the stored
    image), it answers constant defaults without touching the source. Iterated (the rebuild
    wants a whole row it does not know), it is the source's row as read now.
    """

    def __init__(self, source: MissingColumns, table: str, locator: Hashable) -> None:
        self._source = source
        self._table = table
        self._locator = locator
        self._row: dict[str, object] | None = None
        self._read_at: Position | None = None

    @property
    def read_at(self) -> Position | None:
        """Where the source row was read (None: constant defaults answered)."""
        return self._read_at

    def __getitem__(self, column: str) -> object:
        if self._row is None:
            default = self._source.default(self._table, column)
            if default is NOT_A_DATE:
                raise self._source.refused(self._table, column, self._locator)
            if default is not NOT_CONSTANT:
                return default
        row = self._read(column)
        if column not in row:
            raise UnreadableRowError(
                f"column {column} of table {self._table} is no longer at the source"
            )
        return row[column]

    def __iter__(self) -> Iterator[str]:
        return iter(self._read(None))

    def __len__(self) -> int:
        return len(self._read(None))

    def _read(self, column: str | None) -> dict[str, object]:
        if self._row is None:
            position, row = self._source.read_row(self._table, self._locator)
            if row is None:
                raise UnreadableRowError(
                    f"the row of table {self._table} is no longer at the source, so"
                    f" {'column ' + column if column else 'its columns'} left out of the"
                    " binlog's MINIMAL row image cannot be read"
                )
            self._row, self._read_at = row, position
        return self._row
