"""The pipeline's side of DDL: table refreshes (``cdc_core.ddl.table_refresh``), tables added
while running, and the schema checks of logs that do not show DDL.

``DdlFollower`` is a collaborator of ``cdc_core.pipeline.loop.Pipeline``: one concern, how
the pipeline follows the source's DDL, with what it shares with the loop named in its
constructor (``RunState``, ``LoopHooks``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from cdc_core.capture.events import ABSENT, RowChange
from cdc_core.capture.position import Position
from cdc_core.capture.source import (
    CapturesTables,
    Idle,
    LogReader,
    OmitsDdl,
    SnapshotReader,
    TableChanged,
    TableChunk,
    TableDescription,
)
from cdc_core.ddl.descriptions import TableDescriptions
from cdc_core.ddl.table_refresh import REFRESH_SEQ_BASE, RefreshState, TableRefresher, iter_rows
from cdc_core.errors import ConfigError, TerminalError
from cdc_core.lake.target import LakeEvent, Sink
from cdc_core.pipeline.checkpoint import Checkpoint
from cdc_core.pipeline.config import PipelineConfig
from cdc_core.rebuild.copies import COPY, has_copies, source_key, source_locator, with_copy
from cdc_core.rebuild.full_width import EqualKeysError, RebuildConfig, Rebuilder
from cdc_core.rebuild.image_store import RowImageStore, to_locator_bytes
from cdc_core.resync.requests import ResyncRequest

logger = logging.getLogger("cdc_core.pipeline.loop")
SCHEMA_CHECK_S = 10.0  # how often a log without DDL has its tables' columns compared


@dataclass
class RunState:
    """What a run's loop and its DDL follower share: the checkpoint as it is being built
    (replaced, never changed in place) and the captured tables (a list both extend)."""

    checkpoint: Checkpoint
    tables: list[str]


class LoopHooks(Protocol):
    """What the DDL follower asks of the pipeline's loop."""

    def flush(self, idle_at: Position | None) -> Iterator[Position | None]:
        """Write the pending batch and checkpoint; yields the lake position."""
        ...

    def record_checkpoint(self, position: Position) -> None:
        """Record the run's checkpoint as reaching ``position``."""
        ...

    def batch_full(self) -> bool:
        """Whether the pending batch should be written now."""
        ...

    def rebuild_config(self) -> RebuildConfig:
        """The rebuild's configuration from the tables' current descriptions."""
        ...

    def add_pending(
        self, txid: str, position: Position, table: str, events: list[LakeEvent]
    ) -> None:
        """Add a pseudo-transaction's events (a refresh chunk) to the pending batch."""
        ...


