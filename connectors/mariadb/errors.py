"""What can go wrong reading a MariaDB/MySQL binlog, each error naming the fix.

Server settings: https://mariadb.com/kb/en/replication-and-binary-log-system-variables/ ;
privileges: https://mariadb.com/kb/en/grant/#global-privileges .
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

from cdc_core.drivers import driver_import
from cdc_core.errors import ConfigError, TerminalError, TransientError

# A connection the server closed or does not answer: client errors 2003 CR_CONN_HOST_ERROR,
# 2006 CR_SERVER_GONE_ERROR, 2013 CR_SERVER_LOST; server errors 1053 ER_SERVER_SHUTDOWN,
# 1927 ER_CONNECTION_KILLED (https://mariadb.com/kb/en/mariadb-error-code-reference/).
CONNECTION_LOST_CODES = (2003, 2006, 2013, 1053, 1927)
# The issue tracking MySQL as a source; refusals of what is not built yet name it.
MYSQL_ISSUE = "replcheck issue 40 (MySQL 8 as a source)"


@contextlib.contextmanager
def lost_connections(source: str) -> Iterator[None]:
    """A connection the server closed under a query (shut down, restarted, cut) as a
    ``TransientError`` naming ``source``; other errors pass unchanged."""
    with driver_import("the MariaDB connector"):
        import pymysql

    try:
        yield
    except pymysql.err.OperationalError as exc:
        if not exc.args or exc.args[0] not in CONNECTION_LOST_CODES:
            raise
        detail = str(exc.args[-1])
        raise TransientError(
            f"lost the connection to {source} ({detail})", {"source": source}
        ) from exc


class BinlogSetupError(ConfigError):
    """The server does not write a binlog replcheck can read (off, not ROW, no metadata)."""

    @classmethod
    def binlog_off(cls, source: str) -> BinlogSetupError:
        """The server runs without ``log_bin``."""
        return cls(
            "the server does not write a binary log, so changes cannot be captured; start"
            " it with log_bin (e.g. --log-bin=mariadb-bin), binlog_format=ROW and"
            " binlog_row_metadata=FULL",
            {"source": source, "setting": "log_bin"},
        )

    @classmethod
    def not_row_format(cls, source: str, value: str) -> BinlogSetupError:
        """``binlog_format`` is STATEMENT or MIXED."""
        return cls(
            f"binlog_format is {value}, but replcheck reads row images; run SET GLOBAL"
            " binlog_format = 'ROW' and set binlog_format=ROW in the server's configuration",
            {"source": source, "setting": "binlog_format", "value": value},
        )

    @classmethod
    def metadata_not_full(cls, source: str, value: str) -> BinlogSetupError:
        """``binlog_row_metadata`` is not FULL."""
        return cls(
            f"binlog_row_metadata is {value}: row events then carry no column names, so"
            " columns cannot be told apart after an ALTER TABLE; run SET GLOBAL"
            " binlog_row_metadata = 'FULL' and set binlog_row_metadata=FULL in the server's"
            " configuration",
            {"source": source, "setting": "binlog_row_metadata", "value": value},
        )

    @classmethod
    def partial_json(cls, source: str, value: str) -> BinlogSetupError:
        """MySQL logs partial JSON updates (``PARTIAL_UPDATE_ROWS_EVENT``), not read yet."""
        return cls(
            f"binlog_row_value_options is {value}: MySQL then logs JSON updates as diffs"
            f" that replcheck cannot apply yet ({MYSQL_ISSUE}); run SET GLOBAL"
            " binlog_row_value_options = '' and set it in the server's configuration",
            {"source": source, "setting": "binlog_row_value_options", "value": value},
        )


class BinlogMetadataError(BinlogSetupError):
    """A table map in the log has no column names (written without FULL row metadata)."""

    @classmethod
    def for_table(cls, table: str) -> BinlogMetadataError:
        """Rows of ``table`` were logged while ``binlog_row_metadata`` was not FULL."""
        return cls(
            f"the binlog has rows of table {table} without column names (they would read as"
            " UNKNOWN_COLn): they were written while binlog_row_metadata was not FULL. Set"
            " binlog_row_metadata=FULL on the server, then take a new snapshot and stream"
            " from its position",
            {"table": table, "setting": "binlog_row_metadata"},
        )


class ReplicationPrivilegeError(TerminalError):
    """The user may not read the binlog."""

    @classmethod
    def missing(cls, source: str, user: str, detail: str) -> ReplicationPrivilegeError:
        """``user`` lacks REPLICATION SLAVE / REPLICATION CLIENT (BINLOG MONITOR)."""
        return cls(
            f"user {user!r} may not read the binary log ({detail}); run GRANT REPLICATION"
            f" SLAVE, REPLICATION CLIENT ON *.* TO '{user}'@'%' (REPLICATION CLIENT is called"
            " BINLOG MONITOR since MariaDB 10.5)",
            {"source": source, "user": user},
        )


class BinlogPurgedError(TerminalError):
    """The binlog at the position to resume from is gone (server error 1236)."""

    @classmethod
    def at(cls, source: str, position: str, detail: str) -> BinlogPurgedError:
        """The server cannot send the log from ``position``."""
        return cls(
            f"the binary log at {position} is no longer on the server ({detail}); the"
            " changes since then are lost to replication: take a new snapshot of the tables"
            " and stream from its position (and keep binlogs longer: binlog_expire_logs_seconds)",
            {"source": source, "position": position},
        )


class BinlogConnectionLostError(TransientError):
    """The binlog connection was closed or the server cannot be reached (it was shut down
    or restarted, or the network cut): the binlog stays on the server, so a pipeline
    started again resumes from its checkpoint."""

    @classmethod
    def after(cls, source: str, position: str, detail: str) -> BinlogConnectionLostError:
        """The connection was lost once the stream had read up to ``position`` ("": before
        it started)."""
        if not position:
            return cls(f"cannot reach server {source} ({detail})", {"source": source})
        return cls(
            f"the binlog connection to server {source} was lost ({detail}); the stream had"
            f" read the binlog up to {position}",
            {"source": source, "position": position},
        )


class KeyConfigError(ConfigError):
    """A configured row key does not fit the table."""

    @classmethod
    def conflicts(
        cls, table: str, configured: Sequence[str], primary: Sequence[str]
    ) -> KeyConfigError:
        """A key is configured for a table that has a different primary key."""
        return cls(
            f"table {table} has the primary key {list(primary)}, but the key"
            f" {list(configured)} is configured for it; the binlog locates rows by the primary"
            " key, so remove the configured key",
            {"table": table},
        )

    @classmethod
    def missing(
        cls, table: str, configured: Sequence[str], missing: Sequence[str]
    ) -> KeyConfigError:
        """A configured key names columns the table does not have."""
        return cls(
            f"the key {list(configured)} configured for table {table} names columns"
            f" {list(missing)} the table does not have; fix the configured key",
            {"table": table},
        )


class UnsupportedServerError(ConfigError):
    """The URL reaches a server product or version replcheck is not built for
    (``connectors/mariadb/flavour.py``): refused before anything is read."""

    @classmethod
    def product(
        cls, source: str, product: str, named: str, accepted: str
    ) -> UnsupportedServerError:
        """Another product speaking the MySQL protocol."""
        return cls(
            f"the server at {source} is {product} (VERSION() {named}); replcheck reads only"
            f" {accepted}: point the URL at one of those",
            {"source": source, "server": named},
        )

    @classmethod
    def version(cls, source: str, series: str, named: str, accepted: str) -> UnsupportedServerError:
        """A MariaDB or MySQL version outside the supported series."""
        return cls(
            f"the server at {source} is {series} (VERSION() {named}), which replcheck is not"
            f" built for; it reads only {accepted}",
            {"source": source, "server": named},
        )


class UntrackedChangeError(TerminalError):
    """A change of a captured table arrived with no open transaction the reader knows:
    emitting it would invent a transaction, and skipping it would lose it without a trace."""

    @classmethod
    def at(cls, source: str, what: str, table: str, position: str) -> UntrackedChangeError:
        """``what`` (a rows event, a TRUNCATE) of ``table`` at ``position``."""
        return cls(
            f"the binlog has {what} of captured table {table} at {position} that belongs to"
            " no transaction the reader saw begin (no GTID event opened one before it), so"
            " it cannot be placed and is not skipped; report it as a replcheck bug with the"
            f" output of mysqlbinlog -vv around {position}, and take a new snapshot of the"
            " table to go on",
            {"source": source, "table": table, "position": position},
        )


class UnreadableEventError(TerminalError):
    """The binlog holds an event whose changes replcheck cannot read yet (compressed
    transactions in another compression, partial JSON updates): refused at its position,
    never skipped."""

    @classmethod
    def at(cls, source: str, what: str, position: str, fix: str) -> UnreadableEventError:
        """``what`` at ``position``, and the server setting that avoids it."""
        return cls(
            f"the binlog has {what} at {position}, which replcheck cannot read yet"
            f" ({MYSQL_ISSUE}); {fix}, then take a new snapshot and stream from its position",
            {"source": source, "position": position},
        )


class SnapshotLockError(TransientError):
    """MySQL: the brief global read lock that places a snapshot in the binlog was not
    granted in time (``snapshot_position``); a later attempt may get it."""

    @classmethod
    def timed_out(cls, source: str, wait_s: int) -> SnapshotLockError:
        """``FLUSH TABLES WITH READ LOCK`` waited ``wait_s`` seconds in vain."""
        return cls(
            f"the server at {source} did not grant the brief global read lock (FLUSH TABLES"
            f" WITH READ LOCK) that places a MySQL snapshot in the binlog within {wait_s} s:"
            " a long-running query or an open LOCK TABLES holds it off; try again when it has"
            " finished (SHOW PROCESSLIST shows it)",
            {"source": source, "wait_s": str(wait_s)},
        )


class PreparedXaError(TransientError):
    """MySQL: an XA transaction is prepared while a pipeline takes its snapshot
    (``snapshot_position``): its changes would be in neither the snapshot nor the log."""

    @classmethod
    def prepared(cls, source: str, xids: list[str]) -> PreparedXaError:
        shown = ", ".join(xids[:5]) + (f" and {len(xids) - 5} more" if len(xids) > 5 else "")
        return cls(
            f"the MySQL server at {source} has {len(xids)} prepared XA transaction(s) ({shown}):"
            " a snapshot taken now would hold none of their changes, and the binlog after it"
            " only their outcome; let their coordinator commit or roll them back (XA RECOVER"
            " lists them; XA COMMIT or XA ROLLBACK with the XID ends one), then run again",
            {"source": source, "prepared": str(len(xids))},
        )


class SnapshotPrivilegeError(ConfigError):
    """MySQL: the user may not take the snapshot's position (``snapshot_position``)."""

    @classmethod
    def denied(cls, source: str, detail: str) -> SnapshotPrivilegeError:
        """``FLUSH TABLES WITH READ LOCK`` or the binlog status statement was refused."""
        return cls(
            f"the server at {source} refused what places a MySQL snapshot in the binlog"
            f" ({detail}): it needs FLUSH TABLES WITH READ LOCK and SHOW BINARY LOG STATUS"
            " (SHOW MASTER STATUS before 8.4), and XA RECOVER for a pipeline; run GRANT RELOAD,"
            " REPLICATION CLIENT ON *.* TO the validator's user, and GRANT RELOAD, REPLICATION"
            " CLIENT, XA_RECOVER_ADMIN ON *.* TO the pipeline's",
            {"source": source},
        )
