"""The pipeline: log reader -> transaction buffer -> full-width rebuild -> lake sink.

One loop, on the caller's thread, pulls raw changes from a connector's ``LogReader``:
reading is never ahead of writing, so a slow sink slows reading (back pressure) and memory
is bounded by the buffer's budget plus one batch. Every ``batch_max_events`` events or
``batch_max_seconds`` (and whenever the log is idle), the batch of whole committed
transactions is written to the lake exactly once, the row image store is flushed and a
checkpoint is recorded (``cdc_core.pipeline.checkpoint``), in that order.

Embedding::

    pipeline = Pipeline(config, reader, snapshots)
    pipeline.run()                      # until pipeline.stop(), e.g. from a signal handler
    pipeline.run_until(position)        # or until the lake holds everything up to position
    for transaction in pipeline.iter_transactions(): ...   # or consume what it writes
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from cdc_core.buffer.transaction_buffer import BufferConfig, TransactionBuffer
from cdc_core.capture.events import (
    ABSENT,
    Commit,
    CommittedTransaction,
    PartialRollback,
    RawChange,
    RowChange,
)
from cdc_core.capture.position import Position
from cdc_core.capture.source import (
    AcknowledgesPositions,
    Idle,
    LogReader,
    OmitsDdl,
    ResumesTransactions,
    SnapshotReader,
    TableChanged,
    TableDescription,
)
from cdc_core.ddl.descriptions import TableDescriptions, as_held
from cdc_core.ddl.table_refresh import TableRefresher
from cdc_core.errors import ConfigError, ContractError, TerminalError
from cdc_core.lake.key_moves import KeyMoves
from cdc_core.lake.layout import RefreshMarks
from cdc_core.lake.sink import LakeSink
from cdc_core.lake.target import LakeEvent, Sink, StaleDescriptionError, TableBatch
from cdc_core.lake_location import LakeLocation
from cdc_core.pipeline.checkpoint import Checkpoint, read_checkpoint, write_checkpoint
from cdc_core.pipeline.config import PipelineConfig
from cdc_core.pipeline.ddl_follower import DdlFollower, RunState
from cdc_core.pipeline.initial_load import LoadContext, load_tables
from cdc_core.pipeline.metrics import MetricsTracker, PipelineMetrics
from cdc_core.rebuild.copies import source_key
from cdc_core.rebuild.full_width import (
    NotLoadedYetError,
    RebuildConfig,
    Rebuilder,
)
from cdc_core.rebuild.image_store import ImageStoreCorruptError, RowImageStore
from cdc_core.resync.requests import ResyncRequest, poll_every, read_requests
from cdc_core.resync.requests import remove as remove_request
from cdc_core.state.directory import StateDirectory
from cdc_core.state.lock import StateLock

logger = logging.getLogger(__name__)
RETAIN_EVERY_CHECKPOINTS = 50  # row image retention scans the store: not at every batch


class SourceChangedError(TerminalError):
    """The pipeline's source is another server than the one its positions are of."""


def _unfollowable(checkpoint: Checkpoint, token: str | None, follows: bool) -> str | None:
    """Why a pipeline cannot follow its source to another server (None: it can)."""
    if not follows:
        return "its log reader cannot follow a failover"
    if token is None:
        return (
            "its checkpoint keeps no GTID set for the position it resumes from (only a MySQL"
            " source with gtid_mode=ON has one, once something was streamed after its"
            " snapshot)"
        )
    if checkpoint.loading or checkpoint.refreshes:
        return "a table's snapshot is under way, of the old server"
    return None


EVENTS_PER_CHANGE = 2  # the most lake events one change makes: a key change is a d and a c


@dataclass(frozen=True, slots=True)
class EmittedTransaction:
    """A committed transaction (or a part of a big one) as the lake received it:
    full-width events, in order."""

    txid: str
    commit_pos: Position
    events: tuple[tuple[str, LakeEvent], ...]  # (table, event)
    part: int = 0  # a transaction bigger than a batch arrives in parts 0, 1, ...
    last: bool = True  # ... the last of which says so


