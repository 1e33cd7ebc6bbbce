"""PostgreSQL's logical replication stream as raw changes (``cdc_core.capture.source.LogReader``).

Reads a logical replication slot with the ``pgoutput`` plugin, protocol version 2,
``streaming 'on'`` and ``binary 'true'``, through psycopg2's logical replication connection
(psycopg 3 has no replication protocol). Transactions arrive whole at their commit, or, when
larger than ``logical_decoding_work_mem``, in stream blocks while still in progress,
interleaved with others, and end with a stream commit or abort
(https://www.postgresql.org/docs/15/protocol-logical-replication.html#PROTOCOL-LOGICAL-REPLICATION-STREAMING).

Positions. A message's own LSN does not grow in stream order: a transaction sent at its
commit starts with changes older than the commits sent before it, and a stream block holds
changes older than commits sent earlier. So positions are made to grow:

- a ``Commit`` is at the commit's end LSN (its commit_pos), a streamed transaction's
  ``Rollback`` at the abort record's end LSN: *boundaries*, real LSNs;
- every other change (``Begin``, ``RowChange``, ``PartialRollback``) is at the last
  boundary plus a small step (1..7): WAL records start and end on 8-byte boundaries
  (MAXALIGN, ``XLogDecodeNextRecord`` in xlogreader.c), so the step never reaches the
  next real LSN, and every commit sent later lies after it.

Restart. ``iter_changes(start)`` asks the server for the stream from the boundary B of
``start`` (``start`` rounded down to 8 bytes): the server sends every transaction whose
commit record lies at or after B, and streams transactions still in progress from their
first change (their earlier stream blocks are not remembered: a restarted walsender
re-decodes them). Changes are then placed after ``start`` (the step grows by one per
restart without a boundary), so the core's buffer never takes a re-sent change for one it
already holds. The transactions the buffer holds open are rolled back in it first, since
the server sends them whole again (or never, if they aborted meanwhile): the pipeline names
them with ``resume_transactions``; a caller that does not is assumed to hold any
transaction whose xid the server had assigned before the session began, and each such
transaction is rolled back when it first shows up.

Savepoints. A subtransaction abort inside a streamed transaction (stream abort with a
subxid) discards that subtransaction's changes. The core undoes changes row by row
(``PartialRollback``), so the reader remembers, per subtransaction of an open streamed
transaction, the (table, locator) of each change it yielded, and undoes them latest first.
The aborted changes are always the latest of their transaction (subtransactions nest like
a stack, and changes after a ``ROLLBACK TO`` belong to a new subtransaction whose changes are
not streamed before that abort is decoded), so each undo removes exactly one of them.
Subtransactions aborted before they were streamed never reach the stream.

DDL. Logical decoding shows none: a table's new columns show in its next Relation message
(or in the catalog while the log is quiet, ``cdc_core.pipeline.ddl_follower``), and DDL that changes
stored values but no column (a same-type ``USING`` rewrite, an enum value renamed) in the
transactional messages the event triggers of ``rewrites.py`` write into its transaction.
Either is a ``TableChanged`` that refreshes the table.

Acknowledgement: ``acknowledge(position)`` (called once the lake holds everything up to
``position``) confirms it to the slot, so the server keeps exactly the WAL still needed.

Ending a session: closing the iterator ends the stream with CopyDone after a last
confirmation (``feedback.end_stream``), so when it returns the server has applied the
confirmation and released the slot. Merely closing the connection left the walsender
holding the slot until it noticed, and the next session's START_REPLICATION could fail
with "replication slot is active" (under load, 4 in 10 closes were still holding it when
close returned); the confirmation could be lost with the reset connection.

A server that closes the stream (shut down, restarted, the connection cut) is a
``ReplicationClosedError`` naming the last boundary read: a ``TransientError``, as the slot
keeps the WAL from its confirmed position, so ``cdc run`` retries from its checkpoint.
"""

from __future__ import annotations

import contextlib
import logging
import select
import time
from collections.abc import Generator, Iterable, Iterator
from typing import Any

