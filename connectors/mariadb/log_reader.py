"""MariaDB's and MySQL's binlog as raw changes (``cdc_core.capture.source.LogReader``).

Reads the binlog with mysql-replication as a replica would (COM_BINLOG_DUMP from a file and
offset) and turns its events into ``Begin``/``RowChange``/``Commit``/``Rollback`` in log
order, plus ``Idle`` while the log is quiet.

Transactions: MariaDB opens each event group with its GTID event
(https://mariadb.com/kb/en/gtid_event/); MySQL with a ``GTID_LOG_EVENT`` or, with
``gtid_mode=OFF``, an ``ANONYMOUS_GTID_LOG_EVENT``, followed by a ``BEGIN`` query for DML
(https://dev.mysql.com/doc/dev/mysql-server/latest/classmysql_1_1binlog_1_1event_1_1Gtid__event.html).
Both end with an XID event or a ``COMMIT``/``ROLLBACK`` query; DDL is a group of its own.
An anonymous transaction has no id in the log, so its txid is its GTID event's position.

A change never vanishes without a trace: filtering by table is the only way a captured
change is not emitted. A rows event (or TRUNCATE) of a captured table with no open
transaction, and an event whose rows the reader cannot decode (MySQL's partial JSON
updates and compressed transactions in another compression than zstd, MariaDB's compressed
events), stop the reader with an error naming their position. A compressed
transaction's events are read from its payload (``binlog/compressed.py``), all at the
payload event's position.

Positions (``connectors/mariadb/position.py``, ``file number << 32 | offset``):

- ``Begin``: the end of the transaction's GTID event;
- ``RowChange``: the start of its rows event (all rows of one event share it);
- ``Commit``/``Rollback``: the end of the XID event, ``COMMIT`` query or ``XA COMMIT``/``XA
  ROLLBACK`` query -- what ``binlog_snapshot_position`` reports after that transaction.

So positions never go backwards, a ``Commit`` never shares its position with the next
``Begin``, and every change can be found again from its position alone.

Traps of mysql-replication, avoided here (each has a test in tests/connectors/mariadb/):

- With ``is_mariadb=True`` it ignores ``log_file``/``log_pos`` and asks for GTID
  auto-positioning (``__set_mariadb_settings`` sends an empty file name). We pass
  ``is_mariadb=False``: the plain file+offset dump, which MariaDB serves too.
- Starting a dump in the middle of a transaction silently drops its rows up to the next
  table map, and knows neither the transaction's id nor its tables. A start that is not a
  transaction boundary re-reads the binlog file from its first event and yields only what
  lies at or after the start.
- ``blocking=False`` ends (or reconnects in a loop) at the end of the log; we block and ask
  the server for heartbeats, which become ``Idle`` markers.
- Without ``binlog_row_metadata=FULL`` columns read as ``UNKNOWN_COLn``: checked at start
  and for every table map (``BinlogMetadataError``).
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import struct
from collections.abc import Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from cdc_core.capture.events import Begin, Commit, RawChange, Rollback
from cdc_core.capture.position import Position
from cdc_core.capture.source import Idle, TableChanged, TableDescription
from cdc_core.names import qualify, split_table
from connectors.mariadb.binlog.row_changes import row_changes
from connectors.mariadb.binlog.schema_tracker import SchemaTracker, TableCatalog, parse_ddl
from connectors.mariadb.binlog.stream import BinlogStream, StreamSettings, server_facts
from connectors.mariadb.ddl import classify_alter
from connectors.mariadb.errors import UnreadableEventError, UntrackedChangeError, lost_connections
from connectors.mariadb.failover import check_failover, refuse_unfollowed
from connectors.mariadb.generated import logs_full_images, virtual_columns
from connectors.mariadb.gtid import ExecutedGtids, Gtid, GtidSet, executed_of, parse_gtid
from connectors.mariadb.position import (
    Epoch,
    epoch_of,
    epoch_start,
    position_of,
    split_position,
)
from connectors.mariadb.source_config import MariaDBSourceConfig
from connectors.mariadb.system_versioning import system_period
from connectors.mariadb.table_kinds import check_capturable
from connectors.mariadb.types import data_types

logger = logging.getLogger(__name__)
_Item = TypeVar("_Item", RawChange, TableChanged)

# MariaDB GTID event flags (https://mariadb.com/kb/en/gtid_event/).
FL_STANDALONE, FL_GROUP_COMMIT_ID, FL_PREPARED_XA, FL_COMPLETED_XA = 1, 2, 64, 128
_IGNORED_QUERIES = ("BEGIN", "SAVEPOINT", "XA END", "XA START", "ROLLBACK TO")
# Event types mysql-replication reads as ``NotImplementedEvent``, by the name the reader
# gives them; any other such type is skipped, as the stream filtered it before. MySQL:
# https://dev.mysql.com/doc/dev/mysql-server/latest/namespacemysql_1_1binlog_1_1event.html
# (enum Log_event_type); MariaDB: https://mariadb.com/kb/en/2-binlog-event-header/.
ANONYMOUS_GTID, TRANSACTION_PAYLOAD, HEARTBEAT_V2 = 34, 40, 41
MARIADB_COMPRESSED = range(165, 172)  # QUERY_COMPRESSED .. DELETE_ROWS_COMPRESSED
_ROWS_KINDS = ("WriteRowsEvent", "UpdateRowsEvent", "DeleteRowsEvent")


@dataclass(slots=True)
class _Transaction:
    """The binlog event group being read."""

    txid: str
    begin_pos: Position
    standalone: bool
    begun: bool = False  # a Begin was yielded (lazily, at its first captured change)
    mysql: bool = False  # opened by a MySQL GTID or anonymous GTID event


class MariaDBLogReader:
    """Reads a MariaDB server's binlog as raw changes of the captured tables.

    Args:
        config: The source.
    """

    def __init__(self, config: MariaDBSourceConfig, epoch: Epoch | None = None) -> None:
        from connectors.mariadb.connector import MariaDBConnector

        self.config = config
        password = config.password.reveal() if config.password is not None else None
        self._connector = MariaDBConnector(config.url, password, config.endpoint)
        self.settings = StreamSettings.from_config(config, password)
        database = self.settings.database
        self.tables = tuple(qualify(table, database) for table in config.tables)
        self.keys = {qualify(t, database): tuple(k) for t, k in config.keys.items()}
        self._streams: list[BinlogStream] = []
        self._captured = set(self.tables)  # shared with every session's schema tracker
        # Per table and table-map columns, its catalog facts (asked once).
        self._catalogs: dict[tuple[str, tuple[str, ...]], TableCatalog] = {}
        # Per table, every column this reader has seen as a UUID (``_uuids_of``).
        self._uuids: dict[str, set[str]] = {}
        self.epoch = epoch or Epoch()  # shared with the source's snapshot reader
        # MySQL GTIDs (``gtid.py``): the set executed at each position read, the token a
        # checkpoint gave for the position resumed at, a failover to follow, and the
        # transactions the pipeline's buffer holds open (read again whole after one).
        self._gtids: ExecutedGtids | None = None
        self._resume: tuple[int, str] | None = None
        self._failover: tuple[Position, str] | None = None
        self._held: tuple[str, ...] = ()

    def describe(self, table: str) -> TableDescription:
        """The table's current columns (as the lake stores them) and key.

        Raises:
            UncapturableTableError: The binlog does not carry all the table's changes
                (``table_kinds``).
        """
        from connectors.mariadb.snapshot import describe_table

        with lost_connections(self.settings.display):
            database = self.settings.database
            name = qualify(table, database)
            check_capturable(self._connector, [name])
            description = describe_table(self._connector, name, self.keys)
            with self._connector.connect() as connection, connection.cursor() as cursor:
                self._uuids_of(name, (), data_types(cursor, *split_table(name, database)))
            return description

    def end_position(self) -> Position:
        """The binlog's end now (``SHOW MASTER STATUS``)."""
        with lost_connections(self.settings.display):
            facts = server_facts(self.settings)
        return position_of(facts.log_file, facts.offset, self.epoch.value)

    def resume(self, position: Position | None, token: str | None) -> None:
        """The position a pipeline resumes from (before any snapshot: its epoch orders
        them) and the token its checkpoint kept for it (``resume_token``)."""
        if position is not None and self._failover is None:
            self.epoch.value = epoch_of(position.value)
            self._resume = (position.value, token) if token is not None else None

    def resume_token(self, position: Position) -> str | None:
        """What resuming at ``position`` on another server needs: the GTID set executed
        there and the XA transactions open there (None: not known, or no GTIDs)."""
        return self._gtids.token(position.value) if self._gtids is not None else None

    def resume_transactions(self, txids: Iterable[str]) -> None:
        """The transactions the pipeline's buffer holds open (``ResumesTransactions``):
        after a failover they are rolled back first, as the new server sends them whole."""
        self._held = tuple(txids)

    def follow_failover(self, position: Position, token: str, recorded: str) -> None:
        """Resume on the server the URL reaches now, another than ``recorded``, from the
        GTID set ``token`` holds at ``position`` (``failover.py``); its positions start a
        new epoch.

        Raises:
            FailoverError: The server cannot send the log after that set.
        """
        if self._failover == (position, token):
            return  # told again (``cdc run --until-caught-up`` asks the log's end first)
        found = self.source_identity()
        with (
            lost_connections(self.settings.display),
            self._connector.connect() as connection,
            connection.cursor() as cursor,
        ):
            flavour = self._connector.server_flavour(connection)
            check_failover(cursor, flavour, self.settings.display, found, executed_of(token))
        logger.warning(
            "source %s: following a failover from %s to %s at %s (GTID set %s)",
            self.settings.display,
            recorded,
            found,
            position,
            executed_of(token),
        )
        self._failover = (position, token)
        self.epoch.value = epoch_of(position.value) + 1

    def iter_changes(
        self, start: Position | None
    ) -> Generator[RawChange | TableChanged | Idle, None, None]:
        """Raw changes from ``start`` on (see ``cdc_core.capture.source.LogReader``).

        Raises:
            BinlogSetupError: The server's binlog settings cannot be read (names the fix).
            ReplicationPrivilegeError: The user may not read the binlog.
            BinlogPurgedError: The binlog at ``start`` is gone.
        """
        with lost_connections(self.settings.display):
            facts = server_facts(self.settings)
        facts.check(self.settings.display)
        if start is None:
            start = position_of(facts.log_file, facts.offset, self.epoch.value)
        log_file, offset = split_position(start.value, facts.basename)
        tracker = SchemaTracker(self._captured, self.keys, self._catalog_of)
        session = _Session(self, start, tracker)
        stream = BinlogStream(self.settings, self._schemas())
        self._streams.append(stream)
        held, self._held = self._held, ()
        try:
            if self._failover is not None and self._failover[0] == start:
                yield from self._after_failover(session, stream, held)
            else:
                self._failover = None
                if facts.tracks_gtids:
                    session.gtids = self._gtids = self._executed_at(start)
                    session.tracks = True
                    if session.gtids is None:  # learnt from the file's PREVIOUS_GTIDS on
                        offset = 4
                yield from session.run(stream, log_file, max(offset, 4))
        finally:
            stream.close()
            self._streams.remove(stream)

    def _executed_at(self, start: Position) -> ExecutedGtids | None:
        """The GTID set executed at ``start``: the checkpoint's token, or what this reader
        read before (a reconnect); None: read it from the start file's top."""
        token = None
        if self._resume is not None and self._resume[0] == start.value:
            token = self._resume[1]
        elif self._gtids is not None:
            token = self._gtids.token(start.value)
        return ExecutedGtids.from_token(token, start.value) if token is not None else None

    def _after_failover(
        self, session: _Session, stream: BinlogStream, held: tuple[str, ...]
    ) -> Iterator[RawChange | TableChanged | Idle]:
        """The first read from a new server: the transactions the pipeline holds open are
        rolled back (the server sends them whole), then every transaction the token's set
        lacks, in the new epoch."""
        assert self._failover is not None
        token = self._failover[1]
        gtids = ExecutedGtids.from_token(token, epoch_start(self.epoch.value).value)
        refuse_unfollowed(self.settings.display, "the new server", held, list(gtids.prepared))
        session.gtids = self._gtids = gtids
        session.tracks = True
        for txid in held:
            yield Rollback(txid, epoch_start(self.epoch.value))
        self._failover = None
        yield from session.run(stream, "", 4, gtid_set=executed_of(token))

    def source_identity(self) -> str:
        """The server whose binlog positions the pipeline holds (the pipeline refuses to
        resume on another unless it can follow a failover there: ``follow_failover``)."""
        with lost_connections(self.settings.display):
            return self._connector.server_identity()

    def capture(self, tables: Sequence[str]) -> None:
        """Also decode the rows of ``tables`` from the next event on (``CapturesTables``)."""
        database = self.settings.database
        added = [qualify(table, database) for table in tables]
        self._captured.update(added)
        self.tables = tuple(dict.fromkeys((*self.tables, *added)))
        for stream in self._streams:  # its schema filter is read for every table map
            stream.schemas.extend(s for s in self._schemas() if s not in stream.schemas)

    def _catalog_of(self, table: str, columns: tuple[str, ...]) -> TableCatalog:
        """A table's period, UUID and virtual columns (``SchemaTracker.catalog``)."""
        cached = (table, columns)
        if cached not in self._catalogs:
            schema, name = split_table(table, self.settings.database)
            with (
                lost_connections(self.settings.display),
                self._connector.connect() as connection,
                connection.cursor() as cursor,
            ):
                virtual = virtual_columns(cursor, schema, name) if logs_full_images(cursor) else {}
                self._catalogs[cached] = TableCatalog(
                    system_period(cursor, schema, name),
                    self._uuids_of(table, columns, data_types(cursor, schema, name)),
                    frozenset(virtual),
                )
        return self._catalogs[cached]

    def _uuids_of(
        self, table: str, columns: tuple[str, ...], types: dict[str, str]
    ) -> frozenset[str]:
        """The UUID columns among a table map's ``columns``: the catalog's, and those it no
        longer has that were UUIDs when this reader saw them (the catalog is ahead of the
        log: changes made before a column's DROP or RENAME, mariadb seed 613)."""
        uuids = {column for column, kind in types.items() if kind == "uuid"}
        seen = self._uuids.setdefault(table, set())
        seen.update(uuids)
        return frozenset(uuids | {c for c in columns if c not in types and c in seen})

    def close(self) -> None:
        """Close every open binlog connection."""
        for stream in list(self._streams):
            stream.close()
        self._streams.clear()

    def _schemas(self) -> list[str]:
        return sorted({split_table(table, self.settings.database)[0] for table in self.tables})


