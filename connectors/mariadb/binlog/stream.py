"""The binlog connection: server checks, mysql-replication's stream, and its errors.

Everything that talks to the server for the log reader is here, so the reader itself only
sees events. Server errors become replcheck errors that name the fix:

- 1236 (``ER_MASTER_FATAL_ERROR_READING_BINLOG``: the file or position is not there any more,
  https://mariadb.com/kb/en/mariadb-error-code-reference/) -> ``BinlogPurgedError``;
- 1227 / 1044 / 1045 (access denied) -> ``ReplicationPrivilegeError``;
- a connection the server closed or does not answer (``CONNECTION_LOST_CODES``) ->
  ``BinlogConnectionLostError``.

The server's product and version are asked first (``flavour``): a server replcheck is not
built for is refused before anything else is read, and MySQL's settings and statements
differ where MariaDB's do not exist (``SHOW BINARY LOG STATUS`` replaced ``SHOW MASTER
STATUS`` in MySQL 8.4, https://dev.mysql.com/doc/refman/8.4/en/show-binary-log-status.html).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cdc_core.config import mask_url
from cdc_core.drivers import driver_import
from cdc_core.errors import ConfigError
from connectors.mariadb.binlog.compressed import TRANSACTION_PAYLOAD, unpacked
from connectors.mariadb.errors import (
    CONNECTION_LOST_CODES,
    BinlogConnectionLostError,
    BinlogPurgedError,
    BinlogSetupError,
    ReplicationPrivilegeError,
)
from connectors.mariadb.flavour import ServerFlavour, detect_flavour
from connectors.mariadb.tls import TlsSettings, tls_refusal

if TYPE_CHECKING:
    from connectors.mariadb.source_config import MariaDBSourceConfig

ER_DBACCESS_DENIED, ER_ACCESS_DENIED, ER_SPECIFIC_ACCESS_DENIED = 1044, 1045, 1227
ER_MASTER_FATAL_ERROR_READING_BINLOG = 1236
_ACCESS_DENIED = (ER_DBACCESS_DENIED, ER_ACCESS_DENIED, ER_SPECIFIC_ACCESS_DENIED)


@dataclass(frozen=True, slots=True)
class StreamSettings:
    """How to reach the server, as the binlog connections need it."""

    host: str
    port: int
    user: str
    password: str | None
    database: str
    server_id: int
    heartbeat_s: float
    display: str  # the URL without its password, for messages
    tls: TlsSettings = field(default_factory=TlsSettings)

    @classmethod
    def from_config(cls, config: MariaDBSourceConfig, password: str | None) -> StreamSettings:
        """Settings of a source's URL (``mysql+pymysql://user@host:port/database``)."""
        parsed = config.endpoint
        return cls(
            host=parsed.host or "127.0.0.1",
            port=parsed.port or 3306,
            user=parsed.username or "",
            password=password if password is not None else parsed.password,
            database=parsed.database or "",
            server_id=config.server_id,
            heartbeat_s=config.heartbeat_s,
            display=mask_url(config.url),
            tls=TlsSettings.from_query(parsed.query, config.url),
        )

    def connection(self) -> dict[str, Any]:
        """pymysql connection arguments (the password stays out of every message)."""
        # A dead connection must be noticed: heartbeats arrive every heartbeat_s.
        read_timeout = max(30, int(4 * self.heartbeat_s))
        return {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "password": self.password or "",
            "connect_timeout": 10,
            "read_timeout": read_timeout,
            **self.tls.pymysql_arguments(),
        }