from cdc_core.capture.events import Begin, Commit, PartialRollback, RawChange, Rollback, RowChange
from cdc_core.capture.position import Position
from cdc_core.capture.source import Idle, TableChanged, TableDescription
from cdc_core.errors import TerminalError, TransientError
from connectors.postgres import rewrites
from connectors.postgres.connector import split_table
from connectors.postgres.errors import (
    ReplicationClosedError,
    WalRemovedError,
    ends_session,
    lost_connections,
)
from connectors.postgres.generated import GeneratedColumn, GeneratedValues, generated_columns
from connectors.postgres.partitions import partition_ancestors
from connectors.postgres.pgoutput import messages as pg
from connectors.postgres.pgoutput.binary_values import ValueDecoder, lookup_type
from connectors.postgres.pgoutput.feedback import end_stream, send_status
from connectors.postgres.pgoutput.relations import DeferredLocator, RelationTracker
from connectors.postgres.position import ALIGN, describe_position, lsn_to_text
from connectors.postgres.replication import (
    PostgresSourceConfig,
    check_wal_level,
    connector_of,
    ensure_publication,
    ensure_slot,
    next_xid,
    open_stream_connection,
)
from connectors.postgres.rewrites import ensure_rewrite_triggers
from connectors.postgres.snapshot import describe_table
from connectors.postgres.wal_end import committed_end

logger = logging.getLogger(__name__)

STATUS_S = 1.0  # status updates at least this often: the server never has to ask for one
SLOT_RELEASE_S = 10.0  # how long ending a stream, or a new session, waits for a slot's release
PSYCOPG2_STATUS_OFF = 86_400.0  # psycopg2's own periodic feedback: never (feedback.py)


def position_of(value: int) -> Position:
    """The position of ``value``: an LSN, or a boundary plus a step (``0/16B3748+1``)."""
    return Position(value, describe_position(value))


class _Positions:
    """Positions of one session: boundaries are LSNs, other changes follow the last one."""

    def __init__(self, start: int) -> None:
        self.boundary = start - start % ALIGN
        self.step = start % ALIGN + 1
        self.last = start
        self._after: Position | None = None

    def after_boundary(self) -> Position:
        """The position of a change that is not a boundary."""
        if self.step >= ALIGN:
            where = position_of(self.last).text
            raise TerminalError(
                f"the pipeline was restarted {ALIGN - 1} times at {where} before the log"
                " reached the next commit; start it again once the source has committed"
                " a transaction of the captured tables",
                {"position": where},
            )
        value = self.boundary + self.step
        if self._after is None or self._after.value != value:
            self._after = position_of(value)  # one object for the run of changes sharing it
        self.last = value
        return self._after

    def at(self, lsn: int) -> Position:
        """The position of a boundary at ``lsn`` (an LSN after every earlier position)."""
        if lsn <= self.last or lsn % ALIGN:
            raise TerminalError(
                f"LSN {lsn_to_text(lsn)} does not follow {position_of(self.last)}; the stream"
                " is not in commit order",
                {"position": lsn_to_text(lsn)},
            )
        self.boundary, self.step, self.last = lsn, 1, lsn
        return position_of(lsn)

    def idle(self, wal_end: int) -> Position:
        """The position an idle stream has reached: at least the last boundary."""
        reached = wal_end - wal_end % ALIGN
        if reached > self.last:
            self.boundary, self.step, self.last = reached, 1, reached
        return position_of(self.boundary)


# Every column of a table, in order, with its type, default, nullability and missing value
# (a fast default: https://www.postgresql.org/docs/current/catalog-pg-attribute.html).
_SHAPE_SQL = """
SELECT string_agg(
         format('%%s %%s %%s %%s %%s', quote_ident(a.attname), format_type(a.atttypid, a.atttypmod),
                a.attnotnull, pg_get_expr(d.adbin, d.adrelid), a.attmissingval),
         ', ' ORDER BY a.attnum)
  FROM pg_attribute a
  JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
  LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
 WHERE n.nspname = %s AND c.relname = %s AND a.attnum > 0 AND NOT a.attisdropped
"""
# A partitioned table's leaves with their storage: a partition truncated, attached or
# detached changes the root's rows without a row event in the log (pgoutput skips a
# partition's truncate when it publishes via the root), but changes this list. A VACUUM
# FULL or CLUSTER of a leaf changes it too, costing one needless reload of the root.
_LEAVES_SQL = """
SELECT string_agg(format('%%s:%%s', t.relid::regclass, c.relfilenode), ' ' ORDER BY t.relid)
  FROM pg_class r, pg_partition_tree(r.oid) t JOIN pg_class c ON c.oid = t.relid
 WHERE r.oid = to_regclass(%s) AND r.relkind = 'p' AND t.isleaf
"""


