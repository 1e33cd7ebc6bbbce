"""The lake sink: committed, full-width changes into Delta changelog and mirror tables.

Exactly once (DESIGN.md, "Change events and the lake"): every Delta commit the sink makes
carries the app transaction ``replcheck.pipeline.<name>`` whose version is the source
position the batch reaches. Transactions are written in commit order and each batch holds
whole transactions, so a table's recorded version V means "every event of this table with
``_commit_pos <= V`` is in it". After a crash at any point -- between the changelog and the
mirror commit, or between two tables -- the restarted pipeline re-reads the log from its
checkpoint and the sink drops, per Delta table, the events at or below that table's V.

After each batch the sink records the position the whole pipeline has reached in a small
progress file (``cdc_core.lake.layout.write_progress``), so a table that saw no change is still
known to be caught up: the lake's high-water mark is exact.

Schema rule (README, "Schema changes"): a column added at the source is added to both lake
tables (Delta schema merge, no rewrite); a dropped column stays in the lake and is NULL in
later events; a column whose type changed keeps the lake's type while every value converts
losslessly (e.g. INT widened to BIGINT), otherwise the sink stops with ``SchemaChangeError``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import shutil
from collections.abc import Iterable, Iterator, Sequence
from datetime import time, timedelta
from decimal import Decimal
from operator import methodcaller
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cdc_core.capture.position import Position
from cdc_core.capture.source import RefusedColumn, RefusedColumnsError, TableDescription
from cdc_core.disk_full import naming_full_disk
from cdc_core.errors import TerminalError
from cdc_core.lake.delta_log import read_commits
from cdc_core.lake.layout import (
    PART_POSITION_KEY,
    PART_SEQ_KEY,
    POSITION_KEY,
    POSITION_TEXT_KEY,
    SEQ_KEY,
    SNAPSHOT_KEY,
    LakeTable,
    RefreshMarks,
    meta_fields,
    read_marks_of,
    read_progress,
    retired_at,
    retired_dir,
    write_progress,
)
from cdc_core.lake.mirror_rebuild import merge_or_rebuild
from cdc_core.lake.target import (
    REFRESH_SEQ_BASE,
    LakeEvent,
    Sink,
    StaleDescriptionError,
    TableBatch,
    Written,
    unwritten,
)
from cdc_core.lake_location import (
    LakeLocation,
    StoreError,
    StoreUnreachableError,
    as_location,
    failure_gist,
)
from cdc_core.names import (
    META_COLUMNS,
    OP,
    merge_assignments,
    merge_key_predicate,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable

logger = logging.getLogger(__name__)
MAX_SEQ = 2**63 - 1
SEQ_HISTORY = 50  # commits searched for the one that reached the written position


class SchemaChangeError(TerminalError):
    """A source column changed type in a way the lake's column cannot hold losslessly."""


def app_id_of(pipeline: str) -> str:
    """The Delta app transaction id of a pipeline's commits."""
    return f"replcheck.pipeline.{pipeline}"


