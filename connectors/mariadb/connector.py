"""MariaDB/MySQL as a snapshot source: reflection, key ranges, partition reads.

InnoDB snapshots cannot be shared between connections, so every partition opens its own
``START TRANSACTION WITH CONSISTENT SNAPSHOT`` and reports the binlog position that
snapshot corresponds to, as the server's product gives it (``snapshot_position``: MariaDB's
``binlog_snapshot_file`` / ``binlog_snapshot_position`` with no lock, MySQL's status under a
brief global read lock). The server's product is asked once per connector (``flavour``).
The session runs in UTC so TIMESTAMP columns (instants) come back in UTC.
Zero dates read as NULL; other dates that are not calendar dates are refused, naming the
row's primary key (``zero_dates``).
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from cdc_core.config import mask_url
from cdc_core.drivers import driver_import
from cdc_core.errors import ConfigError, TerminalError, TransientError
from cdc_core.names import split_table
from connectors.base import Connector, key_text, missing_table
from connectors.mariadb.failover import FailoverError
from connectors.mariadb.flavour import ServerFlavour, detect_flavour
from connectors.mariadb.position import describe_position, epoch_of
from connectors.mariadb.product import MARIADB
from connectors.mariadb.snapshot_position import (
    SnapshotPosition,
    begin_snapshot,
    binlog_basename,
    binlog_end,
)
from connectors.mariadb.system_versioning import system_period, without_period_end
from connectors.mariadb.tls import TLS_PARAMETERS, TlsSettings, access_denied, tls_refusal
from connectors.mariadb.types import (
    MAX_LAKE_DIGITS,
    is_wide_integer,
    logical_type,
    timestamp_rounding,
)
from connectors.mariadb.url_parameters import LOG_PARAMETERS, is_log_parameter
from connectors.mariadb.zero_dates import (
    NOT_A_DATE,
    REFUSABLE_TYPES,
    UnrepresentableDateError,
    from_text,
)
from connectors.model import (
    Capabilities,
    Partition,
    Snapshot,
    SourceColumn,
    TableSchema,
    key_parameter,
)
from merkle import types as lt
from merkle.options import TimeRounding

if TYPE_CHECKING:
    import pyarrow as pa
    import pymysql.connections

    from connectors.jdbc import JdbcRead
    from connectors.mariadb.pushdown import MariaDBDigestSession
    from connectors.pushdown import DigestDialect

BATCH_ROWS = 20_000
_ONE_MICRO = dt.timedelta(microseconds=1)


def quote(name: str) -> str:
    """A MariaDB identifier, backquoted (https://mariadb.com/kb/en/identifier-names/)."""
    return "`" + name.replace("`", "``") + "`"


class MariaDBConnector(Connector):
    """MariaDB and MySQL, addressed by SQLAlchemy URLs (``mysql+pymysql://...``)."""

    name = MARIADB.name
    schemes = MARIADB.schemes
    _basename: str | None = None  # the binlog's base name, once describe_position read it
    _flavour: ServerFlavour | None = None  # the server's product, once a snapshot asked it
    _epoch = 0  # the epoch the lake's pipelines number this server's positions in
    # The default sql_mode truncates; ``timestamp_rounding`` reads the server's own.
    capabilities = Capabilities(timestamp_rounding=TimeRounding.TRUNCATE)
    repair = MARIADB.repair

    def connect(self) -> pymysql.connections.Connection[Any]:
        with driver_import("the MariaDB connector"):
            import pymysql

        url = self.endpoint
        check_parameters(url.query, self.url)
        tls = TlsSettings.from_query(url.query, self.url)
        try:
            connection = _connection_class()(
                host=url.host or "127.0.0.1",
                port=url.port or 3306,
                user=url.username,
                password=self.password or url.password or "",
                database=url.database,
                charset="utf8mb4",
                autocommit=True,
                connect_timeout=10,
                **tls.pymysql_arguments(),
            )
        except pymysql.err.OperationalError as exc:
            refused = tls_refusal(exc, tls)
            if refused is not None:
                raise ConfigError(f"cannot connect to {mask_url(self.url)}: {refused}") from exc
            code = exc.args[0] if exc.args else None
            problem = access_denied(tls) if code == 1045 else exc.args[-1]
            raise TransientError(f"cannot connect to {mask_url(self.url)}: {problem}") from exc
        with connection.cursor() as cursor:
            cursor.execute("SET time_zone = '+00:00'")
        return connection

    def timestamp_rounding(self) -> TimeRounding:
        """The global sql_mode's rule: the best evidence of how stored times were rounded."""
        with self.connect() as connection, connection.cursor() as cursor:
            cursor.execute("SELECT @@GLOBAL.sql_mode")
            row = cursor.fetchone()
        return timestamp_rounding(str(row[0]) if row else "")

    def _version(self) -> str:
        with self.connect() as connection, connection.cursor() as cursor:
            cursor.execute("SELECT VERSION()")
            row = cursor.fetchone()
        return str(row[0]) if row else ""

    def is_mariadb(self) -> bool:
        """Whether the server is MariaDB (else MySQL)."""
        return "mariadb" in self._version().lower()

    def digest_dialect(self) -> DigestDialect | None:
        """MariaDB only: the SQL is tested against MariaDB's functions (``TIME_TO_SEC``'s
        fractions, ``LOG2``, the UUID type); MySQL is compared in Spark."""
        from connectors.mariadb.pushdown import MariaDBDigestDialect

        return MariaDBDigestDialect(self.qualified) if self.is_mariadb() else None

    def jdbc_read(
        self,
        table: TableSchema,
        columns: Sequence[str],
        partition_column: str | None = None,
        snapshot: Snapshot | None = None,
    ) -> JdbcRead | None:
        """Each partition opens its own snapshot (``snapshot`` is always None here)."""
        from connectors.mariadb.jdbc import jdbc_read

        return jdbc_read(self, table, columns, partition_column)

    def digest_session(
        self, table: TableSchema, snapshot: Snapshot | None
    ) -> AbstractContextManager[MariaDBDigestSession]:
        from connectors.mariadb.pushdown import digest_session

        return digest_session(self, table)

    @staticmethod
    def quote(name: str) -> str:
        """A quoted identifier."""
        return quote(name)

    def qualified(self, table: str) -> str:
        """The quoted ``schema.table`` of a table (the URL's database by default)."""
        schema, name = split_table(table, self.database())
        return f"{quote(schema)}.{quote(name)}"

    def database(self) -> str:
        return self.endpoint.database or ""

    def reflect(self, table: str) -> TableSchema:
        schema, name = split_table(table, self.database())
        with self.connect() as connection, connection.cursor() as cursor:
            cursor.execute(
                "SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, CHARACTER_SET_NAME"
                " FROM information_schema.COLUMNS"
                " WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
                (schema, name),
            )
            rows = cursor.fetchall()
            # MariaDB appends a system-versioned table's row end to its primary key.
            key = without_period_end(
                _primary_key(cursor, schema, name), system_period(cursor, schema, name)
            )
            json_columns = self._json_columns(cursor, schema, name)
        if not rows:
            raise missing_table(table, f"database {schema}")
        columns = tuple(
            SourceColumn(
                column,
                column_type,
                logical_type(column_type, column in json_columns),
                nullable == "YES",
                charset,
            )
            for column, column_type, nullable, charset in rows
        )
        return TableSchema(table, columns, key)

    @staticmethod
    def _json_columns(cursor: Any, schema: str, table: str) -> set[str]:
        """MariaDB's JSON is LONGTEXT checked by json_valid(column)."""
        cursor.execute(
            "SELECT CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS"
            " WHERE CONSTRAINT_SCHEMA = %s AND TABLE_NAME = %s",
            (schema, table),
        )
        found = set()
        for (clause,) in cursor.fetchall():
            text = str(clause)
            if text.startswith("json_valid(`") and text.endswith("`)"):
                found.add(text[len("json_valid(`") : -2].replace("``", "`"))
        return found

    def key_range(self, table: str, column: str) -> tuple[int, int] | None:
        schema, name = split_table(table, self.database())
        with self.connect() as connection, connection.cursor() as cursor:
            cursor.execute(
                f"SELECT MIN({quote(column)}), MAX({quote(column)})"
                f" FROM {quote(schema)}.{quote(name)}"
            )
            row = cursor.fetchone()
        if row is None or row[0] is None:
            return None
        return int(row[0]), int(row[1])

    def arrow_type(self, table: TableSchema, name: str) -> pa.DataType:
        import pyarrow as pa

        column = table.column(name)
        if is_wide_integer(column.native_type):
            return pa.decimal128(20, 0)
        ltype = column.ltype
        if isinstance(ltype, lt.DecimalType) and (ltype.precision or 0) > MAX_LAKE_DIGITS:
            raise TerminalError(
                f"column {name} is {column.native_type}: more than {MAX_LAKE_DIGITS}"
                " digits do not fit Spark's decimals; exclude it or cast it in a view"
            )
        return super().arrow_type(table, name)

    def read_partition(
        self,
        table: TableSchema,
        columns: Sequence[str],
        partition: Partition,
        snapshot: Snapshot | None = None,
    ) -> Iterator[pa.RecordBatch]:
        with self.connect() as connection:
            position = self.begin_snapshot(connection)
            yield from self.read_in(connection, table, columns, partition, position)
            connection.commit()

    def read_in(
        self,
        connection: Any,
        table: TableSchema,
        columns: Sequence[str],
        partition: Partition,
        position: int | None,
    ) -> Iterator[pa.RecordBatch]:
        """Rows of one partition read on ``connection``, in whatever transaction it has."""
        import pymysql.cursors

        schema = self.arrow_schema(table, columns)
        sql, params = self.select_sql(table, columns, partition)
        with connection.cursor(pymysql.cursors.SSCursor) as cursor:
            cursor.execute(sql, params)
            while rows := cursor.fetchmany(BATCH_ROWS):
                yield self.to_batch(rows, table, columns, schema, position)

    def log_position(self) -> int | None:
        """The binlog's end; None when the binlog is off (``snapshot_position.binlog_end``:
        no privilege on MariaDB, ``REPLICATION CLIENT`` on MySQL)."""
        connection = self.connect()
        try:
            with connection.cursor() as cursor:
                end = binlog_end(cursor, self.server_flavour(connection), mask_url(self.url))
        finally:
            connection.close()
        return None if end is None else end.to_position(self._epoch).value

    def server_identity(self) -> str:
        """The server whose binlog positions these are: MySQL's ``server_uuid``; MariaDB's
        ``server_id``, distinct within a replication topology."""
        with self.connect() as connection, connection.cursor() as cursor:
            flavour = self.server_flavour(connection)
            name = "server_uuid" if flavour.is_mysql else "server_id"
            cursor.execute(f"SELECT @@{name}")
            (value,) = cursor.fetchone()
        return f"{flavour.product} {name} {value}"

    def follow_lake(self, sources: Callable[[], Sequence[tuple[str | None, int]]]) -> None:
        """Number positions as the lake's pipelines do: after a failover they followed, a
        MySQL server's positions are of a later epoch (``failover.py``). A lake table fed from
        another server's log is refused: its positions mean nothing here.

        Raises:
            FailoverError: The table's pipeline reads another server's log.
        """
        if not self.flavour().is_mysql:
            return  # MariaDB's pipelines follow no failover: their positions are epoch 0's
        written = sources()
        recorded = {source for source, _ in written if source is not None}
        if not recorded:
            return  # written before sources were recorded, or by no pipeline
        found = self.server_identity()
        if found not in recorded:
            raise FailoverError.lake_of_another(mask_url(self.url), found, sorted(recorded))
        self._epoch = max(epoch_of(value) for source, value in written if source == found)

    def describe_position(self, value: int) -> str:
        """``mariadb-bin.000003:4567``: the binlog's base name is read once per connector."""
        if self._basename is None:  # read once: the connector lives for one command
            self._basename = self._binlog_basename()
        return describe_position(value, self._basename)

    def _binlog_basename(self) -> str:
        """The binlog files' base name, from status or variables any user may read."""
        connection = self.connect()
        try:
            with connection.cursor() as cursor:
                return binlog_basename(cursor, self.server_flavour(connection))
        finally:
            connection.close()

    def flavour(self) -> ServerFlavour:
        """The server's product and version (asked once per connector, see
        ``server_flavour``)."""
        if self._flavour is None:
            with self.connect() as connection:
                return self.server_flavour(connection)
        return self._flavour

    def server_flavour(self, connection: Any) -> ServerFlavour:
        """The server's product and version, asked on ``connection`` once per connector.

        Raises:
            UnsupportedServerError: A product or version replcheck is not built for.
        """
        if self._flavour is None:
            with connection.cursor() as cursor:
                self._flavour = detect_flavour(cursor, mask_url(self.url))
        return self._flavour

    def begin_snapshot(self, connection: Any) -> int | None:
        """Open a consistent snapshot on ``connection``; the binlog position it sees."""
        found = self.snapshot_at(connection)
        return None if found is None else found.to_position(self._epoch).value

    def snapshot_at(self, connection: Any, for_capture: bool = False) -> SnapshotPosition | None:
        """Open a consistent snapshot on ``connection``; where it stands in the binlog (None:
        no binlog), the same way on every path (``snapshot_position.begin_snapshot``;
        ``for_capture``: a pipeline's, which streams the log from there)."""
        flavour = self.server_flavour(connection)
        with connection.cursor() as cursor:
            return begin_snapshot(cursor, flavour, mask_url(self.url), for_capture)

    def select_sql(
        self, table: TableSchema, columns: Sequence[str], partition: Partition
    ) -> tuple[str, list[int]]:
        schema, name = split_table(table.table, self.database())
        select = ", ".join(self.select_expression(table.column(c)) for c in columns)
        sql = f"SELECT {select} FROM {quote(schema)}.{quote(name)}"
        where, params = partition.predicate(
            quote, "%s", lambda column, value: key_parameter(table.column(column).ltype, value)
        )
        return sql + where, params

    @staticmethod
    def select_expression(column: SourceColumn) -> str:
        quoted = quote(column.name)
        native = column.native_type.lower()
        if native.startswith("bit"):
            return f"CAST({quoted} AS UNSIGNED) AS {quoted}"  # pymysql returns BIT as bytes
        if native.startswith("float"):
            # The text protocol prints FLOAT with 6 significant digits (3.40282e38 for the
            # largest single); widening to DOUBLE is exact and Arrow narrows it back.
            return f"CAST({quoted} AS DOUBLE) AS {quoted}"
        return quoted

    @staticmethod
    def to_batch(
        rows: Sequence[tuple[Any, ...]],
        table: TableSchema,
        columns: Sequence[str],
        schema: pa.Schema,
        position: int | None,
    ) -> pa.RecordBatch:
        import pyarrow as pa

        arrays = []
        for index, name in enumerate(columns):
            ltype = table.column(name).ltype
            convert = _converter(ltype, schema.field(name).type)
            values = [None if row[index] is None else convert(row[index]) for row in rows]
            if isinstance(ltype, REFUSABLE_TYPES) and NOT_A_DATE in values:
                raise _refused(table, columns, name, rows[values.index(NOT_A_DATE)])
            arrays.append(pa.array(values, schema.field(name).type))
        arrays.append(pa.array([position] * len(rows), pa.int64()))
        return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _refused(
    table: TableSchema, columns: Sequence[str], column: str, row: Sequence[Any]
) -> UnrepresentableDateError:
    """The error for ``column`` of ``row``, naming the row by its primary key."""
    key = [name for name in table.primary_key if name in columns]
    shown = key_text(key, [row[columns.index(name)] for name in key])
    return UnrepresentableDateError.of(table.table, column, shown)


def _converter(ltype: lt.LogicalType | None, arrow_type: pa.DataType) -> Any:
    """How one driver value becomes the Python value its Arrow type takes."""
    import pyarrow.types as pat

    if pat.is_decimal(arrow_type):
        return decimal.Decimal  # BIGINT UNSIGNED arrives as int; Arrow wants a Decimal
    if isinstance(ltype, lt.TimeType):
        return lambda value: value // _ONE_MICRO  # TIME arrives as a timedelta
    if isinstance(ltype, lt.DateType | lt.TimestampType):
        return lambda value: from_text(value) if isinstance(value, str) else value
    if isinstance(ltype, lt.TimestampTzType):
        return _instant
    if isinstance(ltype, lt.BooleanType):
        return bool
    if isinstance(ltype, lt.StringType | lt.JsonType | lt.UuidType):
        return lambda value: value if isinstance(value, str) else str(value)
    return lambda value: value


def _instant(value: dt.datetime | str) -> object:
    """A TIMESTAMP read in the session's UTC, or what its text reads as (``zero_dates``)."""
    return from_text(value) if isinstance(value, str) else value.replace(tzinfo=dt.UTC)


def check_parameters(query: Mapping[str, object], url: str) -> None:
    """Refuse URL parameters neither the validator's reader nor the log source takes.

    Raises:
        ConfigError: Names the parameter and the ones MariaDB URLs take.
    """
    for name in query:
        if not is_log_parameter(name) and name not in TLS_PARAMETERS:
            raise ConfigError(
                f"MariaDB URL parameter {name!r} is unknown (in {mask_url(url)}); MariaDB"
                f" URLs take only the pipeline's {list(LOG_PARAMETERS)} and the TLS"
                f" parameters {list(TLS_PARAMETERS)}",
                {"parameter": name},
            )


@functools.cache
def _connection_class() -> Any:
    """pymysql's connection, with the TLS context of its PREFERRED mode (no CA given, so
    nothing verified) built once per process: pymysql 1.2 builds it per connection, loading
    the system's CA store each time, which cost 40-160 ms a connection here."""
    import pymysql.connections

    preferred: list[Any] = []

    class Connection(pymysql.connections.Connection):
        def _create_ssl_ctx(self, sslp: Any) -> Any:
            if sslp != {}:  # TLS options given: pymysql's own context, every time
                return super()._create_ssl_ctx(sslp)
            if not preferred:
                preferred.append(super()._create_ssl_ctx(sslp))
            return preferred[0]

    return Connection


def _primary_key(cursor: Any, schema: str, table: str) -> tuple[str, ...]:
    """The table's primary key as the server uses it: its PRIMARY KEY, else the first
    UNIQUE key of NOT NULL columns, which the server promotes to primary key (it then writes
    that key as the table's primary key in the binlog's table maps, and
    ``information_schema.COLUMNS`` marks its columns ``PRI``:
    https://mariadb.com/kb/en/information-schema-columns-table/). The snapshot and the log
    must locate rows by the same key (a table with only a unique key: catalog vocabulary,
    mariadb-full seed 30)."""
    cursor.execute(  # no ORDER BY: the server lists the keys in its own order
        "SELECT INDEX_NAME, SEQ_IN_INDEX, COLUMN_NAME FROM information_schema.STATISTICS"
        " WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND NON_UNIQUE = 0",
        (schema, table),
    )
    parts: dict[str, dict[int, str]] = {}
    for index, seq, column in cursor.fetchall():
        parts.setdefault(index, {})[int(seq)] = column
    indexes = {index: [found[seq] for seq in sorted(found)] for index, found in parts.items()}
    if "PRIMARY" in indexes:
        return tuple(indexes["PRIMARY"])
    cursor.execute(
        "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s"
        " AND TABLE_NAME = %s AND COLUMN_KEY = 'PRI' ORDER BY ORDINAL_POSITION",
        (schema, table),
    )
    promoted = [row[0] for row in cursor.fetchall()]
    # The promoted key's column order is its index's.
    same = [columns for columns in indexes.values() if set(columns) == set(promoted)]
    return tuple(same[0] if same else promoted)