class PostgresLogReader:
    """Reads a PostgreSQL database's changes of the captured tables from its slot.

    Args:
        config: The source.
    """

    def __init__(self, config: PostgresSourceConfig) -> None:
        self.config = config
        self.connector = connector_of(config)
        self.tables = frozenset(config.qualified_tables())
        self.keys = config.qualified_keys()
        self._acknowledged = 0
        self._streams: list[Any] = []
        self._held: tuple[str, ...] | None = None
        self._session: _Session | None = None  # the stream being read, if any

    def table_shape(self, table: str) -> str:
        """The table's columns, types and defaults as the catalog has them now, and a
        partitioned table's leaves: logical decoding shows no DDL, only a new shape with the
        table's next change (``OmitsDdl``)."""
        with self._catalog() as connection:
            row = connection.execute(_SHAPE_SQL, split_table(table)).fetchone()
            qualified = self.connector.qualified(table)
            leaves = connection.execute(_LEAVES_SQL, (qualified,)).fetchone()
        shape = str(row[0]) if row and row[0] is not None else ""
        return f"{shape}; leaves {leaves[0]}" if leaves and leaves[0] else shape

    def source_tables(self) -> list[str]:
        """Every table the source has now: one created without rows shows nowhere in the
        log (``OmitsDdl``). Partitions not captured at the start are left out: a partition
        created later is never a table of its own, its rows come through its root
        (``partitions.py``)."""
        with self._catalog() as connection:
            ancestors = partition_ancestors(connection)
        with self._lost_connections():
            tables = self.connector.table_names()
        return [table for table in tables if table in self.tables or table not in ancestors]

    def resume_transactions(self, txids: Iterable[str]) -> None:
        """Name the transactions the caller's buffer holds open (restored from a checkpoint):
        the next ``iter_changes`` rolls them back first, as the server sends them whole again."""
        self._held = tuple(txids)

    def describe(self, table: str) -> TableDescription:
        """The table's stored columns and key (see ``snapshot.describe_table``)."""
        with self._lost_connections():
            return describe_table(self.connector, table, self.keys)

    def end_position(self) -> Position:
        """Where every commit made so far ends, flushed (``wal_end``): the walsender
        decodes only flushed WAL."""
        with self._catalog() as connection:
            end = committed_end(connection)
        return position_of(end - end % ALIGN)

    def acknowledge(self, position: Position) -> None:
        """Everything committed at or before ``position`` is durable downstream: the slot may
        confirm it (sent with the stream's next status update)."""
        self._acknowledged = max(self._acknowledged, position.value - position.value % ALIGN)

    def iter_changes(
        self, start: Position | None
    ) -> Generator[RawChange | TableChanged | Idle, None, None]:
        """Raw changes from ``start`` on (see the module doc and ``LogReader``).

        Raises:
            LogicalDecodingSetupError: ``wal_level`` is not ``logical``.
            SlotMissingError: The slot does not exist and may not be created.
            PublicationMissingError: The publication is missing or lacks captured tables.
            WalRemovedError: The WAL the slot needs has been removed.
            TerminalError: The user lacks the REPLICATION attribute.
        """
        where = self.connector.where
        with self._catalog() as connection:
            check_wal_level(connection, where)
            ensure_publication(connection, self.config, where)
            ensure_rewrite_triggers(connection, where, self.config.record_rewrites)
            confirmed = ensure_slot(connection, self.config, where, create=start is None)
            told = self._held is not None
            horizon = next_xid(connection) if start is not None and not told else None
        first = start.value if start is not None else confirmed
        if first < confirmed:
            logger.info(
                "slot %s confirmed %s, after the start %s: the lake holds what lies between",
                self.config.slot,
                lsn_to_text(confirmed),
                position_of(first),
            )
        session = _Session(self, _Positions(first), horizon)
        held, self._held = self._held or (), None
        stream = open_stream_connection(self.config, self.connector)
        self._streams.append(stream)
        self._session = session
        try:
            yield from session.run(stream, held)
        finally:
            session.generated.close()
            self._session = None
            if stream in self._streams:  # else close() ended it already
                self._streams.remove(stream)
                self._end(stream)

    def _end(self, stream: Any) -> None:
        """Confirm what was acknowledged and end the stream, so that the server has applied
        the confirmation and released the slot when this returns (``feedback.end_stream``);
        then close the connection."""
        try:
            if not end_stream(stream, self._acknowledged, SLOT_RELEASE_S):
                logger.info("the stream of slot %s did not end cleanly", self.config.slot)
        except Exception:  # a broken connection cannot end cleanly: closing is what is left
            logger.debug("ending the stream of slot %s failed", self.config.slot, exc_info=True)
        finally:
            stream.close()

    def close(self) -> None:
        """Close every open replication connection."""
        for stream in list(self._streams):
            stream.close()
        self._streams.clear()

    def lookup_type(self, type_oid: int) -> Any:
        """What a non-builtin type is (from the catalog)."""
        with self._catalog() as connection:
            return lookup_type(connection, type_oid)

    def generated_columns(self, table: str) -> tuple[GeneratedColumn, ...]:
        """The table's generated columns (``generated.py``: the stream may leave them out)."""
        with self._catalog() as connection:
            return generated_columns(connection, self.connector.qualified(table))

    def generated_names(self, table: str) -> frozenset[str]:
        """The names of the table's generated columns (``relations.GeneratedOf``)."""
        return frozenset(column.name for column in self.generated_columns(table))

    @contextlib.contextmanager
    def _catalog(self) -> Iterator[Any]:
        """A connection for catalog queries; one the server closes is a TransientError."""
        with self._lost_connections(), self.connector.connect() as connection:
            yield connection

    @contextlib.contextmanager
    def _lost_connections(self) -> Iterator[None]:
        """``lost_connections``, saying how far the stream got when one is open (the
        pipeline asks the catalog between the stream's messages: a server lost then is lost
        to the stream too)."""
        try:
            with lost_connections(self.connector.where):
                yield
        except TransientError as exc:
            if self._session is None or "slot" in exc.context:
                raise
            raise self._session.lost(exc) from exc