class LakeSink(Sink):
    """Writes batches of whole committed transactions to the lake, exactly once.

    Args:
        lake: The lake's root directory.
        pipeline: The pipeline's name (its app transaction id and progress file).
    """

    def __init__(self, lake: Path | LakeLocation, pipeline: str) -> None:
        self.lake = lake
        self.pipeline = pipeline
        self.app_id = app_id_of(pipeline)
        self.source: str | None = None  # the server whose log it writes (``record_source``)
        # Keyed by each Delta table's location (cdc_core.lake_location): local or not.
        self._tables: dict[LakeLocation, DeltaTable] = {}
        self._marks: dict[LakeLocation, Written] = {}

    def record_source(self, source: str | None) -> None:
        """Name the server whose log the pipeline reads in the progress file: a validator
        reading that server's positions numbers them as the pipeline does (after a
        failover the pipeline followed, a later epoch: ``connectors/mariadb/failover.py``)."""
        self.source = source

    def table(self, name: str) -> LakeTable:
        """Where source table ``name`` lives in this lake."""
        return LakeTable(self.lake, name)

    def exists(self, table: str) -> bool:
        """Whether the lake has ``table``'s changelog."""
        return self.table(table).exists()

    def where(self, table: str) -> str:
        """The lake directory of ``table``."""
        return str(self.table(table).root_at)

    def load_position(self, table: str) -> int | None:
        """The position this pipeline's commits to ``table``'s changelog reached."""
        return self.written_position(self.table(table).changelog_at)

    def remove_table(self, name: str) -> None:
        """Delete a table's changelog and mirror (an initial load that did not finish)."""
        target = self.table(name)
        self._forget(target.root_at)
        if target.location.is_local:
            shutil.rmtree(target.root, ignore_errors=True)
        else:
            target.root_at.delete_tree()

    def held_schema(self, table: str) -> pa.Schema | None:
        """The columns of the table's changelog (bookkeeping columns left out)."""
        import pyarrow as pa

        delta = self._open(self.table(table).changelog_at)
        if delta is None:
            return None
        lake = pa.schema(delta.schema().to_arrow())
        return pa.schema([field for field in lake if field.name not in META_COLUMNS])

    def holds(self, description: TableDescription) -> bool:
        """Whether the lake's tables of ``description.table`` can hold every value of its
        columns as described (the same or a wider type); True when they do not exist."""
        import pyarrow as pa

        delta = self._open(self.table(description.table).changelog_at)
        if delta is None:
            return True
        lake = pa.schema(delta.schema().to_arrow())
        return all(
            field.name not in lake.names or holds_type(lake.field(field.name).type, field.type)
            for field in description.schema
        )

    def refused(self, description: TableDescription) -> tuple[RefusedColumn, ...]:
        """The described columns a Delta table cannot hold: intervals (Arrow durations, in
        arrays too), for which the Delta protocol has no type
        (https://github.com/delta-io/delta/blob/master/PROTOCOL.md#schema-serialization-format)."""
        return tuple(
            RefusedColumn(field.name, _interval_text(field.type), _NO_LAKE_INTERVAL)
            for field in description.schema
            if _holds_interval(field.type)
        )

    def follow_schema(self, description: TableDescription, position: Position) -> None:
        """Add columns new at the source to the lake's tables now (no row changes: their
        existing rows hold NULL there, as the source does after a value-preserving DDL)."""
        from deltalake import CommitProperties

        target = self.table(description.table)
        for path in (target.changelog_at, target.mirror_at):  # no position: the marks stay
            if self._open(path) is not None:
                self._write(path, self._arrow(path, description, []), CommitProperties())

    def retire_table(self, name: str, position: Position) -> Path | LakeLocation | None:
        """Move a table's changelog and mirror aside (under ``_replcheck/retired``) so it can
        be loaded again with another schema; returns where they went (None: no table).

        On an object store a move is a copy of each object, then the deletion of the table:
        not atomic as a local rename is (kills during a reload on a store are not tested yet:
        docs/object-storage.md)."""
        table = self.table(name)
        if not table.location.is_local:
            return self._retire_in_store(table, position)
        root, lake = table.root, table.lake
        if not root.exists():
            return None
        target = retired_dir(lake, self.pipeline) / f"{root.relative_to(lake)}@{position.value}"
        self._forget(table.root_at)
        with naming_full_disk(target, lake):
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(root), str(target))
        return target

    def _retire_in_store(self, table: LakeTable, position: Position) -> LakeLocation | None:
        root = table.root_at
        if not root.is_dir():
            return None
        relative = root.relative_to(table.location)
        target = retired_at(table.location, self.pipeline).join(f"{relative}@{position.value}")
        root.copy_tree(target)
        self._forget(root)
        root.delete_tree()
        return target

    def _forget(self, root: LakeLocation) -> None:
        """Drop what the sink knows of the Delta tables under ``root``."""
        for known in (self._tables, self._marks):
            for path in [path for path in known if path.is_within(root)]:
                del known[path]

    def written_position(self, path: LakeLocation) -> int | None:
        """The position this pipeline's commits to the Delta table at ``path`` reached."""
        delta = self._open(path)
        return None if delta is None else delta.transaction_version(self.app_id)

    def write(
        self,
        batches: Iterable[TableBatch],
        position: Position,
        tables: Sequence[str],
        marks: RefreshMarks | None = None,
    ) -> int:
        """Write one batch that reaches ``position``, then record the pipeline's progress.

        Args:
            batches: Per table, its events with ``commit_pos <= position``.
            position: How far the source log has been consumed, in whole transactions.
            tables: Every table the pipeline captures (the progress file lists them).
            marks: Tables being refreshed, and stale windows of refreshed ones.

        Returns:
            The number of events written (events already in the lake are not counted).
        """
        self._announce_refreshes(tables, marks)
        written = 0
        for batch in batches:
            written += self._write_table(batch, position)
        write_progress(self.lake, self.pipeline, position, tables, marks, self.source)
        return written

    def _announce_refreshes(self, tables: Sequence[str], marks: RefreshMarks | None) -> None:
        """Record a refresh that begins before this batch's commits reach the lake: a
        reader that saw a commit above the refresh's start and the marks from before it
        would take the table's state as exact and read rows the refresh has not rewritten
        yet (soak seed 2105 of mariadb-full). The position stays where it was."""
        previous = read_progress(self.lake).get(self.pipeline)
        if marks is None or previous is None:
            return
        if set(marks.refreshing) <= set(read_marks_of(self.lake, self.pipeline).refreshing):
            return
        write_progress(self.lake, self.pipeline, previous[0], tables, marks, self.source)

    def write_snapshot(
        self, description: TableDescription, events: list[LakeEvent], position: Position
    ) -> None:
        """Append one chunk of a table's initial snapshot (``r`` events) to both tables.

        The chunks carry no app transaction: ``finish_snapshot`` marks the load complete.
        """
        target = self.table(description.table)
        properties = self._properties(position, snapshot=True)
        records = [event.to_record() for event in events]
        changelog, mirror = target.changelog_at, target.mirror_at
        for path in (changelog, mirror) if description.key else (changelog,):
            self._write(path, self._arrow(path, description, records), properties)

    def finish_snapshot(self, description: TableDescription, position: Position) -> None:
        """Mark a table's initial load complete: an empty commit with the app transaction."""
        target = self.table(description.table)
        empty = self._arrow(target.changelog_at, description, [])
        paths = (
            (target.mirror_at, target.changelog_at) if description.key else (target.changelog_at,)
        )
        # Every event of the load is at ``position``; a refresh chunk there may follow.
        properties = self._properties(position, last_seq=REFRESH_SEQ_BASE - 1)
        for path in paths:  # the changelog's mark last: it is what a restart checks
            self._write(path, empty, properties)
            self._marks[path] = Written(position.value, REFRESH_SEQ_BASE - 1, None, -1)

    def _write(self, path: LakeLocation, data: pa.Table, properties: Any) -> None:
        from deltalake import write_deltalake

        with self._naming_failures(path):
            if path.is_local:
                path.local_path.mkdir(parents=True, exist_ok=True)
            self._allow_types(path, data.schema)
            delta = self._open(path)
            if delta is None:
                path.write_delta(
                    data, mode="append", schema_mode="merge", commit_properties=properties
                )
            else:
                write_deltalake(
                    delta, data, mode="append", schema_mode="merge", commit_properties=properties
                )

    @contextlib.contextmanager
    def _naming_failures(self, path: LakeLocation) -> Iterator[None]:
        """A write's failures that name their cause: ``naming_full_disk`` for a local lake
        (an object store has no disk to fill), and a commit delta-rs could not complete."""
        full_disk: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
        if path.is_local:
            full_disk = naming_full_disk(path.local_path, as_location(self.lake).local_path)
        with full_disk, naming_failed_commits(path):
            yield

    def _write_table(self, batch: TableBatch, position: Position) -> int:
        target = self.table(batch.description.table)
        last_seq = max((e.seq for e in batch.events if e.commit_pos == position.value), default=-1)
        properties = self._properties(position, last_seq=last_seq)
        reached = Written(position.value, last_seq, None, -1)
        changelog, mirror = target.changelog_at, target.mirror_at
        events = self._unwritten(changelog, batch.events)
        # A table with nothing to write yet (an empty table added while running) still gets
        # its lake tables, empty: a reader must find it, not an error.
        if events or not _is_delta(changelog):
            data = self._arrow(changelog, batch.description, [e.to_record() for e in events])
            self._write(changelog, data, properties)
            self._marks[changelog] = reached
        if batch.description.key:
            mirror_events = self._unwritten(mirror, batch.events)
            if mirror_events:
                self._merge_mirror(mirror, batch.description, mirror_events, properties)
                self._marks[mirror] = reached
            elif not _is_delta(mirror):
                self._write(mirror, self._arrow(mirror, batch.description, []), properties)
                self._marks[mirror] = reached
        return len(events)

    def _unwritten(self, path: LakeLocation, events: list[LakeEvent]) -> list[LakeEvent]:
        """The events not in the Delta table yet (``unwritten``)."""
        return unwritten(self._written(path), events)

    def _written(self, path: LakeLocation) -> Written:
        """How far this pipeline's commits to ``path`` reached: read from the Delta log once,
        then kept up to date by the sink's own writes (nobody else writes these marks)."""
        mark = self._marks.get(path)
        if mark is None:
            mark = self._marks[path] = self._read_mark(path)
        return mark

    def _read_mark(self, path: LakeLocation) -> Written:
        delta = self._open(path)
        if delta is None:
            return Written(None, -1, None, -1)
        done = delta.transaction_version(self.app_id)
        newest = delta.version()  # its commits by name: history() may list a newer one
        history = read_commits(path, newest, newest - SEQ_HISTORY)[::-1]
        part_pos, part_seq = None, -1
        if history and PART_POSITION_KEY in history[0]:
            part_pos, part_seq = int(history[0][PART_POSITION_KEY]), int(history[0][PART_SEQ_KEY])
        # Commits written before replcheck.seq existed hold every event at their position.
        seq = next(
            (int(c.get(SEQ_KEY, MAX_SEQ)) for c in history if c.get(POSITION_KEY) == str(done)),
            MAX_SEQ,
        )
        return Written(done, seq, part_pos, part_seq)

    def write_part(self, batches: Iterable[TableBatch], commit_pos: Position) -> int:
        """Write part of one transaction too big for a batch (its events in seq order).

        The commits record the transaction's position and the last seq they hold instead of
        an app transaction: the transaction is complete only once a batch that reaches its
        commit position is written, and a restart skips the parts already in the lake.
        """
        written = 0
        for batch in batches:
            target = self.table(batch.description.table)
            paths = [target.changelog_at]
            if batch.description.key:
                paths.append(target.mirror_at)
            for path in paths:
                events = self._unwritten(path, batch.events)
                if not events:
                    continue
                marker = {
                    PART_POSITION_KEY: str(commit_pos.value),
                    PART_SEQ_KEY: str(events[-1].seq),
                }
                properties = self._part_properties(marker)
                if path == target.changelog_at:
                    data = self._arrow(path, batch.description, [e.to_record() for e in events])
                    self._write(path, data, properties)
                    written += len(events)
                else:
                    self._merge_mirror(path, batch.description, events, properties)
                mark = self._written(path)
                self._marks[path] = Written(mark.done, mark.seq, commit_pos.value, events[-1].seq)
        return written

    def _allow_types(self, path: LakeLocation, schema: pa.Schema) -> None:
        """A column added by schema merge may need a table feature the table was created
        without: a timestamp without time zone needs ``timestampNtz`` (Delta protocol,
        "Timestamp without timezone"), which delta-rs adds only when it creates a table."""
        from deltalake import TableFeatures

        delta = self._open(path)
        if delta is None or not any(_has_naive_timestamp(field.type) for field in schema):
            return
        features = delta.protocol().writer_features or []
        if "timestampNtz" not in features:
            with self._naming_failures(path):
                delta.alter.add_feature(
                    TableFeatures.TimestampWithoutTimezone, allow_protocol_versions_increase=True
                )

    @staticmethod
    def _part_properties(marker: dict[str, str]) -> Any:
        from deltalake import CommitProperties

        return CommitProperties(custom_metadata=marker)

    def _open(self, path: LakeLocation) -> DeltaTable | None:
        delta = self._tables.get(path)
        if delta is not None:
            delta.update_incremental()
            return delta
        if not _is_delta(path):
            return None
        delta = self._tables[path] = path.open_delta()
        return delta

    def _properties(self, position: Position, *, snapshot: bool = False, last_seq: int = -1) -> Any:
        """Commit metadata: the position reached, the last seq written at it, and the app
        transaction at it (a snapshot chunk instead records the snapshot's position and no
        app transaction)."""
        from deltalake import CommitProperties, Transaction

        if snapshot:
            return CommitProperties(custom_metadata={SNAPSHOT_KEY: str(position.value)})
        metadata = {
            POSITION_KEY: str(position.value),
            POSITION_TEXT_KEY: position.text,
            SEQ_KEY: str(last_seq),
        }
        return CommitProperties(
            custom_metadata=metadata,
            app_transactions=[Transaction(app_id=self.app_id, version=position.value)],
        )

    def _merge_mirror(
        self,
        path: LakeLocation,
        description: TableDescription,
        events: list[LakeEvent],
        properties: Any,
    ) -> None:
        """Apply the batch's net effect per key in one MERGE (or create the mirror)."""
        import pyarrow as pa
        from deltalake import CommitProperties

        truncated, latest = net_effect(events, description.key)
        data = self._arrow(path, description, [event.to_record() for event in latest])
        delta = self._open(path)
        if delta is None:
            self._create_mirror(path, data, properties)
            return
        self._allow_types(path, data.schema)
        held = pa.schema(delta.schema().to_arrow()).names
        if any(column not in held for column in description.key):
            # A key column new to the mirror (a column added to a table without a key: its
            # rows are keyed by all their columns): the MERGE's condition needs it there.
            self._write(path, self._arrow(path, description, []), CommitProperties())
            delta = self._open(path)
            assert delta is not None
        keys = merge_key_predicate(description.key, nullable=not description.unique)
        columns = merge_assignments(data.column_names)
        merger = delta.merge(
            data,
            keys,
            source_alias="s",
            target_alias="t",
            merge_schema=True,
            commit_properties=properties,
        )
        merger = merger.when_matched_delete(f"s.`{OP}` = 'd'")
        merger = merger.when_matched_update(columns, f"s.`{OP}` <> 'd'")
        merger = merger.when_not_matched_insert(columns, f"s.`{OP}` <> 'd'")
        if truncated:
            merger = merger.when_not_matched_by_source_delete()
        target = self.table(description.table)
        with self._naming_failures(path):
            merge_or_rebuild(merger, delta, target, description.key, properties)

    def _create_mirror(self, path: LakeLocation, data: pa.Table, properties: Any) -> None:
        import pyarrow.compute as pc

        self._write(path, data.filter(pc.not_equal(data[OP], "d")), properties)

    def _arrow(
        self, path: LakeLocation, description: TableDescription, records: list[dict[str, object]]
    ) -> pa.Table:
        """The records as Arrow, typed by the source description, fitted to the lake's types."""
        import pyarrow as pa

        refused = self.refused(description)
        if refused:  # a column a DDL added since the load: named, not a Delta error
            raise RefusedColumnsError.of(description.table, refused)
        schema = pa.schema([*description.schema, *meta_fields()])
        failures = (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError)
        if _truncated(description.schema, records):
            raise StaleDescriptionError(description.table)
        try:
            data = pa.Table.from_pylist(records, schema)
        except failures:
            try:  # times from a log (time, timedelta) where the lake holds microseconds
                data = pa.Table.from_pylist([_fit_values(record) for record in records], schema)
            except failures as exc:
                raise StaleDescriptionError(description.table) from exc
        delta = self._open(path)
        if delta is None:
            return data
        try:
            return fit_to_lake(data, pa.schema(delta.schema().to_arrow()), description.table)
        except SchemaChangeError as exc:
            # Changes logged before a type change the description already shows (a pipeline
            # started again behind the DDL: seed 551) fit the types the lake holds.
            raise StaleDescriptionError(description.table, exc) from exc


