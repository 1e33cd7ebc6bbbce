"""DuckDB as a snapshot source: reflection, key ranges and partition reads in Arrow.

A DuckDB file admits any number of read-only connections across processes, so each Spark
task opens its own; the file is the snapshot (DuckDB has no log, hence no position).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from cdc_core import names
from cdc_core.drivers import driver_import
from cdc_core.errors import TerminalError
from connectors.base import Connector, file_path, missing_table
from connectors.duckdb.product import DUCKDB
from connectors.duckdb.types import TIMESTAMP_ROUNDING, logical_type
from connectors.model import (
    POSITION_COLUMN,
    Capabilities,
    Partition,
    Snapshot,
    SourceColumn,
    TableSchema,
)
from merkle import types as lt

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

BATCH_ROWS = 65_536
_WIDE_INTEGERS = {"HUGEINT", "UBIGINT", "UHUGEINT"}  # wider than Arrow's int64


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def split_table(table: str) -> tuple[str, str]:
    """Canonical ``schema.table`` (``cdc_core.names``) -> (schema, table); a bare name is in
    ``main``."""
    return names.split_table(table, "main")


class DuckDBConnector(Connector):
    """DuckDB files, addressed as ``duckdb:///path/to/file.duckdb``."""

    name = DUCKDB.name
    schemes = DUCKDB.schemes
    capabilities = Capabilities(timestamp_rounding=TIMESTAMP_ROUNDING)
    repair = DUCKDB.repair

    @property
    def path(self) -> str:
        return file_path(self.url, "duckdb", "DuckDB", "path/file.duckdb")

    def _connect(self) -> duckdb.DuckDBPyConnection:
        with driver_import("the DuckDB connector"):
            import duckdb

        try:
            return duckdb.connect(self.path, read_only=True)
        except duckdb.Error as exc:
            raise TerminalError(f"cannot open DuckDB file {self.path}: {exc}") from exc

    def reflect(self, table: str) -> TableSchema:
        schema, name = split_table(table)
        with self._connect() as connection:
            rows = connection.execute(
                "SELECT column_name, data_type, is_nullable FROM information_schema.columns"
                " WHERE table_schema = ? AND table_name = ? ORDER BY ordinal_position",
                [schema, name],
            ).fetchall()
            key = connection.execute(
                "SELECT unnest(constraint_column_names) FROM duckdb_constraints()"
                " WHERE schema_name = ? AND table_name = ? AND constraint_type = 'PRIMARY KEY'",
                [schema, name],
            ).fetchall()
        if not rows:
            raise missing_table(table, f"DuckDB file {self.path}")
        columns = tuple(
            SourceColumn(column, data_type, logical_type(data_type), nullable == "YES")
            for column, data_type, nullable in rows
        )
        return TableSchema(table, columns, tuple(k for (k,) in key))

    def key_range(self, table: str, column: str) -> tuple[int, int] | None:
        schema, name = split_table(table)
        with self._connect() as connection:
            low, high = connection.execute(
                f"SELECT min({_quote(column)}), max({_quote(column)})"
                f" FROM {_quote(schema)}.{_quote(name)}"
            ).fetchone() or (None, None)
        return None if low is None else (int(low), int(high))

    def read_partition(
        self,
        table: TableSchema,
        columns: Sequence[str],
        partition: Partition,
        snapshot: Snapshot | None = None,
    ) -> Iterator[pa.RecordBatch]:
        schema, name = split_table(table.table)
        select = ", ".join(self._select_expression(table.column(c)) for c in columns)
        select += f", CAST(NULL AS BIGINT) AS {POSITION_COLUMN}"  # DuckDB has no log
        sql = f"SELECT {select} FROM {_quote(schema)}.{_quote(name)}"
        where, params = partition.predicate(_quote, "?")
        sql += where
        target = self.arrow_schema(table, columns)
        with self._connect() as connection:
            reader = connection.sql(sql, params=params).to_arrow_reader(BATCH_ROWS)
            for batch in reader:
                yield batch.cast(target)

    def arrow_type(self, table: TableSchema, name: str) -> pa.DataType:
        import pyarrow as pa

        if table.column(name).native_type.upper() in _WIDE_INTEGERS:
            return pa.decimal128(38, 0)
        return super().arrow_type(table, name)

    @staticmethod
    def _select_expression(column: SourceColumn) -> str:
        quoted = _quote(column.name)
        if column.native_type.upper() in _WIDE_INTEGERS:
            return f"CAST({quoted} AS DECIMAL(38,0)) AS {quoted}"  # beyond BIGINT
        if isinstance(column.ltype, lt.UuidType | lt.JsonType):
            return f"CAST({quoted} AS VARCHAR) AS {quoted}"
        if isinstance(column.ltype, lt.TimeType):
            return f"epoch_us({quoted}) AS {quoted}"  # microseconds since midnight
        if isinstance(column.ltype, lt.TimestampTzType):
            return f"epoch_us({quoted}) AS {quoted}"  # the instant, zone-free
        return quoted