class _Streamed:
    """An open streamed transaction: per subtransaction, the (table, locator) of each change
    yielded, to undo them if the subtransaction aborts."""

    def __init__(self) -> None:
        self.subtransactions: dict[int, list[tuple[str, Any]]] = {}


class _Session:
    """One ``iter_changes`` call: transaction state between stream messages."""

    def __init__(
        self, reader: PostgresLogReader, positions: _Positions, horizon: int | None
    ) -> None:
        self.reader = reader
        self.positions = positions
        self.horizon = horizon  # xids assigned before this session (None: fresh start)
        self.relations = RelationTracker(
            ValueDecoder(reader.lookup_type),
            reader.describe,
            reader.tables,
            reader.generated_names,
        )
        self.generated = GeneratedValues(
            reader.generated_columns,
            reader.connector.connect,
            reader._lost_connections,
            self.relations.decoder,
        )
        self.txid: str | None = None  # the transaction being sent at its commit
        self.begun = False
        self.noted: tuple[object, str | None] | None = None  # the last rewrite message's
        self.stream_xid: int | None = None  # inside a stream block: its transaction
        self.streams: dict[int, _Streamed] = {}
        self.seen: set[int] = set()
        self.sent_ack = 0
        self.sent_at = time.monotonic()

    def run(
        self, connection: Any, held: tuple[str, ...]
    ) -> Iterator[RawChange | TableChanged | Idle]:
        cursor = connection.cursor()
        self._start(cursor)
        for txid in held:
            yield Rollback(txid, self._after())
        try:
            yield from self._loop(connection, cursor)  # its last confirmation: reader._end
        except TransientError as exc:  # e.g. a catalog read while the server shuts down
            if "slot" in exc.context:  # says how far the stream got already
                raise
            raise self.lost(exc) from exc

    def lost(self, exc: TransientError) -> TransientError:
        """A failure of another connection while streaming, with how far the stream got."""
        slot, reached = self.reader.config.slot, position_of(self.positions.boundary).text
        message = f"{exc.message}, while streaming slot {slot!r}; the stream had reached LSN"
        message += f" {reached}"
        return TransientError(message, {**exc.context, "slot": slot, "position": reached})

    def _loop(self, connection: Any, cursor: Any) -> Iterator[RawChange | TableChanged | Idle]:
        idle_s = self.reader.config.idle_s
        quiet_since = time.monotonic()
        while True:
            self._send_status(connection)
            message = self._read(cursor)
            if message is not None:
                yield from self._message(message.payload, message.data_start)
                quiet_since = time.monotonic()
                continue
            if self._between_transactions() and time.monotonic() - quiet_since >= idle_s:
                self._status(connection, self.sent_ack, reply=True)  # answered with the WAL end
                yield Idle(self.positions.idle(int(cursor.wal_end)))
                quiet_since = time.monotonic()
            select.select([connection], [], [], idle_s)

    def _start(self, cursor: Any) -> None:
        import psycopg2

        config = self.reader.config
        options = {
            "proto_version": "2",
            "publication_names": config.publication,
            "streaming": "on",
            "binary": "true",
            "messages": "true",  # the DDL rewrites.py's triggers write (PostgreSQL 14+)
        }
        start = self.positions.boundary
        try:
            self._start_when_free(cursor, start, options)
        except psycopg2.errors.ObjectInUse as exc:
            raise TransientError(
                f"replication slot {config.slot} is in use by another process"
                f" ({str(exc).strip()}); run one"
                " pipeline per slot",
                {"slot": config.slot},
            ) from exc
        except psycopg2.errors.ObjectNotInPrerequisiteState as exc:
            # "can no longer get changes from replication slot": invalidated, WAL removed.
            raise WalRemovedError.at(self.reader.connector.where, config.slot, str(exc)) from exc
        except psycopg2.errors.UndefinedFile as exc:  # requested WAL segment removed
            raise WalRemovedError.at(self.reader.connector.where, config.slot, str(exc)) from exc
        except psycopg2.OperationalError as exc:
            where = self.reader.connector.where
            raise TransientError(
                f"cannot start replication from {where}: {exc}", {"source": where}
            ) from exc
        logger.info("streaming slot %s from %s", config.slot, lsn_to_text(start))

    def _start_when_free(self, cursor: Any, start: int, options: dict[str, str]) -> None:
        """START_REPLICATION, retried while the slot is still held by a session that is
        letting go of it: this reader's sessions end cleanly (``_end``), but another
        process's, or one whose connection broke, lets go once its walsender notices."""
        import psycopg2

        deadline = time.monotonic() + SLOT_RELEASE_S
        while True:
            try:
                cursor.start_replication(
                    slot_name=self.reader.config.slot,
                    decode=False,
                    start_lsn=start,
                    options=options,
                    status_interval=PSYCOPG2_STATUS_OFF,  # see feedback.py
                )
                return
            except psycopg2.errors.ObjectInUse:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.1)

    def _send_status(self, connection: Any) -> None:
        """Confirm a new acknowledgement at once, and report at least every STATUS_S."""
        acknowledged = self.reader._acknowledged
        now = time.monotonic()
        if acknowledged > self.sent_ack or now - self.sent_at >= STATUS_S:
            self._status(connection, acknowledged)
            self.sent_ack, self.sent_at = acknowledged, now

    def _status(self, connection: Any, acknowledged: int, reply: bool = False) -> None:
        """Send a status update; one that cannot be sent means the connection is gone."""
        try:
            send_status(connection, acknowledged, reply)
        except TransientError as exc:
            raise self._closed(exc.message) from exc

    def _read(self, cursor: Any) -> Any:
        """The next stream message, or None when none is waiting.

        Raises:
            ReplicationClosedError: The server closed the connection (``_closed_by_server``).
            TransientError: Another failure of the connection.
            TerminalError: An error the server reported while streaming.
        """
        import psycopg2

        try:
            return cursor.read_message()
        except psycopg2.Error as exc:
            where = self.reader.connector.where
            if _closed_by_server(exc):
                raise self._closed(_why_closed(exc)) from exc
            if isinstance(exc, psycopg2.OperationalError):
                message = f"replication from {where} broke off: {exc}"
                raise TransientError(message, {"source": where}) from exc
            message = f"replication from {where} failed: {exc}"
            raise TerminalError(message, {"source": where}) from exc

    def _closed(self, detail: str) -> ReplicationClosedError:
        """The server closed the stream: at the last boundary (a commit or an idle point),
        every transaction committed up to it was read whole."""
        where, slot = self.reader.connector.where, self.reader.config.slot
        reached = position_of(self.positions.boundary).text
        return ReplicationClosedError.after(where, slot, reached, detail)

    def _between_transactions(self) -> bool:
        return self.txid is None and self.stream_xid is None

    # -- messages ---------------------------------------------------------------------

    def _message(self, payload: bytes, data_start: int) -> Iterator[RawChange | TableChanged]:
        message = pg.parse_message(payload, self.stream_xid is not None)
        handler = _HANDLERS.get(type(message))
        if handler is not None:
            items = handler(self, message, data_start)
            if self.generated.passes(message):
                yield from items
            else:
                yield from self.generated.through(items, message, lambda: self._shape(message))
        if self.generated.waiting and self._between_transactions():
            yield from self.generated.flush()  # a batch holds one transaction's changes at most

    def _shape(self, message: Any) -> tuple[tuple[str, int, int], ...]:
        return self.relations.shape_of(message.relation_id, self.stream_xid)

    def _first_sight(self, xid: int) -> Iterator[RawChange]:
        """Roll back what the buffer may hold of a transaction older than this session."""
        if self.horizon is None or xid in self.seen or not _precedes(xid, self.horizon):
            return
        self.seen.add(xid)
        yield Rollback(str(xid), self._after())

    def _after(self) -> Position:
        return self.positions.after_boundary()

    def _on_begin(self, message: pg.BeginMessage, _: int) -> Iterator[RawChange]:
        yield from self._first_sight(message.xid)
        self.txid, self.begun = str(message.xid), False

    def _on_commit(self, message: pg.CommitMessage, _: int) -> Iterator[RawChange]:
        txid, self.txid = self.txid, None
        assert txid is not None
        yield Commit(txid, self.positions.at(message.end_lsn), message.commit_ts)

    def _on_relation(
        self, message: pg.RelationMessage, _: int
    ) -> Iterator[RawChange | TableChanged]:
        changed = self.relations.on_relation(message, self.stream_xid)
        if changed is not None:  # a DDL changed its columns: what else it did is unknown
            reason = "its columns changed at the source (a DDL logical decoding does not show)"
            yield TableChanged(self._after(), changed, "refresh", "ALTER TABLE", reason)

    def _on_logical_message(
        self, message: pg.LogicalMessage, _: int
    ) -> Iterator[RawChange | TableChanged]:
        if not message.transactional or message.prefix != rewrites.PREFIX:
            return
        table = rewrites.changed_table(message.content)
        # One refresh for the run of messages one ALTER writes: it rewrites each partition
        # of a partitioned table, and each names the root (a set per transaction would also
        # fold a later ALTER of the same table, which costs a refresh at most).
        noted = (self.stream_xid or self.txid, table)
        if table is not None and table in self.reader.tables and noted != self.noted:
            self.noted = noted
            reason = "a DDL changed its stored values and left its columns as they were"
            yield TableChanged(self._after(), table, "refresh", "ALTER", reason)

    def _on_row(self, message: Any, _: int) -> Iterator[RawChange]:
        position = self._after()
        txid = self._current_txid(position)
        if isinstance(message, pg.TruncateMessage):
            changes = list(self.relations.truncates(message, txid, position, self.stream_xid))
        else:
            change = self.relations.row_change(message, txid, position, self.stream_xid)
            changes = [change] if change is not None else []
        if changes and self.stream_xid is None and not self.begun:
            self.begun = True
            yield Begin(txid, position)
        for change in changes:
            self._remember(message.xid, change)
            yield change

    def _current_txid(self, position: Position) -> str:
        """The transaction of a row message; none is an error, never a skip: a change must
        not vanish without a trace (issue 40's rule for every reader)."""
        if self.stream_xid is not None:
            return str(self.stream_xid)
        if self.txid is None:
            raise pg.ProtocolError(
                f"a change outside a transaction at {position.text} (a server or replcheck"
                " bug): the pipeline stops rather than drop it; report it with this position"
            )
        return self.txid

    def _remember(self, subxid: int | None, change: RowChange) -> None:
        """Record a streamed subtransaction's change, to undo it if the subtransaction aborts."""
        if self.stream_xid is None or subxid is None or subxid == self.stream_xid:
            return
        streamed = self.streams[self.stream_xid]
        streamed.subtransactions.setdefault(subxid, []).append((change.table, change.locator))

    def _on_stream_start(self, message: pg.StreamStartMessage, _: int) -> Iterator[RawChange]:
        xid = message.xid
        if xid not in self.streams:
            yield from self._first_sight(xid)
            self.streams[xid] = _Streamed()
            yield Begin(str(xid), self._after())
        self.stream_xid = xid

    def _on_stream_stop(self, message: pg.StreamStopMessage, _: int) -> Iterator[RawChange]:
        self.stream_xid = None
        return iter(())

    def _on_stream_commit(self, message: pg.StreamCommitMessage, _: int) -> Iterator[RawChange]:
        self._end_stream(message.xid, committed=True)
        yield Commit(str(message.xid), self.positions.at(message.end_lsn), message.commit_ts)

    def _on_stream_abort(self, message: pg.StreamAbortMessage, lsn: int) -> Iterator[RawChange]:
        streamed = self.streams.get(message.xid)
        if streamed is None:
            return  # streamed before this session only: the buffer's copy was rolled back
        txid = str(message.xid)
        if message.subxid == message.xid:
            self._end_stream(message.xid, committed=False)
            real = lsn > self.positions.last and lsn % ALIGN == 0
            yield Rollback(txid, self.positions.at(lsn) if real else self._after())
            return
        undone = streamed.subtransactions.pop(message.subxid, [])
        for table, locator in reversed(undone):
            if isinstance(locator, DeferredLocator):
                locator = locator.resolved(table)
            yield PartialRollback(txid, self._after(), table, locator)

    def _end_stream(self, xid: int, committed: bool) -> None:
        self.streams.pop(xid, None)
        self.relations.end_stream(xid, committed)


