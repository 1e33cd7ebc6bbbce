"""Oracle as a snapshot source: dictionary reflection and flashback reads AS OF SCN.

One SCN is taken when a comparison starts and every partition reads ``AS OF SCN`` it, so
the partitions share one exact position without holding a transaction open (the undo
retention must cover the run: ORA-01555 means it did not). Connects with ``oracledb`` in
thin mode; the URL is SQLAlchemy's ``oracle+oracledb://user@host:port/?service_name=NAME``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from cdc_core.capture.source import LOCATOR_COLUMN
from cdc_core.drivers import driver_import
from cdc_core.errors import ConfigError, TerminalError, TransientError
from connectors.base import Connector, missing_table
from connectors.model import Capabilities, Partition, Snapshot, TableSchema
from connectors.oracle import sql
from connectors.oracle.logminer.contents import schema_from_dictionary
from connectors.oracle.product import ORACLE
from merkle import types as lt

if TYPE_CHECKING:
    import pyarrow as pa

BATCH_ROWS = 20_000


class OracleConnector(Connector):
    """Oracle Database, read with flashback queries at one SCN."""

    name = ORACLE.name
    schemes = ORACLE.schemes
    capabilities = Capabilities()
    repair = ORACLE.repair

    def connect(self) -> Any:
        with driver_import("the Oracle connector"):
            import oracledb

        url = self.endpoint
        service = url.query.get("service_name") or url.database
        if not url.host or not service:
            raise ConfigError(
                "an Oracle URL looks like oracle+oracledb://user@host:1521/?service_name=NAME"
            )
        dsn = f"{url.host}:{url.port or 1521}/{service}"
        try:
            connection = oracledb.connect(user=url.username, password=self.password, dsn=dsn)
        except oracledb.Error as exc:
            raise TransientError(f"cannot connect to Oracle at {dsn}: {exc}") from exc
        connection.outputtypehandler = _exact_numbers
        return connection

    def at_instance(self, instance: str) -> OracleConnector:
        """A connector of the same user and password to ``instance`` (``host[:port]/service``:
        a LogMiner ``mining_instance``)."""
        url = self.endpoint
        address, _, service = instance.partition("/")
        user = quote(url.username or "", safe="")
        return OracleConnector(
            f"{url.drivername}://{user}@{address}/?service_name={service}", self.password
        )

    def owner(self) -> str:
        return (self.endpoint.username or "").upper()

    def reflect(self, table: str) -> TableSchema:
        owner, name = sql.split_table(table, self.owner())
        with contextlib.closing(self.connect()) as connection, connection.cursor() as cursor:
            cursor.execute(sql.COLUMNS, owner=owner, name=name)
            rows = cursor.fetchall()
            cursor.execute(sql.PRIMARY_KEY, owner=owner, name=name)
            key = tuple(row[0] for row in cursor.fetchall())
        if not rows:
            raise missing_table(table, f"Oracle schema {owner}")
        return schema_from_dictionary(table, rows, key)

    def key_range(self, table: str, column: str) -> tuple[int, int] | None:
        owner, name = sql.split_table(table, self.owner())
        quoted = sql.quote(column)
        query = f"SELECT MIN({quoted}), MAX({quoted}) FROM {sql.quote(owner)}.{sql.quote(name)}"
        with contextlib.closing(self.connect()) as connection, connection.cursor() as cursor:
            cursor.execute(query)
            low, high = cursor.fetchone()
        return None if low is None else (int(low), int(high))

    @contextlib.contextmanager
    def shared_snapshot(self, at_log_position: bool = True) -> Iterator[Snapshot | None]:
        """The current SCN: every partition reads AS OF it (exact whether asked or not)."""
        with contextlib.closing(self.connect()) as connection, connection.cursor() as cursor:
            try:
                cursor.execute(sql.CURRENT_SCN)
            except Exception as exc:
                raise TerminalError(
                    f"cannot read the current SCN ({exc}): grant SELECT ON V_$DATABASE to the user"
                ) from exc
            (scn,) = cursor.fetchone()
        yield Snapshot(int(scn), str(scn), str(scn), "AS OF the current SCN")

    def arrow_type(self, table: TableSchema, name: str) -> pa.DataType:
        import pyarrow as pa

        if name == LOCATOR_COLUMN:
            return pa.string()
        if isinstance(table.column(name).ltype, lt.IntervalType):
            raise TerminalError(f"column {name} ({table.column(name).native_type}) cannot be read")
        return super().arrow_type(table, name)

    def read_partition(
        self,
        table: TableSchema,
        columns: Sequence[str],
        partition: Partition,
        snapshot: Snapshot | None = None,
    ) -> Iterator[pa.RecordBatch]:
        owner, name = sql.split_table(table.table, self.owner())
        where, params = partition.predicate(sql.quote, "%s")
        where, binds = sql.numbered_binds(where, params)
        query = sql.flashback_select(owner, name, sql.typed(table, columns), where)
        yield from self.read_query(table, columns, query, binds, snapshot)

    def read_query(
        self,
        table: TableSchema,
        columns: Sequence[str],
        query: str,
        binds: Mapping[str, object],
        snapshot: Snapshot | None = None,
        *,
        session: Sequence[str] = (),
    ) -> Iterator[pa.RecordBatch]:
        """Batches of a flashback query selecting ``columns`` of ``table`` (bound at
        ``:scn`` to the snapshot's SCN, after the ``session`` statements ran)."""
        import pyarrow as pa

        schema = self.arrow_schema(table, columns)
        typed = sql.typed(table, columns)
        with contextlib.ExitStack() as stack:
            taken = snapshot or stack.enter_context(self.shared_snapshot())
            assert taken is not None  # Oracle always has an SCN to share
            scn = taken.position
            connection = stack.enter_context(contextlib.closing(self.connect()))
            cursor = stack.enter_context(connection.cursor())
            for statement in session:
                cursor.execute(statement)
            cursor.arraysize = BATCH_ROWS
            cursor.execute(query, {**binds, "scn": scn})
            while rows := cursor.fetchmany(BATCH_ROWS):
                arrays = [
                    pa.array([fetched_value(r[i], ltype) for r in rows], schema.field(i).type)
                    for i, (_, ltype) in enumerate(typed)
                ]
                arrays.append(pa.array([scn] * len(rows), pa.int64()))
                yield pa.RecordBatch.from_arrays(arrays, schema=schema)


def fetched_value(value: Any, ltype: lt.LogicalType | None) -> Any:
    """A value python-oracledb fetched, as the column's logical type holds it."""
    if value is None:
        return None
    if isinstance(ltype, lt.TimestampTzType):
        return value.replace(tzinfo=dt.UTC)  # selected through SYS_EXTRACT_UTC
    if isinstance(ltype, lt.IntegerType):
        return int(value)  # NUMBER(p,0) arrives as a Decimal
    if hasattr(value, "read"):
        return value.read()  # a LOB
    return value


def _exact_numbers(cursor: Any, metadata: Any) -> Any:
    """NUMBER columns as Decimal, never float, and LOBs whole (python-oracledb's
    outputtypehandler)."""
    import decimal

    import oracledb

    if metadata.type_code is oracledb.DB_TYPE_NUMBER:
        return cursor.var(decimal.Decimal, arraysize=cursor.arraysize)
    # LOBs whole, as str or bytes, not as locators to read one by one after the fetch.
    whole = {
        oracledb.DB_TYPE_CLOB: oracledb.DB_TYPE_LONG,
        oracledb.DB_TYPE_NCLOB: oracledb.DB_TYPE_LONG_NVARCHAR,
        oracledb.DB_TYPE_BLOB: oracledb.DB_TYPE_LONG_RAW,
    }.get(metadata.type_code)
    if whole is not None:
        return cursor.var(whole, arraysize=cursor.arraysize)
    return None