@dataclass(frozen=True, slots=True)
class ServerFacts:
    """The server's binlog settings and end, read before streaming.

    Args:
        flavour: The server's product and version.
        log_bin: Whether it writes a binlog.
        binlog_format: ``ROW``, ``STATEMENT`` or ``MIXED``.
        row_metadata: ``binlog_row_metadata``.
        log_file: The binlog file written now ("" when the binlog is off).
        offset: Its end.
        row_value_options: MySQL's ``binlog_row_value_options`` ("" on MariaDB).
        gtid_mode: MySQL's ``gtid_mode`` ("" on MariaDB).
    """

    flavour: ServerFlavour
    log_bin: bool
    binlog_format: str
    row_metadata: str
    log_file: str
    offset: int
    row_value_options: str = ""
    gtid_mode: str = ""

    @property
    def tracks_gtids(self) -> bool:
        """Whether every transaction has a GTID the reader keeps for a failover (MySQL
        with ``gtid_mode=ON``, ``connectors/mariadb/failover.py``)."""
        return self.flavour.is_mysql and self.gtid_mode.upper() == "ON"

    @property
    def basename(self) -> str:
        """The binlog files' base name (``mariadb-bin`` of ``mariadb-bin.000003``)."""
        return self.log_file.rpartition(".")[0]

    def check(self, source: str) -> None:
        """Raise ``BinlogSetupError`` unless the binlog carries named row images."""
        if not self.log_bin or not self.log_file:
            raise BinlogSetupError.binlog_off(source)
        if self.binlog_format.upper() != "ROW":
            raise BinlogSetupError.not_row_format(source, self.binlog_format)
        if self.row_metadata.upper() != "FULL":
            raise BinlogSetupError.metadata_not_full(source, self.row_metadata)
        # MySQL only (https://dev.mysql.com/doc/refman/8.0/en/replication-options-binary-log.html):
        # partial JSON updates hide rows in events the reader cannot decode yet (compressed
        # transactions it decodes: ``compressed``).
        if "PARTIAL_JSON" in self.row_value_options.upper():
            raise BinlogSetupError.partial_json(source, self.row_value_options)


def server_facts(settings: StreamSettings) -> ServerFacts:
    """Read the server's flavour, its binlog settings and its binlog's end.

    Raises:
        UnsupportedServerError: A product or version replcheck is not built for.
        ReplicationPrivilegeError: The user may not see the binlog status.
        TransientError: The server cannot be reached.
    """
    with driver_import("the MariaDB binlog reader"):
        import pymysql

    try:
        connection = pymysql.connect(**settings.connection())
    except pymysql.err.OperationalError as exc:
        raise _translate(exc, settings, "") from exc
    with contextlib.closing(connection), connection.cursor() as cursor:
        flavour = detect_flavour(cursor, settings.display)
        cursor.execute(
            "SELECT @@global.log_bin, @@global.binlog_format, @@global.binlog_row_metadata"
        )
        log_bin, binlog_format, row_metadata = cursor.fetchone()
        mysql = _mysql_settings(cursor) if flavour.is_mysql else {}
        try:
            cursor.execute(flavour.binlog_status_statement)
        except pymysql.err.MySQLError as exc:
            raise _translate(exc, settings, "") from exc
        status = cursor.fetchone()
    log_file, offset = (str(status[0]), int(status[1])) if status else ("", 0)
    return ServerFacts(
        flavour,
        bool(log_bin),
        str(binlog_format),
        str(row_metadata),
        log_file,
        offset,
        row_value_options=mysql.get("binlog_row_value_options", ""),
        gtid_mode=mysql.get("gtid_mode", ""),
    )


def _mysql_settings(cursor: Any) -> dict[str, str]:
    """MySQL's settings that hide rows from the reader (``SHOW``, which leaves out what a
    version does not have, not ``@@``)."""
    cursor.execute(
        "SHOW GLOBAL VARIABLES WHERE Variable_name IN ('binlog_row_value_options', 'gtid_mode')"
    )
    return {str(name).lower(): str(value) for name, value in cursor.fetchall()}


