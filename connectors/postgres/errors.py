"""What can go wrong reading PostgreSQL's logical replication stream, each error naming the fix.

Settings: https://www.postgresql.org/docs/current/logical-replication-config.html ;
slots: https://www.postgresql.org/docs/current/logicaldecoding-explanation.html ;
publications: https://www.postgresql.org/docs/current/sql-createpublication.html .
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from cdc_core.drivers import driver_import
from cdc_core.errors import ConfigError, TerminalError, TransientError

# SQLSTATEs of a server ending a session: class 08 (connection exception), 57P01
# admin_shutdown, 57P02 crash_shutdown, 57P03 cannot_connect_now
# (https://www.postgresql.org/docs/current/errcodes-appendix.html).
_CLOSING_STATES = ("57P01", "57P02", "57P03")


def ends_session(sqlstate: str | None) -> bool:
    """Whether an error of ``sqlstate`` means that the server ended the session (None: it
    sent no error at all: the connection was closed under the client, or cut)."""
    return sqlstate is None or sqlstate.startswith("08") or sqlstate in _CLOSING_STATES


@contextlib.contextmanager
def lost_connections(source: str) -> Iterator[None]:
    """A connection of either driver that the server closed under a query (shut down,
    restarted, cut) as a ``TransientError`` naming ``source``; other errors pass unchanged."""
    with driver_import("the Postgres connector"):
        import psycopg
        import psycopg2

    try:
        yield
    except psycopg.OperationalError as exc:
        if not ends_session(exc.sqlstate):
            raise
        raise _lost(source, exc) from exc
    except psycopg2.OperationalError as exc:
        if not ends_session(exc.pgcode):
            raise
        raise _lost(source, exc) from exc


def _lost(source: str, exc: Exception) -> TransientError:
    lines = str(exc).strip().splitlines()
    detail = lines[0] if lines else type(exc).__name__
    return TransientError(f"lost the connection to {source} ({detail})", {"source": source})


@dataclass(frozen=True, slots=True)
class ValueContext:
    """Where values come from, for errors (never the values themselves)."""

    table: str
    column: str

    def error(self, problem: str, fix: str) -> TerminalError:
        """A TerminalError about a value of this column: the problem, then the fix."""
        message = f"column {self.column!r} of {self.table}: {problem}; {fix}"
        return TerminalError(message, {"table": self.table, "column": self.column})


class LogicalDecodingSetupError(ConfigError):
    """The server cannot decode its WAL logically (``wal_level`` below ``logical``)."""

    @classmethod
    def wal_level(cls, source: str, value: str) -> LogicalDecodingSetupError:
        """``wal_level`` is ``replica`` or ``minimal``."""
        return cls(
            f"wal_level is {value}, but reading changes needs logical decoding; set"
            " wal_level = logical in postgresql.conf (ALTER SYSTEM SET wal_level = logical)"
            " and restart the server",
            {"source": source, "setting": "wal_level", "value": value},
        )


class SlotMissingError(ConfigError):
    """The configured replication slot does not exist and may not be created."""

    @classmethod
    def named(cls, source: str, slot: str) -> SlotMissingError:
        """Slot ``slot`` is not on the server."""
        return cls(
            f"replication slot {slot!r} does not exist; create it with SELECT"
            f" pg_create_logical_replication_slot('{slot}', 'pgoutput'), or let replcheck"
            " create it (create_slot=true) -- and take a new initial snapshot: the changes"
            " made while no slot held them are not in the log any more",
            {"source": source, "slot": slot},
        )


class SlotMismatchError(ConfigError):
    """The slot exists but cannot serve this source (other plugin, database or kind)."""

    @classmethod
    def of(cls, source: str, slot: str, problem: str) -> SlotMismatchError:
        """Slot ``slot`` has the wrong ``problem``."""
        return cls(
            f"replication slot {slot!r} {problem}; name another slot for this pipeline or drop"
            f" that one (SELECT pg_drop_replication_slot('{slot}'))",
            {"source": source, "slot": slot},
        )


class PublicationMissingError(ConfigError):
    """The configured publication does not exist or lacks captured tables."""

    @classmethod
    def named(cls, source: str, publication: str) -> PublicationMissingError:
        """Publication ``publication`` is not in the database."""
        return cls(
            f"publication {publication!r} does not exist; create it with CREATE PUBLICATION"
            f" {publication} FOR TABLE <the captured tables> WITH (publish_via_partition_root"
            " = true), or let replcheck create it (create_publication=true)",
            {"source": source, "publication": publication},
        )

    @classmethod
    def not_via_root(
        cls, source: str, publication: str, partitioned: Sequence[str]
    ) -> PublicationMissingError:
        """The publication sends changes of captured partitioned tables as their leaves'."""
        return cls(
            f"publication {publication!r} publishes the changes of the partitioned tables"
            f" {list(partitioned)} as changes of their partitions, so the captured root would"
            f" never follow; run ALTER PUBLICATION {publication} SET"
            " (publish_via_partition_root = true)",
            {"source": source, "publication": publication},
        )

    @classmethod
    def column_list(
        cls, source: str, publication: str, tables: Sequence[str]
    ) -> PublicationMissingError:
        """The publication sends only some columns of captured tables (a column list)."""
        return cls(
            f"publication {publication!r} publishes only some columns of the captured tables"
            f" {list(tables)} (a column list), so the others would never follow; publish every"
            f" column (ALTER PUBLICATION {publication} SET TABLE ... without a column list), or"
            " use another publication (the URL's publication parameter)",
            {"source": source, "publication": publication},
        )

    @classmethod
    def through_root(
        cls, source: str, publication: str, partitions: Mapping[str, str]
    ) -> PublicationMissingError:
        """Captured partitions are published as an ancestor the pipeline does not capture."""
        shown = ", ".join(f"{table} as {root}" for table, root in partitions.items())
        roots = ", ".join(dict.fromkeys(partitions.values()))
        return cls(
            f"publication {publication!r} publishes the captured partitions {shown}"
            " (publish_via_partition_root), so their changes would not reach their own tables;"
            f" capture {roots} instead of the partitions, or use a publication without"
            f" {roots} (the URL's publication parameter)",
            {"source": source, "publication": publication},
        )

    @classmethod
    def lacks(cls, source: str, publication: str, tables: Sequence[str]) -> PublicationMissingError:
        """The publication does not publish some captured tables."""
        return cls(
            f"publication {publication!r} does not publish the captured tables {list(tables)};"
            f" run ALTER PUBLICATION {publication} ADD TABLE {', '.join(tables)}",
            {"source": source, "publication": publication},
        )