def _closed_by_server(exc: Exception) -> bool:
    """Whether a failed read means that the server closed the replication connection.

    An error without a SQLSTATE is no error of the server's: at a fast or smart shutdown
    the walsender ends COPY BOTH (psycopg2 then says "no COPY in progress"), and a server
    killed or a connection cut leaves libpq with no message at all ("error with status
    PGRES_COPY_BOTH and no message from the libpq", or "server closed the connection
    unexpectedly"). Terminating the walsender (pg_terminate_backend) sends 57P01.
    """
    return ends_session(getattr(exc, "pgcode", None))


def _why_closed(exc: Exception) -> str:
    """The server's or libpq's reason, or what an error without one means."""
    import psycopg2

    text = str(exc).strip()
    if getattr(exc, "pgcode", None) is None and not isinstance(exc, psycopg2.OperationalError):
        return "it ended the stream: the server was shut down or restarted, or the connection cut"
    return text.splitlines()[0] if text else type(exc).__name__


def _precedes(xid: int, horizon: int) -> bool:
    """Whether 32-bit xid ``xid`` was assigned before ``horizon`` (modulo 2**32, as
    ``TransactionIdPrecedes`` in transam.c compares them)."""
    return ((xid - horizon) & 0xFFFFFFFF) >= 2**31


_HANDLERS: dict[type, Any] = {
    pg.BeginMessage: _Session._on_begin,
    pg.CommitMessage: _Session._on_commit,
    pg.RelationMessage: _Session._on_relation,
    pg.InsertMessage: _Session._on_row,
    pg.UpdateMessage: _Session._on_row,
    pg.DeleteMessage: _Session._on_row,
    pg.TruncateMessage: _Session._on_row,
    pg.LogicalMessage: _Session._on_logical_message,
    pg.StreamStartMessage: _Session._on_stream_start,
    pg.StreamStopMessage: _Session._on_stream_stop,
    pg.StreamCommitMessage: _Session._on_stream_commit,
    pg.StreamAbortMessage: _Session._on_stream_abort,
}