def _truncated(schema: pa.Schema, records: list[dict[str, object]]) -> bool:
    """Whether a record holds a value Arrow would take wrongly without a word: a fraction
    for an integer column (12.5 becomes 12), a number for a timestamp or date column (a time
    since the epoch). The description is then ahead of these changes (a DECIMAL column
    renamed and an INT added with its name since)."""
    import pyarrow.types as pat

    for column in schema:
        if pat.is_integer(column.type):
            values = map(methodcaller("get", column.name), records)
            if _WHOLE.issuperset(map(type, values)):  # the common case, checked in C
                continue
            for value in map(methodcaller("get", column.name), records):
                if isinstance(value, (float, Decimal)) and _has_fraction(value):
                    return True
        elif pat.is_timestamp(column.type) or pat.is_date(column.type):
            # Arrow reads a number as a time since the epoch: a description ahead of these
            # changes (an integer column dropped and added again as a timestamp: seed 551).
            values = map(methodcaller("get", column.name), records)
            if not _NUMBERS.isdisjoint(map(type, values)):
                return True
    return False


_WHOLE = frozenset({int, bool, type(None)})  # types an integer column takes as they are
_NUMBERS = frozenset({int, bool})  # no value of a timestamp or date column


def _has_fraction(value: float | Decimal) -> bool:
    """A finite number that is not whole (NaN and infinities Arrow refuses by itself)."""
    return math.isfinite(value) and value % 1 != 0