def _utc(timestamp: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(timestamp, dt.UTC)


class _Session:
    """One ``iter_changes`` call: the event-group state between binlog events."""

    def __init__(self, reader: MariaDBLogReader, start: Position, tracker: SchemaTracker) -> None:
        self.reader = reader
        self.start = start
        self.tracker = tracker
        self.log_file = ""
        self.read_to: Position = start
        self.txn: _Transaction | None = None
        # MySQL: transactions XA PREPARE ended, by XID, until their XA COMMIT / ROLLBACK group
        self.prepared: dict[tuple[int, bytes, bytes], _Transaction] = {}
        # MySQL with gtid_mode=ON: the GTID set executed at each position (None until the
        # file's PREVIOUS_GTIDS when no token was given), and the event group being read.
        self.tracks = False
        self.gtids: ExecutedGtids | None = None
        self.group: Gtid | None = None
        self.group_xa: str | None = None  # its XA transaction (``XA START``)

    def run(
        self, stream: BinlogStream, log_file: str, offset: int, gtid_set: str | None = None
    ) -> Iterator[RawChange | TableChanged | Idle]:
        events = stream.events(log_file, offset, self._reached, gtid_set)
        boundary = offset <= 4
        for event in events:
            kind = _kind_of(event)
            if kind is None:
                continue
            if kind == "RotateEvent":
                self._rotate(event)
                continue
            if kind == "HeartbeatLogEvent":
                self._end_group(self.read_to)  # the server is idle: the group is whole
                yield Idle(self.read_to)
                continue
            if not event.packet.log_pos:
                continue  # an artificial event the server sends at the start of a dump
            if not boundary:
                if not _starts_group(kind):
                    yield from self._rescan(stream, log_file)
                    return
                boundary = True
            yield from self._event(kind, event)

    def _rescan(
        self, stream: BinlogStream, log_file: str
    ) -> Iterator[RawChange | TableChanged | Idle]:
        """The start is inside an event group: read its file from the top, yield from start."""
        logger.info(
            "position %s is inside a transaction; re-reading %s from its start",
            self.start,
            log_file,
        )
        stream.close()
        for event in stream.events(log_file, 4, self._reached):
            kind = _kind_of(event)
            if kind is None:
                continue
            if kind == "RotateEvent":
                self._rotate(event)
            elif kind == "HeartbeatLogEvent":
                self._end_group(self.read_to)
                yield Idle(max(self.read_to, self.start))
            elif event.packet.log_pos:
                yield from self._event(kind, event)

    def _reached(self) -> str:
        """How far the binlog was read (for messages: a lost connection names it)."""
        return self.read_to.text

    def _rotate(self, event: Any) -> None:
        self.log_file = event.next_binlog
        if event.timestamp:  # a real rotation: table ids may be reused in the next file
            self.tracker.forget_table_ids()

    def _event(self, kind: str, event: Any) -> Iterator[RawChange | TableChanged]:
        end = event.packet.log_pos
        begin = end - event.packet.event_size
        at, after = self._at(begin), self._at(end)
        if kind == "MariadbGtidEvent":
            self.txn = _gtid_transaction(event, after)
        elif kind == "GtidEvent":
            self._open_group(at, parse_gtid(event.gtid))
            self.txn = _Transaction(event.gtid, after, standalone=False, mysql=True)
        elif kind == "AnonymousGtidEvent":
            self._open_group(at, None)
            self.txn = _Transaction(f"anonymous@{at.text}", after, standalone=False, mysql=True)
        elif kind == "PreviousGtidsEvent":
            self._previous_gtids(event, after)
        elif kind == "TableMapEvent":
            self.tracker.on_table_map(event)
        elif kind in _ROWS_KINDS:
            yield from self._rows(event, at)
        elif kind == "XidEvent":
            self._end_group(after)
            yield from self._finish(after, event.timestamp, commit=True)
        elif kind == "QueryEvent":
            yield from self._query(event, at, after)
        elif kind == "XAPrepareEvent":
            yield from self._xa_prepare(event, at, after)
        elif kind in ("PartialUpdateRowsEvent", "TransactionPayloadEvent", "CompressedEvent"):
            self._refuse(kind, event, at)
        if self.log_file:
            self.read_to = max(self.read_to, after)

    def _at(self, offset: int) -> Position:
        return position_of(self.log_file, offset, self.reader.epoch.value)

    # -- GTIDs: the set executed at each position (before any change at it is yielded, as
    # the pipeline may checkpoint there while this generator waits) ----------------------

    def _open_group(self, at: Position, gtid: Gtid | None) -> None:
        self._end_group(at)  # a group whose end the reader did not recognise ends here
        self.group, self.group_xa = gtid, None

    def _end_group(self, at: Position) -> None:
        if self.group is not None and self.gtids is not None:
            self.gtids.ended(at.value, self.group)
        self.group = None

    def _previous_gtids(self, event: Any, after: Position) -> None:
        """A file's first event: the set executed before it, when no token gave one."""
        if self.tracks and self.gtids is None:
            body = event.packet.packet.get_all_data()[20:]  # OK byte, 19-byte header
            self.gtids = self.reader._gtids = ExecutedGtids(GtidSet.decode(body), after.value)

    def _emit(self, change: _Item) -> Iterator[_Item]:
        if change.position >= self.start:
            yield change

    def _begin(self) -> Iterator[RawChange]:
        txn = self.txn
        if txn is not None and not txn.begun:
            txn.begun = True
            yield from self._emit(Begin(txn.txid, txn.begin_pos))

    def _rows(self, event: Any, at: Position) -> Iterator[RawChange]:
        layout = self.tracker.layout(event.table_id)
        if layout is None or at < self.start:
            return  # not captured, or before the start: not even decoded
        if self.txn is None:
            source = self.reader.settings.display
            raise UntrackedChangeError.at(source, "a rows event", layout.table, at.text)
        yield from self._begin()
        yield from row_changes(event, layout, self.txn.txid, at)

    def _xa_prepare(self, event: Any, at: Position, after: Position) -> Iterator[RawChange]:
        txn = self.txn
        if self.group is not None and self.group_xa is not None and not event.one_phase:
            if self.gtids is not None:  # executed once its outcome is read
                self.gtids.prepare(after.value, self.group_xa, self.group)
            self.group = None
        self._end_group(after)
        if txn is None or not txn.mysql:
            self.txn = None  # prepared: stays open until its XA COMMIT / XA ROLLBACK group
        elif event.one_phase:  # MySQL's XA COMMIT ... ONE PHASE ends its own group
            yield from self._finish(after, event.timestamp, commit=True)
        elif txn.begun:  # its outcome comes in a group of its own, under another GTID
            self.prepared[(event.xid_format_id, event.xid_gtrid, event.xid_bqual)] = txn
            self.txn = None
        else:
            self.txn = None  # no captured change: nothing to follow to its outcome

    def _refuse(self, kind: str, event: Any, at: Position) -> None:
        """Stop at an event whose changes cannot be read (``_UNREADABLE``): never skip it."""
        if at < self.start:
            return
        if kind == "PartialUpdateRowsEvent" and self.tracker.layout(event.table_id) is None:
            return  # a table that is not captured
        what, fix = _UNREADABLE[kind]
        raise UnreadableEventError.at(self.reader.settings.display, what, at.text, fix)

    def _finish(self, at: Position, timestamp: int, *, commit: bool) -> Iterator[RawChange]:
        txn, self.txn = self.txn, None
        if txn is None or not txn.begun:
            return
        end: RawChange = Commit(txn.txid, at, _utc(timestamp)) if commit else Rollback(txn.txid, at)
        yield from self._emit(end)

    def _query(
        self, event: Any, at: Position, after: Position
    ) -> Iterator[RawChange | TableChanged]:
        query = event.query.strip()
        upper = query[:16].upper()
        if upper == "COMMIT":
            self._end_group(after)
            yield from self._finish(after, event.timestamp, commit=True)
        elif upper == "ROLLBACK":
            self._end_group(after)
            yield from self._finish(after, event.timestamp, commit=False)
        elif upper.startswith(("XA COMMIT", "XA ROLLBACK")):
            self._xa_outcome(query, after)
            commit = upper.startswith("XA COMMIT")
            yield from self._complete_xa(commit, query, after, event.timestamp)
        elif upper.startswith("XA START"):
            self._name_xa(query)
        elif not upper.startswith(_IGNORED_QUERIES):
            # DDL: its group ends with the next group or heartbeat (a CREATE ... SELECT's
            # rows may follow under the same GTID, ended by their XID).
            yield from self._ddl(event, query, at, after)

    def _xa_outcome(self, query: str, after: Position) -> None:
        """MySQL's ``XA COMMIT``/``XA ROLLBACK`` group: its own GTID is executed, and so
        is the prepare group's of the transaction it names."""
        self._end_group(after)
        xid = _xid_of(query)
        if self.gtids is not None and xid is not None:
            self.gtids.outcome(after.value, _xa_name(*xid))

    def _name_xa(self, query: str) -> None:
        """MySQL's ``XA START``: the transaction is named by its XID (``xa-...``, as
        MariaDB's are), which its outcome's statement names too, so an outcome read after a
        restart (the prepared rows before the start) still ends the transaction the
        pipeline's buffer holds."""
        xid = _xid_of(query)
        if xid is not None:
            self.group_xa = _xa_name(*xid)
        if self.txn is not None and self.txn.mysql and not self.txn.begun and xid is not None:
            self.txn.txid = _xa_name(*xid)

    def _complete_xa(
        self, commit: bool, query: str, at: Position, timestamp: int
    ) -> Iterator[RawChange]:
        """The outcome of a prepared transaction. MariaDB names it in this group's GTID
        event (``xa-...`` txids); MySQL's group has a GTID of its own and names the XID in
        the statement (``XA COMMIT X'..',X'..',n``), which finds the transaction its XA
        PREPARE ended (``prepared``). The prepared rows may lie before this reader's start
        (a restart between XA PREPARE and XA COMMIT): the outcome is always reported; a
        buffer that does not hold the transaction ignores it."""
        txn, self.txn = self.txn, None
        if txn is not None and txn.mysql:
            xid = _xid_of(query)
            if xid is None:
                return
            txn = self.prepared.pop(xid, None) or _Transaction(_xa_name(*xid), at, standalone=False)
        if txn is None:
            return
        end: RawChange = Commit(txn.txid, at, _utc(timestamp)) if commit else Rollback(txn.txid, at)
        yield from self._emit(end)

    def _ddl(
        self, event: Any, query: str, at: Position, after: Position
    ) -> Iterator[RawChange | TableChanged]:
        schema = event.schema.decode() if isinstance(event.schema, bytes) else str(event.schema)
        change = parse_ddl(query, schema)
        if change is None:
            return
        # At the statement's start: a CREATE ... SELECT's rows follow in its own group.
        if change.kind in ("create", "rename"):  # the pipeline decides whether it captures
            for table in change.renamed_to or change.tables:
                yield from self._emit(TableChanged(at, table, "refresh", query, "table created"))
        captured = [table for table in change.tables if self.tracker.captures(table)]
        if not captured:
            return
        logger.info("%s of captured tables %s at %s", change.kind, captured, at)
        if change.kind == "rename":
            logger.warning(
                "captured tables %s renamed to %s: their lake tables stay as they are",
                list(change.tables),
                list(change.renamed_to),
            )
        if change.kind == "truncate" and self.txn is not None:
            yield from self._truncate(captured, at, after, event.timestamp)
        elif change.kind == "truncate" and at >= self.start:
            source = self.reader.settings.display
            raise UntrackedChangeError.at(source, "a TRUNCATE", captured[0], at.text)
        if change.kind == "alter":
            action, reason = classify_alter(change.specification, ignore=change.ignore)
            for table in captured:
                yield from self._emit(TableChanged(at, table, action, query, reason))

    def _truncate(
        self, tables: list[str], at: Position, after: Position, timestamp: int
    ) -> Iterator[RawChange]:
        from cdc_core.capture.events import RowChange

        assert self.txn is not None
        yield from self._begin()
        for table in tables:
            yield from self._emit(RowChange(self.txn.txid, at, "t", table, None))
        yield from self._finish(after, timestamp, commit=True)


_XID = re.compile(r"XA\s+\w+\s+X'([0-9A-Fa-f]*)'\s*,\s*X'([0-9A-Fa-f]*)'\s*,\s*(\d+)")


def _xid_of(query: str) -> tuple[int, bytes, bytes] | None:
    """The XID of MySQL's ``XA COMMIT`` / ``XA ROLLBACK`` statement in the binlog, as
    (formatID, gtrid, bqual): MySQL writes it as ``X'gtrid',X'bqual',formatID``."""
    found = _XID.match(query)
    if found is None:
        return None
    return int(found[3]), bytes.fromhex(found[1]), bytes.fromhex(found[2])


def _kind_of(event: Any) -> str | None:
    """The event's class name, or the reader's name for a type mysql-replication does not
    parse; ``None`` for such a type the reader does not need."""
    kind = type(event).__name__
    if kind != "NotImplementedEvent":
        return kind
    event_type = event.event_type
    if event_type in MARIADB_COMPRESSED:
        return "CompressedEvent"
    return {
        ANONYMOUS_GTID: "AnonymousGtidEvent",
        TRANSACTION_PAYLOAD: "TransactionPayloadEvent",
        HEARTBEAT_V2: "HeartbeatLogEvent",
    }.get(event_type)


# What each unreadable event is, and the server setting that avoids it.
_UNREADABLE = {
    "TransactionPayloadEvent": (  # one ``compressed`` could not decode
        "a compressed transaction (TRANSACTION_PAYLOAD_EVENT) not in zstd or damaged",
        "run SET GLOBAL binlog_transaction_compression = OFF",
    ),
    "PartialUpdateRowsEvent": (
        "a partial JSON update of a captured table (PARTIAL_UPDATE_ROWS_EVENT)",
        "run SET GLOBAL binlog_row_value_options = ''",
    ),
    "CompressedEvent": (
        "a compressed event (log_bin_compress)",
        "run SET GLOBAL log_bin_compress = OFF",
    ),
}


def _starts_group(kind: str) -> bool:
    """Whether an event can be the first one read at a transaction boundary."""
    return kind in (
        "MariadbGtidEvent",
        "GtidEvent",
        "AnonymousGtidEvent",
        "PreviousGtidsEvent",
        "FormatDescriptionEvent",
        "MariadbGtidListEvent",
        "MariadbBinLogCheckPointEvent",
        "StopEvent",
    )


def _gtid_transaction(event: Any, after: Position) -> _Transaction:
    """The event group a MariaDB GTID event opens; XA groups are named by their XID."""
    flags = event.flags
    txid = event.gtid
    if flags & (FL_PREPARED_XA | FL_COMPLETED_XA):
        rest = event.packet.read(event.event_size - event.packet.read_bytes)
        txid = _xa_txid(rest, 8 if flags & FL_GROUP_COMMIT_ID else 0)
    return _Transaction(txid, after, standalone=bool(flags & FL_STANDALONE))


def _xa_txid(rest: bytes, at: int) -> str:
    """The txid of the XID in a MariaDB GTID event's XA fields."""
    format_id = struct.unpack_from("<I", rest, at)[0]
    gtrid_length, bqual_length = rest[at + 4], rest[at + 5]
    data = rest[at + 6 : at + 6 + gtrid_length + bqual_length]
    return _xa_name(format_id, data[:gtrid_length], data[gtrid_length:])


def _xa_name(format_id: int, gtrid: bytes, bqual: bytes) -> str:
    """``xa-<formatID>-<gtrid hex>-<bqual hex>``: the same for XA PREPARE and its outcome."""
    return f"xa-{format_id}-{gtrid.hex()}-{bqual.hex()}"
