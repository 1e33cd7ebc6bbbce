"""SQLite as a snapshot source, through the standard library's ``sqlite3``.

Each read runs in one read transaction (a consistent snapshot of the file); SQLite has no
log, so positions are NULL, and snapshots cannot be shared between connections.
"""

from __future__ import annotations

import datetime as dt
import decimal
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing
from typing import TYPE_CHECKING, Any

from cdc_core.errors import TerminalError
from cdc_core.names import parse_table
from connectors.base import Connector, file_path, missing_table
from connectors.model import (
    Capabilities,
    Partition,
    Snapshot,
    SourceColumn,
    TableSchema,
)
from connectors.sqlite.product import SQLITE
from connectors.sqlite.types import logical_type
from merkle import types as lt

if TYPE_CHECKING:
    import pyarrow as pa

BATCH_ROWS = 20_000


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _quote_table(table: str) -> str:
    """A canonical table name (``cdc_core.names``; a schema is an attached database)."""
    return ".".join(map(_quote, parse_table(table).parts))


class SQLiteConnector(Connector):
    """SQLite files, addressed as ``sqlite:///path/to/file.db``."""

    name = SQLITE.name
    schemes = SQLITE.schemes
    capabilities = Capabilities()
    repair = SQLITE.repair

    @property
    def path(self) -> str:
        return file_path(self.url, "sqlite", "SQLite", "path/file.db")

    def _connect(self) -> sqlite3.Connection:
        try:
            return sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
        except sqlite3.Error as exc:
            raise TerminalError(f"cannot open SQLite file {self.path}: {exc}") from exc

    def reflect(self, table: str) -> TableSchema:
        with closing(self._connect()) as connection:
            name = parse_table(table)
            # The table-valued form takes the schema as an argument
            # (https://www.sqlite.org/pragma.html#pragfunc).
            rows = connection.execute(
                "SELECT * FROM pragma_table_info(?, ?)", (name.name, name.schema or "main")
            ).fetchall()
        if not rows:
            raise missing_table(table, f"SQLite file {self.path}")
        columns = tuple(
            SourceColumn(name, declared or "", logical_type(declared or ""), not notnull)
            for _, name, declared, notnull, _, _ in rows
        )
        key = tuple(name for _, name, *_rest, pk in sorted(rows, key=lambda r: r[5]) if pk)
        return TableSchema(table, columns, key)

    def key_range(self, table: str, column: str) -> tuple[int, int] | None:
        with closing(self._connect()) as connection:
            low, high = connection.execute(
                f"SELECT min({_quote(column)}), max({_quote(column)}) FROM {_quote_table(table)}"
            ).fetchone()
        return None if low is None else (int(low), int(high))

    def read_partition(
        self,
        table: TableSchema,
        columns: Sequence[str],
        partition: Partition,
        snapshot: Snapshot | None = None,
    ) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        schema = self.arrow_schema(table, columns)
        where, params = partition.predicate(_quote, "?")
        select = ", ".join(_quote(c) for c in columns)
        converters = [value_converter(table.column(c)) for c in columns]
        with closing(self._connect()) as connection:
            connection.execute("BEGIN")  # one read transaction: a consistent snapshot
            cursor = connection.execute(
                f"SELECT {select} FROM {_quote_table(table.table)}{where}", params
            )
            while rows := cursor.fetchmany(BATCH_ROWS):
                arrays = [
                    pa.array([None if r[i] is None else convert(r[i]) for r in rows], field.type)
                    for i, (convert, field) in enumerate(zip(converters, schema, strict=False))
                ]
                arrays.append(pa.nulls(len(rows), pa.int64()))
                yield pa.RecordBatch.from_arrays(arrays, schema=schema)


def value_converter(column: SourceColumn) -> Callable[[Any], Any]:
    """Stored value -> the value the declared type means (SQLite may store it as text)."""
    ltype = column.ltype
    if isinstance(ltype, lt.DecimalType):
        scale = decimal.Decimal(1).scaleb(-(ltype.scale or 0))
        return lambda v: decimal.Decimal(str(v)).quantize(scale)
    if isinstance(ltype, lt.TimestampType):
        return lambda v: v if isinstance(v, dt.datetime) else dt.datetime.fromisoformat(str(v))
    if isinstance(ltype, lt.DateType):
        return lambda v: v if isinstance(v, dt.date) else dt.date.fromisoformat(str(v))
    if isinstance(ltype, lt.BooleanType):
        return bool
    if isinstance(ltype, lt.FloatType):
        return float
    if isinstance(ltype, lt.StringType | lt.JsonType | lt.UuidType):
        return str
    return lambda v: v