def _translate(exc: Exception, settings: StreamSettings, position: str) -> Exception:
    """The replcheck error of a server error (or the error itself when it is none of ours)."""
    code = exc.args[0] if exc.args else None
    detail = str(exc.args[-1]) if exc.args else str(exc)
    refused = tls_refusal(exc, settings.tls)
    if refused is not None:
        return ConfigError(f"cannot connect to {settings.display}: {refused}")
    if code in _ACCESS_DENIED:
        return ReplicationPrivilegeError.missing(settings.display, settings.user, detail)
    if code == ER_MASTER_FATAL_ERROR_READING_BINLOG:
        return BinlogPurgedError.at(settings.display, position, detail)
    if code in CONNECTION_LOST_CODES:
        return BinlogConnectionLostError.after(settings.display, position, detail)
    return exc


def _event_classes() -> list[type]:
    from pymysqlreplication import event, row_event

    return [
        event.MariadbGtidEvent,
        event.GtidEvent,
        event.PreviousGtidsEvent,
        # MySQL's ANONYMOUS_GTID and TRANSACTION_PAYLOAD events (``compressed`` parses what
        # the latter holds) and MariaDB's compressed
        # events: mysql-replication does not parse them; the reader tells them apart.
        event.NotImplementedEvent,
        event.QueryEvent,
        event.XidEvent,
        event.XAPrepareEvent,
        event.RotateEvent,
        event.FormatDescriptionEvent,
        event.HeartbeatLogEvent,
        event.StopEvent,
        event.MariadbGtidListEvent,
        event.MariadbBinLogCheckPointEvent,
        row_event.TableMapEvent,
        row_event.WriteRowsEvent,
        row_event.UpdateRowsEvent,
        row_event.DeleteRowsEvent,
        row_event.PartialUpdateRowsEvent,
    ]


class BinlogStream:
    """mysql-replication's ``BinLogStreamReader``, opened at a file and offset (or, after a
    failover, at the first transaction a GTID set lacks)."""

    def __init__(self, settings: StreamSettings, schemas: Sequence[str]) -> None:
        self.settings = settings
        self.schemas = list(schemas)
        self._reader: Any = None

    def events(
        self, log_file: str, offset: int, reached: Callable[[], str], gtid_set: str | None = None
    ) -> Iterator[Any]:
        """Events from ``log_file:offset`` on, forever (blocking, with heartbeats).

        Args:
            log_file: The binlog file to start in.
            offset: The offset in it.
            reached: The position the reader has read up to, for messages.
            gtid_set: MySQL: instead of the file and offset, every transaction this set
                lacks (``COM_BINLOG_DUMP_GTID``), from the file the server picks.

        Raises:
            BinlogPurgedError: The server no longer has the binlog at the start.
            ReplicationPrivilegeError: The user lacks REPLICATION SLAVE.
            BinlogConnectionLostError: The connection was closed (the server shut down).
        """
        with driver_import("the MariaDB binlog reader"):
            import pymysql
            from pymysqlreplication import BinLogStreamReader

        self.close()
        self._reader = BinLogStreamReader(
            connection_settings=self.settings.connection(),
            server_id=self.settings.server_id,
            # Not is_mariadb=True: with it, log_file/log_pos are ignored (GTID auto-position).
            is_mariadb=False,
            log_file=None if gtid_set is not None else log_file,
            log_pos=None if gtid_set is not None else offset,
            auto_position=gtid_set,
            resume_stream=True,
            blocking=True,
            slave_heartbeat=self.settings.heartbeat_s,
            only_events=_event_classes(),
            filter_non_implemented_events=False,
            only_schemas=self.schemas,
            enable_logging=False,
        )
        try:
            while True:
                event = self._reader.fetchone()
                if event is None:  # the server ended the dump (it was shut down)
                    detail = "the server ended the dump: it was shut down or restarted"
                    raise BinlogConnectionLostError.after(self.settings.display, reached(), detail)
                if getattr(event, "event_type", None) == TRANSACTION_PAYLOAD:
                    yield from unpacked(self._reader, event)
                else:
                    yield event
        except pymysql.err.MySQLError as exc:
            raise _translate(exc, self.settings, reached()) from exc

    def close(self) -> None:
        """Close the connections (idempotent)."""
        if self._reader is not None:
            self._reader.close()
            self._reader = None