def net_effect(events: Sequence[LakeEvent], key: Sequence[str]) -> tuple[bool, list[LakeEvent]]:
    """What a batch does to the mirror: whether it truncates, and the latest event per key.

    Events before the batch's last truncate do not matter: the truncate removes every row
    they touched, and the keys written after it are the whole mirror.
    """
    start, truncated = 0, False
    for index, event in enumerate(events):
        if event.op == "t":
            start, truncated = index + 1, True
    latest: dict[tuple[object, ...], LakeEvent] = {}
    for event in events[start:]:
        found = tuple(event.row.get(column) for column in key)
        if float in map(type, found):  # NaN != NaN in Python; the MERGE holds one NaN a key
            found = tuple(_NAN if value != value else value for value in found)
        latest[found] = event
    return truncated, list(latest.values())


_NAN = object()  # every NaN of a key, in ``net_effect``


_NO_LAKE_INTERVAL = (
    "no type in a Delta lake, which holds no intervals (a PostgreSQL database target does)"
)


def _holds_interval(kind: pa.DataType) -> bool:
    """Whether ``kind`` is a duration or a list of them (``merkle`` ``interval``)."""
    import pyarrow.types as pat

    if pat.is_list(kind) or pat.is_large_list(kind):
        return _holds_interval(kind.value_type)
    return bool(pat.is_duration(kind))