class WalRemovedError(TerminalError):
    """The WAL the slot needs is gone (the slot was invalidated, or segments removed)."""

    @classmethod
    def at(cls, source: str, slot: str, detail: str) -> WalRemovedError:
        """The server cannot send the changes the slot still owes."""
        return cls(
            f"the WAL that replication slot {slot!r} needs has been removed ({detail}); the"
            " changes since the pipeline's last position are lost to replication: drop the"
            " slot, take a new initial snapshot of the tables and stream from its position"
            " (and keep more WAL for slots: max_slot_wal_keep_size)",
            {"source": source, "slot": slot},
        )


class ReplicationClosedError(TransientError):
    """The server closed the replication connection mid-stream: it was shut down or
    restarted, or the connection was cut. Nothing is lost: the slot keeps the WAL from its
    confirmed position, so a pipeline started again resumes from its checkpoint."""

    @classmethod
    def after(cls, source: str, slot: str, position: str, detail: str) -> ReplicationClosedError:
        """The server closed the stream once it had reached LSN ``position``."""
        return cls(
            f"{source} closed the replication connection of slot {slot!r} ({detail}); the"
            f" stream had reached LSN {position}",
            {"source": source, "slot": slot, "position": position},
        )


class SlotAheadError(TerminalError):
    """The slot has confirmed changes past the position a pipeline must start from."""

    @classmethod
    def of(cls, source: str, slot: str, start: str, confirmed: str) -> SlotAheadError:
        """The slot would skip the changes between ``start`` and ``confirmed``."""
        return cls(
            f"replication slot {slot!r} has confirmed the log up to {confirmed}, past the"
            f" snapshot at {start}: the changes between would be skipped. Drop the slot and"
            " let replcheck create it with the initial snapshot, or use a new slot",
            {"source": source, "slot": slot, "position": start},
        )


class ReplicaIdentityError(TerminalError):
    """A change does not carry the columns that locate its row."""

    @classmethod
    def missing(
        cls, table: str, key: Sequence[str], missing: Sequence[str], position: str
    ) -> ReplicaIdentityError:
        """A row change of ``table`` lacks key columns ``missing``."""
        return cls(
            f"a change of table {table} at {position} does not carry its key columns"
            f" {list(missing)} (key {list(key)}); give the table a primary key or set"
            f" ALTER TABLE {table} REPLICA IDENTITY FULL",
            {"table": table, "position": position},
        )