class DdlFollower:
    """How a pipeline follows its source's DDL (see the module doc).

    It shares the run's checkpoint and captured tables (``RunState``) with the pipeline's
    loop, writes through the loop's ``flush`` and ``record_checkpoint``, and adds a
    refresh's rows to the loop's batch with ``add_pending``. The row image store, the
    refresher and the rebuilder exist once a run starts: ``attach``.
    """

    def __init__(
        self,
        config: PipelineConfig,
        reader: LogReader,
        run: RunState,
        descriptions: TableDescriptions,
        sink: Sink,
        loop: LoopHooks,
    ) -> None:
        self.config = config
        self.reader = reader
        self.snapshots: SnapshotReader | None = None
        self._shared = run
        self._descriptions = descriptions
        self._sink = sink
        self._loop = loop
        self._added: list[str] = []  # tables add_tables() asked for, not started yet
        self._added_lock = threading.Lock()
        self._schema_checked: tuple[float, Position | None] = (0.0, None)  # at first idle
        self._reads: dict[str, list[tuple[Hashable, Position, Position]]] = {}  # on_inexact
        self._stale: dict[str, Position] = {}  # see shaped_before_ddl

    def attach(self, store: RowImageStore, refresher: TableRefresher, rebuilder: Rebuilder) -> None:
        """The parts a run opens: the row image store, the refresher, the rebuilder."""
        self._store, self._refresher, self._rebuilder = store, refresher, rebuilder

    def reads_pending(self, table: str) -> bool:
        """Whether rows of ``table`` were read ahead of the stream (``on_inexact``)."""
        return bool(self._reads.get(table))

    def dropped(self) -> dict[str, int]:
        """Tables whose changes since a position were dropped for a reload about to begin
        (``shaped_before_ddl``), with that position."""
        return {table: since.value for table, since in self._stale.items()}

    def schemas_changed(self, idle: Idle, now: bool) -> bool:
        """For a log without DDL (``OmitsDdl``): every ``SCHEMA_CHECK_S``, or ``now``,
        compare each table's shape with the one last seen; refresh those that changed. The
        shape was last seen unchanged at the previous check, so a refresh counts from there."""
        due = now or time.monotonic() - self._schema_checked[0] >= SCHEMA_CHECK_S
        if not isinstance(self.reader, OmitsDdl) or idle.position is None or not due:
            return False
        since = self._schema_checked[1] or self._shared.checkpoint.lake_position or idle.position
        self._schema_checked = (time.monotonic(), idle.position)
        changed = False
        for table in list(self._shared.tables):
            seen = self._shared.checkpoint.shapes.get(table)
            if seen is not None and seen != self.reader.table_shape(table):
                self._start_refresh(table, since, "its definition changed at the source")
                changed = True
        # A table created since, with no row yet, shows nowhere in such a log: any row it
        # had up to here would have come through the log and made it known.
        for table in self._created_without_rows(self.reader):
            self._start_refresh(table, idle.position, "created at the source")
            changed = True
        return changed

    def _created_without_rows(self, reader: OmitsDdl) -> list[str]:
        known = set(self._shared.tables)
        return [
            t for t in reader.source_tables() if t not in known and self.config.tables.captures(t)
        ]

    def record_shape(self, table: str) -> None:
        """Remember the table's shape as the lake now follows it (``OmitsDdl`` logs)."""
        if isinstance(self.reader, OmitsDdl):
            shapes = {**self._shared.checkpoint.shapes, table: self.reader.table_shape(table)}
            self._shared.checkpoint = replace(self._shared.checkpoint, shapes=shapes)

    def add_tables(self, tables: Sequence[str]) -> None:
        """Capture more tables without stopping: each is loaded by a table refresh at the
        next quiet moment of the log (thread-safe)."""
        with self._added_lock:
            self._added.extend(tables)

    def take_added_tables(self, position: Position) -> None:
        with self._added_lock:
            added, self._added = self._added, []
        for table in added:
            if table not in self._shared.tables:
                self._start_refresh(table, position, "added to the running pipeline")

    def on_table_changed(self, change: TableChanged) -> Iterator[Position | None]:
        """Act on a DDL the connector classified (``TableChanged``), once."""
        table = change.table
        seen = self._shared.checkpoint.ddl_seen.get(table)
        if not self.config.tables.captures(table) or (seen and change.position <= seen):
            return  # not captured (the reader may see every table's DDL), or acted on before
        if change.action == "stop":
            raise TerminalError(
                f"{change.reason} (table {table}, at {change.position}: {change.statement})",
                {"table": table, "position": change.position.text},
            )
        self.check_reads(table, (), change.position)
        yield from self._loop.flush(None)  # what came before the DDL, under the old schema
        logger.info(
            "DDL on %s at %s (%s): %s", table, change.position, change.action, change.statement
        )
        ddl_seen = {**self._shared.checkpoint.ddl_seen, table: change.position}
        self._shared.checkpoint = replace(self._shared.checkpoint, ddl_seen=ddl_seen)
        # A table without a key is located by all its columns: new columns move every row's
        # locator, and its copies are numbered again by a refresh (cdc_core.rebuild.copies).
        numbered = table in self._shared.tables and has_copies(self._descriptions.get(table).key)
        if change.action == "schema" and table in self._shared.tables and not numbered:
            self._follow_schema(table, change)
        else:
            self._start_refresh(table, change.position, change.reason or change.statement)

    def _follow_schema(self, table: str, change: TableChanged) -> None:
        """A value-preserving DDL: the lake's tables take the new columns now. A column the
        lake holds with a type that cannot hold the new one's values (dropped and added
        again with another type: mariadb-full soak seed 6054, a DATETIME back as an INT)
        needs new lake tables: the table is loaded again."""
        held_key = self._shared.checkpoint.keys.get(table)
        description = self._descriptions.refresh(table, set())
        # A DDL that keeps every value may still move the key (MariaDB promotes the first
        # UNIQUE key of NOT NULL columns of a table without a primary key: dropping it, or
        # making its column nullable, leaves the table keyless): loaded again under it.
        moved_key = held_key is not None and held_key != description.key
        if moved_key or not self._sink.holds(description):
            self._start_refresh(table, change.position, change.reason or change.statement)
            return
        position = self._shared.checkpoint.lake_position
        if position is not None:
            self._sink.follow_schema(description, position)
            self._loop.record_checkpoint(position)

    def _start_refresh(self, table: str, since: Position, reason: str) -> None:
        """Begin re-reading ``table`` (see ``cdc_core.ddl.table_refresh``)."""
        if table not in self._shared.tables:
            self._shared.tables.append(table)
            if isinstance(self.reader, CapturesTables):
                self.reader.capture([table])
        before = self._descriptions.known(table)
        description = self._descriptions.refresh(table, set())
        self.record_shape(table)
        lake_key = self._shared.checkpoint.keys.get(
            table, before.key if before else description.key
        )
        moved_key = lake_key != description.key or self._lake_keys_otherwise(description)
        # A table still being loaded holds rows the log wrote in the shape before this DDL,
        # which the load's end cannot tell from its own: it is loaded again from scratch.
        under_load = (current := self._refresher.state_of(table)) is not None and current.loading
        retire = moved_key or under_load or not self._sink.holds(description)
        loading = retire or not self._sink.exists(table)
        if loading:
            self._store.truncate(table, since, 0)  # images of another lake generation
            loaded = {**self._shared.checkpoint.loaded, table: since}
            self._shared.checkpoint = replace(self._shared.checkpoint, loaded=loaded)
        keys = {**self._shared.checkpoint.keys, table: description.key}
        self._shared.checkpoint = replace(self._shared.checkpoint, keys=keys)
        self._refresher.start(RefreshState(table, since, loading, reason=reason))
        self.tell_rebuilder()
        self._rebuilder.config = self._loop.rebuild_config()  # the table's key may be new
        logger.info("refreshing table %s from the source (%s)", table, reason)
        if self._shared.checkpoint.lake_position is not None:
            self._loop.record_checkpoint(self._shared.checkpoint.lake_position)
        if retire:  # after the checkpoint: a restart never writes the old generation again
            moved = self._sink.retire_table(table, since)
            why = (
                "its key changed" if moved_key
                else "it changed while being loaded" if under_load
                else "the lake cannot hold its new column types"
            )  # fmt: skip
            if moved is not None:
                logger.warning("table %s: %s; its tables moved to %s, and it is loaded again",
                               table, why, moved)  # fmt: skip
        elif not loading:  # new columns reach the lake even if the refresh reads no row
            self._sink.follow_schema(description, since)
        self.fetch_chunk()

    def refresh_keys(self, request: ResyncRequest) -> None:
        """Read the keys a re-sync repaired again, so the store and the lake get their rows
        from the source in the stream's order (``cdc_core.resync.requests``). A table whose
        rows a key does not single out (a row id, no unique key) is read whole."""
        table = request.table
        key = self._descriptions.get(table).key
        unique = bool(key) and self._descriptions.get(table).unique and not has_copies(key)
        keys = request.key_tuples(key) if unique else None
        why = f"re-sync {request.request_id} repaired rows of it at {request.position}"
        if keys is None:
            self._start_refresh(table, request.position, f"{why}; its rows have no unique key")
            return
        state = RefreshState(table, request.position, False, reason=why, scanned=True)
        self._refresher.start_keys(replace(state, pending=tuple(keys), keyed=True))
        self.tell_rebuilder()
        logger.info("re-reading %d rows of table %s from the source (%s)", len(keys), table, why)
        self.fetch_chunk()

    def _lake_keys_otherwise(self, description: TableDescription) -> bool:
        """Whether the lake's table cannot be keyed as described: it lacks a key column, or
        (a table without a key, keyed by all its columns) holds other columns. No row of
        the lake has a key of the description then (the table was described after a DDL the
        log has not reached), and the table is loaded again."""
        held = self._sink.held_schema(description.table)
        key = description.key
        if held is None or not key:
            return False
        if has_copies(key):
            return set(held.names) != set(key)
        return not set(key) <= set(held.names)

    def on_inexact(
        self, table: str, locator: Hashable, commit_pos: Position, read_at: Position | None
    ) -> None:
        """The rebuild completed a change of ``table`` at ``commit_pos`` with columns the log
        left out (``cdc_core.rebuild.full_width.OnInexact``). NULL placeholders (``read_at``
        None) are refreshed away at once; values read at ``read_at`` are exact unless the row or the
        table changes before the stream reaches ``read_at`` (``check_reads``)."""
        if read_at is None:
            self._refresh_from(table, locator, commit_pos)
        else:
            self._reads.setdefault(table, []).append((locator, commit_pos, read_at))

    def check_reads(self, table: str, locators: tuple[Hashable, ...], position: Position) -> None:
        """A change of ``locators`` (all: a DDL) of ``table`` at ``position``: a row read at a
        later position to complete an earlier change may hold its effect, so the table is
        refreshed from that change. Reads the stream has passed were exact and are dropped."""
        kept = []
        for locator, since, read_at in self._reads.get(table, ()):
            if position > read_at:
                continue
            if position > since and (not locators or locator in locators):
                self._refresh_from(table, locator, since)
            else:
                kept.append((locator, since, read_at))
        self._reads[table] = kept

    def _refresh_from(self, table: str, locator: Hashable, since: Position) -> None:
        """Refresh ``table`` from ``since`` on, and read ``locator``'s key once more at the
        refresh's end, as a range already read may hold it. The table's shape is left as the
        log has it here: its DDL, if any, comes later.

        Called in the middle of a batch, so the checkpoint is not written here (its buffer
        state would pass transactions not yet in the lake): the batch's flush records the
        refresh, before its commits reach the lake; a crash before that meets the same
        change again on restart."""
        state = self._refresher.state_of(table)
        if state is None or state.keyed or since < state.since:
            why = "values left out of the log could not be read from the source as they were"
            self._refresher.start(RefreshState(table, since, False, reason=why))
            self.tell_rebuilder()
            logger.info("refreshing table %s from the source (%s)", table, why)
            self.fetch_chunk()
        if isinstance(locator, tuple):  # read again from the source: no copy number
            found = source_locator(self._descriptions.get(table).key, locator)
            assert isinstance(found, tuple)
            self._refresher.remember(table, found)

    def shaped_before_ddl(
        self, change: RowChange, commit_pos: Position, key: tuple[str, ...]
    ) -> bool:
        """Whether ``change`` belongs to a shape of its table the description has left: a
        DDL later in the log changed the key (the lake's tables are keyed otherwise), renamed
        a key column, or changed the columns of a table without a key (keyed by them all),
        and the table was described after it (a pipeline that lags, e.g. started again after
        the DDL). Such a change fits no key the lake can match, so it is dropped and the
        table is loaded again from the source, which holds its effect (``reload_stale``;
        found by the generative tester, mariadb-full seed 12). ``key``: the table's lake key
        as described now."""
        if not key or change.op == "t":
            return False
        if self._shared.checkpoint.keys.get(change.table, key) == key and _carries_key(change, key):
            return False
        if self._refresher.state_of(change.table) is None:
            self._stale.setdefault(change.table, commit_pos)
        return True

    def reload_stale(self) -> Iterator[Position | None]:
        """Load again the tables ``shaped_before_ddl`` dropped changes of, after writing
        what came before (a table's load moves its lake tables aside)."""
        if not self._stale:
            return
        yield from self._loop.flush(None)
        stale, self._stale = self._stale, {}
        for table, since in stale.items():
            why = "changes logged before a DDL on it were read after the DDL changed its columns"
            self._start_refresh(table, since, why)

    def tell_rebuilder(self) -> None:
        """The rebuild's view of the refreshes under way (``Rebuilder.loading``,
        ``Rebuilder.refreshing``)."""
        self._rebuilder.loading = self._refresher.loading()
        self._rebuilder.refreshing = self._refresher.rewriting()

    def fetch_chunk(self) -> None:
        if self._refresher.active:
            if self.snapshots is None:
                raise ConfigError(
                    f"pipeline {self.config.name} must refresh table"
                    f" {self._refresher.states[0].table} but has no snapshot reader"
                )
            self._refresher.fetch(self.snapshots, self.config.refresh_chunk_rows)

    def refresh_upto(self, upto: int) -> Iterator[Position | None]:
        """Write the held chunk if the stream has emitted everything up to its position."""
        chunk = self._refresher.due(upto)
        if chunk is None:
            return
        self._emit_chunk(chunk)
        self.fetch_chunk()
        if self._loop.batch_full():
            yield from self._loop.flush(None)

    def _emit_chunk(self, chunk: TableChunk) -> None:
        """The chunk's rows as ``r`` events at its position, in the lake and the store.

        Seqs run on across the refresh's chunks, which may share a position."""
        state = self._refresher.states[0]
        table, first = state.table, REFRESH_SEQ_BASE + state.rows
        events: list[LakeEvent] = []
        unique = chunk.snapshot.description.unique
        # A table without a key is read whole in one chunk: its equal rows are numbered
        # here, as copies 0 to n - 1 (cdc_core.rebuild.copies), and copies the chunk did not
        # write again are buried below with the other rows gone.
        numbers = has_copies(self._descriptions.get(table).key)
        copies: Counter[bytes] | None = Counter() if numbers else None
        asked, read = self._refresher.asked, set()
        for found in iter_rows(chunk):
            row, locator = self.config.tables.strip_row(table, found.row), found.locator
            seq = first + len(events)
            if copies is not None:
                # Rows counted equal as the store keys them: every NaN one value, as the
                # databases compare them (Python finds no NaN equal: postgres soak seed 8652).
                values = to_locator_bytes(found.locator)
                row, locator = {**row, COPY: copies[values]}, with_copy(locator, copies[values])
                copies[values] += 1
            located = to_locator_bytes(locator)
            if copies is None and not unique and located in read:
                # Within the chunk: a row already in the store may be one this refresh reads
                # again (its pending keys) or the log wrote since the refresh began.
                raise EqualKeysError.of(table, chunk.position)
            self._store.put(table, locator, chunk.position, row, seq)
            read.add(located)
            events.append(LakeEvent("r", row, chunk.position.value, seq, f"refresh:{table}", None))
        if state.keyed:
            gone = [key for key in asked if to_locator_bytes(key) not in read]
            events += self._bury_keys(table, gone, chunk.position, first + len(events))
        state, done = self._refresher.written(chunk, len(events))
        if done:
            if not state.keyed:
                events += self._bury_gone_rows(state, chunk.position, first + len(events))
            self._refresher.finish(state, chunk.position)
            self.tell_rebuilder()
            logger.info(
                "table %s refreshed: %s rows, exact from %s", table, state.rows, chunk.position
            )
        else:
            logger.info(
                "refreshing table %s: %s rows so far (at %s)", table, state.rows, chunk.position
            )
        self._loop.add_pending(f"refresh:{table}", chunk.position, table, events)

    def _bury_keys(
        self, table: str, keys: Sequence[Hashable], end: Position, first: int
    ) -> list[LakeEvent]:
        """Keys a keyed refresh asked for and the source no longer has: gone, if the store
        still holds a row for them."""
        events: list[LakeEvent] = []
        for key in keys:
            image = self._store.get(table, key, end, seq=first + len(events))
            if image is not None:
                seq = first + len(events)
                self._store.put(table, key, end, None, seq)
                events.append(LakeEvent("d", image, end.value, seq, f"refresh:{table}", None))
        return events

    def _bury_gone_rows(self, state: RefreshState, end: Position, first: int) -> list[LakeEvent]:
        """Rows neither a chunk nor the log touched since the refresh began: gone."""
        events: list[LakeEvent] = []
        for row, image in self._store.stale_rows(state.table, state.since, REFRESH_SEQ_BASE):
            seq = first + len(events)
            self._store.bury(row, end, seq)
            events.append(LakeEvent("d", image, end.value, seq, f"refresh:{state.table}", None))
        return events


def _carries_key(change: RowChange, key: tuple[str, ...]) -> bool:
    """Whether the image that locates a change holds exactly the columns of ``key`` the
    source has (runs per change). Only a log that locates rows by their values carries them
    in every image (Oracle's ROWID locates rows whose images may hold only the changed
    columns)."""
    image = change.after if change.op == "c" else change.before
    if not isinstance(change.locator, tuple) or image is None:
        return True
    if key[-1] == COPY:
        return set(image) == set(source_key(key))
    for column in key:  # noqa: SIM110 (a generator costs twice as much here)
        if image.get(column, ABSENT) is ABSENT:
            return False
    return True