def _interval_text(kind: pa.DataType) -> str:
    import pyarrow.types as pat

    if pat.is_list(kind) or pat.is_large_list(kind):
        return f"{_interval_text(kind.value_type)}[]"
    return "interval"


def _has_naive_timestamp(kind: pa.DataType) -> bool:
    import pyarrow as pa

    if pa.types.is_timestamp(kind):
        return kind.tz is None
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return _has_naive_timestamp(kind.value_type)
    if pa.types.is_struct(kind):
        return any(_has_naive_timestamp(kind.field(i).type) for i in range(kind.num_fields))
    return False


def _fit_values(record: dict[str, object]) -> dict[str, object]:
    """Times as the lake stores them: int64 microseconds (Delta has no time type)."""
    for name, value in record.items():
        if isinstance(value, time):
            record[name] = ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + (
                value.microsecond
            )
        elif isinstance(value, timedelta):
            record[name] = value // timedelta(microseconds=1)
    return record


def fit_to_lake(data: pa.Table, lake_schema: pa.Schema, table: str) -> pa.Table:
    """Cast columns whose source type changed back to the lake's type, losslessly only, and
    give columns the source no longer has NULL (so the mirror's MERGE clears them too).

    Raises:
        SchemaChangeError: A value does not convert without loss (names table, column and
            both types, and the fix).
    """
    import pyarrow as pa

    for kept in lake_schema:  # dropped at the source: NULL from now on, in every lake table
        if kept.name not in data.schema.names:
            data = data.append_column(kept.with_nullable(True), pa.nulls(len(data), kept.type))
    for index, column in enumerate(data.schema):
        if column.name not in lake_schema.names:
            continue  # a new column: Delta's schema merge adds it
        wanted = lake_schema.field(column.name).type
        if _same_type(column.type, wanted):
            continue
        try:
            converted = _cast(data.column(index), wanted)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise SchemaChangeError(
                f"column {column.name} of table {table} changed type at the source from"
                f" {wanted} (in the lake) to {column.type}, and its values do not convert"
                " losslessly; re-snapshot the table into a new lake table (remove its lake"
                " directory and restart the pipeline)",
                {"table": table, "column": column.name},
            ) from exc
        data = data.set_column(index, pa.field(column.name, wanted), converted)
    return data