TransactionCallback = Callable[[EmittedTransaction], None]


class Pipeline:
    """Replicates a source's captured tables into the lake, exactly once.

    Args:
        config: The pipeline's configuration.
        reader: The source's log reader.
        snapshots: Reads the initial snapshot of tables not loaded yet (``None``: tables
            start empty at the log position the pipeline starts from).
        tables: The captured tables (``None``: the filter's accept patterns; a pipeline
            with the ``accept`` policy needs the source's table list here).
        on_transaction: Called with each transaction once it is durable in the lake.
        sink: Where it writes (default: the lake of ``config.lake``).
    """

    def __init__(
        self,
        config: PipelineConfig,
        reader: LogReader,
        snapshots: SnapshotReader | None = None,
        *,
        tables: list[str] | None = None,
        on_transaction: TransactionCallback | None = None,
        sink: Sink | None = None,
    ) -> None:
        self.config = config
        self.reader = reader
        selected = config.tables.select(tables if tables is not None else _listed(config))
        self._shared = RunState(Checkpoint(config.name, None, None, None), selected)
        self._callbacks = [on_transaction] if on_transaction else []
        self._stop = threading.Event()
        self._metrics = MetricsTracker()
        self._sink = sink if sink is not None else LakeSink(_lake_of(config), config.name)
        self._descriptions = TableDescriptions(reader, config.tables.ignore_columns)
        self._ddl = DdlFollower(config, reader, self._shared, self._descriptions, self._sink, self)
        self.snapshots = snapshots
        self._pending: dict[str, TableBatch] = {}
        self._pending_transactions: list[EmittedTransaction] = []
        self._pending_events = 0
        self._batch_started = time.monotonic()
        self._last_commit: Position | None = None
        self._written_upto: Position | None = None  # the lake may be ahead of the checkpoint
        self._written_marks = RefreshMarks()  # the refresh marks the progress file holds
        self._refresher = TableRefresher((), {})  # the checkpoint's, once the loop starts
        self._checkpoints = 0
        self._resync_polled = 0.0  # see _take_resync_requests
        self._resync_taken: list[ResyncRequest] = []  # removed once a checkpoint holds them

    # -- public API -------------------------------------------------------------------

    @property
    def tables(self) -> list[str]:
        """The captured tables (a table the accept policy or a DDL adds joins them)."""
        return self._shared.tables

    @property
    def snapshots(self) -> SnapshotReader | None:
        """Reads a table's rows for an initial load or a refresh."""
        return self._ddl.snapshots

    @snapshots.setter
    def snapshots(self, reader: SnapshotReader | None) -> None:
        self._ddl.snapshots = reader

    def add_tables(self, tables: Sequence[str]) -> None:
        """Capture more tables without stopping: each is loaded by a table refresh at the
        next quiet moment of the log (thread-safe)."""
        self._ddl.add_tables(tables)

    def stop(self) -> None:
        """Ask the loop to finish: it flushes, checkpoints and returns (thread-safe)."""
        self._stop.set()

    def metrics(self) -> PipelineMetrics:
        """Events/s, lag, open transactions and spilled bytes, as of now."""
        return self._metrics.snapshot()

    def run(self) -> Position | None:
        """Replicate until ``stop()``; returns the position the lake has reached."""
        return self._run(None)

    def run_until(self, position: Position) -> Position | None:
        """Replicate until everything committed at or before ``position`` is in the lake."""
        return self._run(position)

    def run_until_caught_up(self) -> Position | None:
        """Replicate everything committed at the source when called, then return."""
        return self._run(self.end_position())

    def end_position(self) -> Position:
        """The log's end now, as this pipeline's positions spell it: its reader is told
        where the pipeline resumes first (after a failover, the new server's positions
        are ordered after the old one's: ``_checked_source``)."""
        checkpoint = read_checkpoint(self.config.state_dir)
        if checkpoint is not None and checkpoint.pipeline == self.config.name:
            self._checked_source(checkpoint)
        return self.reader.end_position()

    def iter_transactions(self, until: Position | None = None) -> Iterator[EmittedTransaction]:
        """Run on this thread, yielding each transaction once it is durable in the lake."""
        ready: list[EmittedTransaction] = []
        self._callbacks.append(ready.append)
        for _ in self._iter_flushes(until):
            yield from ready
            ready.clear()

    # -- the loop ---------------------------------------------------------------------
    # flush, record_checkpoint, batch_full, rebuild_config and add_pending are also what the
    # DDL follower asks of the loop (``ddl_follower.LoopHooks``).

    def _run(self, until: Position | None) -> Position | None:
        reached = None
        for position in self._iter_flushes(until):
            reached = position
        return reached

    def _iter_flushes(self, until: Position | None) -> Iterator[Position | None]:
        """The loop; yields the lake position after each durable batch."""
        with StateLock(self.config.state_dir, self.config.name):  # one run per state_dir
            checkpoint = read_checkpoint(self.config.state_dir) or Checkpoint(
                self.config.name, None, None, None
            )
            self._check_owner(checkpoint)
            checkpoint = self._checked_source(checkpoint)
            record = getattr(self._sink, "record_source", None)
            if callable(record):  # a lake's progress file names the server
                record(checkpoint.source)
            with self._open_store() as store:
                self._store = store
                checkpoint = load_tables(self._load_context(), self._shapes_before_load(checkpoint))
                yield from self._stream(checkpoint, until)

    def _open_store(self) -> RowImageStore:
        """The row image store; one cut short names the tables a new snapshot must load."""
        try:
            return RowImageStore(StateDirectory(self.config.state_dir).images)
        except ImageStoreCorruptError as exc:
            tables = ", ".join(sorted(self.tables))
            raise ImageStoreCorruptError(
                f"{exc.message} (tables: {tables}; state directory: {self.config.state_dir})",
                exc.context,
            ) from exc

    def _load_context(self) -> LoadContext:
        return LoadContext(
            self.config,
            self.reader,
            self.snapshots,
            self.tables,
            self._sink,
            self._store,
            self.describe,
            self._metrics,
        )

    def _shapes_before_load(self, checkpoint: Checkpoint) -> Checkpoint:
        """Record the shape of each table not loaded yet *before* its snapshot: a DDL right
        after the snapshot would otherwise be in the recorded shape, and a quiet log would
        never show it (a DDL before the snapshot only costs one needless refresh)."""
        self._shared.checkpoint = checkpoint
        for table in self.tables:
            if table not in checkpoint.shapes and table not in checkpoint.loaded:
                self._ddl.record_shape(table)
        return self._shared.checkpoint

    def _stream(self, checkpoint: Checkpoint, until: Position | None) -> Iterator[Position | None]:
        for table in self.tables:
            self.describe(table)  # fails early on a missing table; keys for the rebuild
        self._shared.checkpoint = checkpoint
        unseen = [t for t in self.tables if t not in checkpoint.shapes]
        for table in unseen:
            self._ddl.record_shape(table)  # loaded from the source as it is now
        if unseen and isinstance(self.reader, OmitsDdl):
            write_checkpoint(self.config.state_dir, self._shared.checkpoint)
        checkpoint = self._shared.checkpoint
        buffer = self._open_buffer(checkpoint)
        if isinstance(self.reader, ResumesTransactions):
            self.reader.resume_transactions([info.txid for info in buffer.open_transactions()])
        self._rebuilder = Rebuilder(self._store, self.rebuild_config(), self._ddl.on_inexact)
        self._refresher = TableRefresher(checkpoint.refreshes, checkpoint.stale)
        self._ddl.attach(self._store, self._refresher, self._rebuilder)
        self._written_marks = self._marks()
        self._ddl.tell_rebuilder()
        self._shared.checkpoint, self._buffer = checkpoint, buffer
        self._take_resync_requests(now=True)
        start = buffer.safe_restart_position() or checkpoint.resume_at or checkpoint.lake_position
        if self._caught_up(until):
            # Caught up already: only the position reached is recorded (see flush). The
            # catalog is still checked: a run stopped before its periodic check may have
            # read past a DDL the log does not show.
            yield from self.flush(checkpoint.lake_position)
            self._metrics.caught_up()
            yield checkpoint.lake_position
            return
        logger.info("pipeline %s reading the log from %s", self.config.name, start)
        self._ddl.fetch_chunk()
        for item in self.reader.iter_changes(start):
            if type(item) is RowChange:  # the common case: the buffer holds it until its commit
                self._feed(item)
                if self._stop.is_set():
                    break
                continue
            if isinstance(item, TableChanged):
                yield from self._ddl.on_table_changed(item)
                continue
            if isinstance(item, Idle):
                yield from self._on_idle(item)
                if self._stop.is_set():
                    break  # a quiet log yields only Idle: stop() must be honoured here too
                if self._done(item.position, until) and not self._ddl.schemas_changed(item, True):
                    break
                continue
            if isinstance(item, Commit):  # a chunk read before this commit goes first
                yield from self._ddl.refresh_upto(item.position.value - 1)
            for transaction in self._feed(item):
                # Keep batches bounded, and write a transaction that may need parts alone:
                # a part's commit records only its own transaction's position.
                most = self._pending_events + EVENTS_PER_CHANGE * transaction.change_count
                if self._pending_events and most > self.config.batch_max_events:
                    yield from self.flush(None, checkpoint=False)
                parted = self._collect(transaction)
                if parted:  # its last part goes now: a marker covers only the latest part
                    yield from self.flush(None)
                yield from self._ddl.reload_stale()
            if isinstance(item, Commit):
                yield from self._ddl.refresh_upto(item.position.value)
                self._take_resync_requests()
                if self.batch_full() or self._done(item.position, until):
                    yield from self.flush(None)
            if self._stop.is_set() or self._caught_up(until):
                break
        self._flush_last()
        if _reached(self._shared.checkpoint.lake_position, until):
            self._metrics.caught_up()  # until was the log's end: no lag as of then
        yield self._shared.checkpoint.lake_position

    def _caught_up(self, until: Position | None) -> bool:
        """The lake has reached ``until`` and the catalog shows no DDL the log does not
        (``_schemas_changed``: a run ending on a commit does not pass an idle check)."""
        reached = self._shared.checkpoint.lake_position
        return self._done(reached, until) and not self._ddl.schemas_changed(Idle(reached), True)

    def _done(self, position: Position | None, until: Position | None) -> bool:
        """``until`` is reached and no table refresh is under way."""
        return _reached(position, until) and not self._refresher.active

    def _on_idle(self, idle: Idle) -> Iterator[Position | None]:
        """Tables added meanwhile start loading, tables whose columns changed without DDL in
        the log are refreshed, and a held chunk the stream passed goes."""
        if idle.position is not None:
            self._ddl.take_added_tables(idle.position)
            self._take_resync_requests()
            if self._pending_events:  # a table the check loads again goes to new lake tables
                yield from self.flush(None)
            self._ddl.schemas_changed(idle, False)
            yield from self._ddl.refresh_upto(idle.position.value)
        yield from self.flush(idle.position)
        if idle.position is not None and not self._pending_events:
            self._metrics.caught_up()  # at the log's end with everything read written

    def _take_resync_requests(self, *, now: bool = False) -> None:
        """Re-sync requests the lake holds for tables captured here become keyed refreshes
        (``cdc_core.resync.requests``): looked for every ``poll_every`` seconds, or ``now``."""
        lake = self.config.lake
        if lake is None or (not now and time.monotonic() - self._resync_polled < poll_every(lake)):
            return
        self._resync_polled = time.monotonic()
        taken = {request.path for request in self._resync_taken}
        for request in read_requests(lake, self.tables):
            if request.path not in taken:
                self._ddl.refresh_keys(request)
                self._resync_taken.append(request)

    def add_pending(
        self, txid: str, position: Position, table: str, events: list[LakeEvent]
    ) -> None:
        """Pending events of a pseudo-transaction at ``position`` (the stream has passed it)."""
        self._batch_of(table).events.extend(events)
        self._pending_events += len(events)
        self._last_commit = max(position, self._last_commit or position)
        emitted = tuple((table, event) for event in events)
        self._pending_transactions.append(EmittedTransaction(txid, position, emitted))

    def _moved_under_refresh(self, change: RowChange) -> None:
        """A row of a table under refresh moved to another key: the key may lie behind the
        chunks' cursor while the row was not read yet (its image predates the DDL), so it is
        read once more at the refresh's end."""
        if change.op != "u" or self._refresher.state_of(change.table) is None:
            return
        key = source_key(self.describe(change.table).key)  # re-read from the source
        if not key or change.before is None or change.after is None:
            return
        new = tuple(change.after[column] for column in key)
        old = tuple(change.before[column] for column in key)
        if new != old:
            self._refresher.moved(change.table, old, new)

    def _not_loaded_yet(self, change: RowChange) -> None:
        """A loading refresh dropped ``change``; the key its row may have moved to, if the
        change carries it (else the row kept its key, which a later range holds), is read
        once more at the refresh's end."""
        key = source_key(self.describe(change.table).key)  # re-read from the source
        after = change.after or {}
        if isinstance(change.locator, tuple) and len(change.locator) == len(key):
            moved = tuple(after.get(c, old) for c, old in zip(key, change.locator, strict=True))
        else:
            moved = tuple(after.get(c, ABSENT) for c in key)
        if key and all(value is not ABSENT for value in moved):
            self._refresher.remember(change.table, moved)

    def _feed(self, item: RawChange) -> list[CommittedTransaction]:
        """Feed one raw change of a captured table; returns what it commits."""
        if isinstance(item, (RowChange, PartialRollback)):
            if not self.config.tables.captures(item.table):
                return []
            if isinstance(item, RowChange):
                item = self.config.tables.strip(item)
        return self._buffer.feed(item)

    def _flush_last(self) -> None:
        """Write what is pending at the position of the last commit fed."""
        for _ in self.flush(None):
            pass

    def _open_buffer(self, checkpoint: Checkpoint) -> TransactionBuffer:
        buffer_config = BufferConfig(
            self.config.memory_budget_bytes,
            StateDirectory(self.config.state_dir).spill,
            self.config.max_transaction_age,
            self.config.max_transaction_changes,
        )
        if checkpoint.buffer is None:
            return TransactionBuffer(buffer_config)
        return TransactionBuffer.restore(buffer_config, checkpoint.buffer)

    def _checked_source(self, checkpoint: Checkpoint) -> Checkpoint:
        """``checkpoint`` with the log's server recorded (a reader that can tell it:
        ``source_identity``). The reader is told where the pipeline resumes and the token
        kept for it (``resume``). On another server (a failover to a replica) the
        positions held are meaningless: a reader that can follow it there
        (``follow_failover``: MySQL by GTID set) does, else it is refused.

        Raises:
            SourceChangedError: The source is another server than the one recorded, and
                the pipeline cannot go on there.
        """
        start = checkpoint.buffer.high_water if checkpoint.buffer is not None else None
        start = start or checkpoint.resume_at or checkpoint.lake_position
        kept = checkpoint.resume_token
        token = kept[1] if kept is not None and start is not None and kept[0] == start else None
        resume = getattr(self.reader, "resume", None)
        if callable(resume):
            resume(start, token)
        identify = getattr(self.reader, "source_identity", None)
        found = identify() if callable(identify) else None
        if found is None or checkpoint.source == found:
            return checkpoint
        if checkpoint.source is None:
            return replace(checkpoint, source=found)
        follow = getattr(self.reader, "follow_failover", None)
        why = _unfollowable(checkpoint, token, callable(follow))
        if why is None and start is not None and token is not None and callable(follow):
            follow(start, token, checkpoint.source)
            return replace(checkpoint, source=found)
        raise SourceChangedError(
            f"pipeline {self.config.name}: its positions are of the log of {checkpoint.source},"
            f" but the source now is {found} (a failover to a replica, or another URL):"
            f" positions of one server's log mean nothing on another's, and {why}; replicate"
            " from a new snapshot (a new pipeline name, or an empty state_dir and lake)",
            {"recorded": checkpoint.source, "found": found},
        )

    def _resume_token(self, position: Position) -> tuple[Position, str] | None:
        """The reader's token for resuming at ``position`` elsewhere (``resume_token``)."""
        tell = getattr(self.reader, "resume_token", None)
        token = tell(position) if callable(tell) else None
        return None if token is None else (position, token)

    def rebuild_config(self) -> RebuildConfig:
        keys = self._descriptions.keys()
        return RebuildConfig(
            key_columns=keys,
            shared_keys=self._descriptions.shared_keys(),
            fetch_missing=self.config.fetch_missing,
            fetch_unavailable_by_table=self.config.fetch_unavailable,
        )

    def _collect(self, transaction: CommittedTransaction) -> bool:
        """Rebuild a committed transaction's changes and add them to the pending batch.

        A transaction bigger than a batch is written in parts as it streams from the buffer's
        spill files, so memory stays bounded whatever its size (``LakeSink.write_part``).
        Returns True when it was, and its last part is pending.
        """
        self._last_commit = transaction.commit_pos
        events: list[tuple[str, LakeEvent]] = []
        in_lake = self._shared.checkpoint.lake_position
        part, total = 0, 0
        moves = KeyMoves(transaction, self._descriptions.key_of)
        for committed in transaction.changes:
            table = committed.change.table
            loaded_at = self._shared.checkpoint.loaded.get(table)
            if loaded_at is not None and transaction.commit_pos <= loaded_at:
                continue  # in the table's initial snapshot, and its image store
            if self._ddl.shaped_before_ddl(
                committed.change, transaction.commit_pos, moves.key(table)
            ):
                continue  # a refresh after it reads its effect from the source
            try:
                change = self._rebuilder.rebuild(committed, transaction.commit_pos)
            except NotLoadedYetError:
                self._not_loaded_yet(committed.change)  # its chunk, or a last read, has it
                continue
            if change.op == "u":
                self._moved_under_refresh(change)
            if self._ddl.reads_pending(table):
                moved = (committed.change.locator, change.locator)
                self._ddl.check_reads(table, moved, transaction.commit_pos)
            if in_lake is not None and transaction.commit_pos <= in_lake:
                continue  # re-read after a restart: the lake has it
            for event in moves.events(committed.change, change, committed.seq):
                self._batch_of(table).events.append(event)
                events.append((table, event))
                self._pending_events += 1
                total += 1
            # Both events of a key move share a seq: a part never ends between them.
            if len(events) >= self.config.batch_max_events:
                self._write_part(transaction, events, part)
                events, part = [], part + 1
                moves.forget_keys()
        emitted = EmittedTransaction(transaction.txid, transaction.commit_pos, tuple(events), part)
        self._pending_transactions.append(emitted)
        self._metrics.committed(transaction, total)
        return part > 0

    def _write_part(
        self, transaction: CommittedTransaction, events: list[tuple[str, LakeEvent]], part: int
    ) -> None:
        """Write the pending part of a big transaction (nothing else is pending then: its
        commits record only this transaction's position, so a restart would write another
        transaction's events in it again; seed 5161 of the Oracle generative tester)."""
        others = self._pending_events - len(events)
        if others:
            raise ContractError(
                f"a part of transaction {transaction.txid} would carry {others} event(s) of"
                " other transactions"
            )
        self._write_batch_with(
            lambda: self._sink.write_part(self._pending.values(), transaction.commit_pos)
        )
        self._store.flush()  # keeps the store's write transaction small too
        emitted = EmittedTransaction(
            transaction.txid, transaction.commit_pos, tuple(events), part, last=False
        )
        for callback in self._callbacks:
            callback(emitted)
        self._pending, self._pending_events = {}, 0

    def _batch_of(self, table: str) -> TableBatch:
        batch = self._pending.get(table)
        if batch is None:
            if table not in self.tables:
                self.tables.append(table)  # a new table the accept policy captures
            batch = self._pending[table] = TableBatch(self.describe(table))
        return batch

    def describe(self, table: str) -> TableDescription:
        """The table's lake description (without ignored columns)."""
        return self._descriptions.get(table)

    def batch_full(self) -> bool:
        age = time.monotonic() - self._batch_started
        return self._pending_events >= self.config.batch_max_events or (
            age >= self.config.batch_max_seconds
        )

    def flush(
        self, idle_at: Position | None, *, checkpoint: bool = True
    ) -> Iterator[Position | None]:
        """Write the pending batch, flush the store, checkpoint; yields the lake position.

        Without ``checkpoint`` (the buffer has emitted a transaction not consumed yet, so its
        state may not be recorded) the batch is written and the checkpoint waits.
        """
        position = self._flush_position(idle_at)
        previous = self._written_upto or self._shared.checkpoint.lake_position
        # A refresh chunk may arrive at the position already written (a quiet source); one
        # that ends a refresh without an event still changes the marks, which must be written.
        # The first flush of a run writes even an empty batch: the sink records the position
        # the pipeline reached (a database target's progress row), which an initial load with
        # no change after it never would.
        unchanged = not self._pending_events and self._marks() == self._written_marks
        unchanged = unchanged and self._written_upto is not None
        behind = previous is not None and (
            position is not None and (position < previous or (position == previous and unchanged))
        )
        if position is None or behind:
            recorded = self._shared.checkpoint.lake_position
            if checkpoint and position is not None and (recorded is None or position > recorded):
                self.record_checkpoint(position)  # written before, not yet checkpointed
            return
        written = self._write_batch(position)
        self._store.flush()
        self._written_upto = position
        if checkpoint:
            self.record_checkpoint(position)
        self._metrics.flushed(written, position, self._buffer)
        for transaction in self._pending_transactions:
            for callback in self._callbacks:
                callback(transaction)
        self._pending, self._pending_transactions, self._pending_events = {}, [], 0
        self._batch_started = time.monotonic()
        yield position

    def _flush_position(self, idle_at: Position | None) -> Position | None:
        """The position the lake reaches with this batch: the last commit, or the idle point.

        At an idle point every transaction committed up to it has been read; a transaction
        still open there commits after it (commit_pos is past its commit record), so the
        lake is complete up to the idle point even while transactions are open.
        """
        last = self._last_commit
        if idle_at is not None:
            return max(idle_at, last) if last is not None else idle_at
        return last

    def _write_batch(self, position: Position) -> int:
        """Write the pending batch as reaching ``position``."""
        tables, marks = self.tables, self._marks()
        written = self._write_batch_with(
            lambda: self._sink.write(self._pending.values(), position, tables, marks)
        )
        self._written_marks = marks
        return written

    def _marks(self) -> RefreshMarks:
        """Where the lake is not exact: tables under refresh, windows of finished ones, and
        tables whose changes since a position were dropped for a reload about to begin (the
        batch written before it must not show them exact: ``_reload_stale``)."""
        refreshing = {**self._ddl.dropped(), **self._refresher.refreshing()}
        return RefreshMarks(refreshing, dict(self._refresher.stale))

    def _write_batch_with(self, write: Callable[[], int]) -> int:
        """Run ``write``; once more with fresh descriptions if the batch did not fit them.
        When none fits, the sink's refusal naming the column and the fix is raised."""
        for batch in self._pending.values():
            rows = (event.row for event in batch.events)
            batch.description = self._descriptions.fitting(batch.description.table, rows)
        try:
            return write()
        except StaleDescriptionError as exc:
            refusal = exc.refusal
            batch = self._pending[exc.table]
            carried = {column for event in batch.events for column in event.row}
            batch.description = self._descriptions.refresh(exc.table, carried)
        try:
            return write()
        except StaleDescriptionError as exc:
            refusal = refusal or exc.refusal
            # The source is ahead of the log: a column was renamed and one of its old name
            # added with another type since these changes, or dropped and added again (seed
            # 551). They were made in the shape the lake holds (its DDL comes later in the
            # log and reloads the table then).
            batch = self._pending[exc.table]
            if self._drop_superseded(batch):
                return write()
            held = self._sink.held_schema(exc.table)
            if held is None:
                raise (refusal or exc) from None
            batch.description = as_held(batch.description, held)
        try:
            return write()
        except StaleDescriptionError as exc:
            raise (refusal or exc.refusal or exc) from None

    def _drop_superseded(self, batch: TableBatch) -> bool:
        """Drop the changes a loading refresh's chunks supersede, if the batch fits then.

        The lake tables of a table being loaded again (its lake could not hold a column's
        new type) are in the source's new shape; changes logged before the DDL that made it
        arrive in the old shape, which they cannot hold. Every chunk is read in the new shape,
        after that DDL and so after those changes: each chunk holds their effect. Only
        changes before the first chunk go (later ones may touch rows read already)."""
        table = batch.description.table
        state = self._refresher.state_of(table)
        if state is None or not state.loading:
            return False
        chunks = [event.commit_pos for event in batch.events if event.op == "r"]
        if not chunks and state.rows:
            return False  # chunks were written: these changes are newer than them
        first = min(chunks, default=None)
        kept = [
            e for e in batch.events if e.op == "r" or (first is not None and e.commit_pos >= first)
        ]
        if len(kept) == len(batch.events):
            return False
        logger.info(
            "table %s: %d changes in its shape before a DDL dropped; its reload holds them",
            table, len(batch.events) - len(kept),
        )  # fmt: skip
        batch.events = kept
        batch.description = self._descriptions.get(table)
        return True

    def record_checkpoint(self, position: Position) -> None:
        state = self._buffer.checkpoint_state()
        resume_at = self._buffer.safe_restart_position() or position
        checkpoint = replace(
            self._shared.checkpoint,
            lake_position=position,
            resume_at=resume_at,
            resume_token=self._resume_token(resume_at),
            buffer=state,
            refreshes=tuple(self._refresher.states),
            stale=dict(self._refresher.stale),
            last_commit=self._metrics.newest_commit or self._shared.checkpoint.last_commit,
        )
        write_checkpoint(self.config.state_dir, checkpoint)
        for request in self._resync_taken:  # the checkpoint holds their refreshes now
            remove_request(request)
        self._resync_taken.clear()
        self._buffer.release_checkpoint(state)
        self._shared.checkpoint = checkpoint
        if isinstance(self.reader, AcknowledgesPositions):
            self.reader.acknowledge(position)
        self._checkpoints += 1
        if self._checkpoints % RETAIN_EVERY_CHECKPOINTS == 0:
            # A restart re-reads from this durable checkpoint at the earliest, and rebuilds
            # only transactions committed after its position: older images are not needed.
            self._store.retain_from(position)

    def _check_owner(self, checkpoint: Checkpoint) -> None:
        if checkpoint.pipeline != self.config.name:
            raise ConfigError(
                f"state directory {self.config.state_dir} belongs to pipeline"
                f" {checkpoint.pipeline!r}, not {self.config.name!r}; give each pipeline its"
                " own state_dir"
            )


def _lake_of(config: PipelineConfig) -> Path | LakeLocation:
    if config.lake is None:
        raise ConfigError(f"pipeline {config.name} writes to a database: pass its sink")
    return config.lake


def _listed(config: PipelineConfig) -> list[str]:
    if config.tables.policy == "accept":
        raise ConfigError(
            f"pipeline {config.name} uses the accept policy: pass the source's tables"
        )
    return list(config.tables.accept)


def _reached(position: Position | None, until: Position | None) -> bool:
    return until is not None and position is not None and position >= until