def _cast(values: pa.ChunkedArray, wanted: pa.DataType) -> pa.ChunkedArray:
    """``values`` in type ``wanted``, refusing any value that changes, and numbers as times
    or times as numbers (Arrow's cast reinterprets them). Arrow refuses an integer to a
    decimal of fewer than 19 digits whatever the values (NULLs too, as a column added again
    with another type holds while the lake catches up), so such a cast goes through the
    widest decimal of the same scale, which checks the values."""
    import pyarrow as pa
    import pyarrow.types as pat

    if values.null_count == len(values):
        return pa.chunked_array([pa.nulls(len(values), wanted)])
    if pat.is_temporal(values.type) != pat.is_temporal(wanted):  # Arrow reads 5 as 5 µs
        raise pa.ArrowInvalid(f"{values.type} values are not {wanted} values")
    if pat.is_integer(values.type) and pat.is_decimal(wanted):
        values = values.cast(pa.decimal128(38, wanted.scale), safe=True)
    return values.cast(wanted, safe=True)


def holds_type(lake: pa.DataType, new: pa.DataType) -> bool:
    """Whether a lake column of type ``lake`` holds every value of type ``new`` exactly."""
    import pyarrow as pa

    if _same_type(new, lake):
        return True
    if pa.types.is_integer(lake) and pa.types.is_integer(new):
        if pa.types.is_signed_integer(lake) == pa.types.is_signed_integer(new):
            return bool(lake.bit_width >= new.bit_width)
        return pa.types.is_signed_integer(lake) and bool(lake.bit_width > new.bit_width)
    if pa.types.is_floating(lake) and pa.types.is_floating(new):
        return bool(lake.bit_width >= new.bit_width)
    if pa.types.is_decimal(lake) and pa.types.is_decimal(new):
        return bool(
            lake.scale >= new.scale and lake.precision - lake.scale >= new.precision - new.scale
        )
    return False


def _same_type(source: pa.DataType, lake: pa.DataType) -> bool:
    """Types Delta stores identically (string vs large_string and the like)."""
    import pyarrow as pa

    if source == lake:
        return True
    if pa.types.is_string(source) or pa.types.is_large_string(source):
        return pa.types.is_string(lake) or pa.types.is_large_string(lake)
    if pa.types.is_binary(source) or pa.types.is_large_binary(source):
        return pa.types.is_binary(lake) or pa.types.is_large_binary(lake)
    if pa.types.is_timestamp(source) and pa.types.is_timestamp(lake):
        return source.unit == lake.unit and (source.tz is None) == (lake.tz is None)
    return False


@contextlib.contextmanager
def naming_failed_commits(path: LakeLocation) -> Iterator[None]:
    """A commit delta-rs gave up on, as one line naming the table (exit 2): another process
    committed to it, or (on a store) the answer to the commit was lost on the network and
    the commit may have landed. This process's marks of the table may then be behind its
    log, so it must not write on: a new run reads them from the log and writes nothing twice
    (``tests/object_store/test_lost_commit.py``)."""
    from deltalake.exceptions import CommitFailedError

    try:
        yield
    except CommitFailedError as exc:
        lost = "" if path.is_local else f", or the answer of {path.store} to it was lost"
        raise TerminalError(
            f"lake table {path.display()}: a commit did not complete ({exc}); another process"
            f" may be writing to this table{lost}: make sure one pipeline writes it, then run"
            " again (a pipeline resumes from the table's last commit and writes nothing twice)",
            {"lake": path.display()},
        ) from exc
    except OSError as exc:
        if path.is_local:
            raise
        failed = StoreError.of(path, exc)
        if not isinstance(failed, StoreUnreachableError):
            raise failed from exc
        raise TerminalError(
            f"lake table {path.display()}: a commit got no answer from {path.store}"
            f" ({failure_gist(str(exc))}); it may have landed: run again when the store answers"
            " (a pipeline resumes from the table's last commit and writes nothing twice)",
            {"lake": path.display()},
        ) from exc


def _is_delta(path: LakeLocation) -> bool:
    """Whether a Delta table exists at ``path`` (its log has a commit)."""
    return path.join("_delta_log").is_dir()
