"""A pipeline's sink into a database (MariaDB/MySQL, PostgreSQL, through SQLAlchemy Core).

Exactly once, as the lake sink: a batch of whole committed source transactions is applied
in one target transaction together with the progress rows (``progress.py``) saying how far
each table and the pipeline reached; a transaction too big for a batch goes in bounded
parts, each recording the part written. A restarted pipeline hands the sink what it may
have written already, and the sink skips it by those rows. The target commits only
between source transactions, so a reader never sees part of one (several small source
transactions may share a target transaction: the batch's, ``batch.max_events`` /
``batch.max_seconds``).

Per table, a batch is applied as its net effect per key (``net_effect``): the keys it
deletes or rewrites are deleted with one ``DELETE ... WHERE key IN (...)`` per bounded
list, then the rows it leaves are inserted with one multi-row ``INSERT``. Key changes arrive
as a delete of the old key and an insert of the new one (``cdc_core.lake.key_moves``).

Conflicts: a key the batch first inserts must be absent, one it first updates or deletes
present (refresh and load rows may be either). A key that is not is a conflict: with
``conflicts: stop`` the batch is rolled back and the pipeline stops naming table and key;
with ``overwrite`` the change is applied anyway and counted (the progress table's pipeline
row and the log).

A table being loaded is not checked: a target table created empty while the source's table
has rows (a table added to a running pipeline, or one moved aside to be loaded again, e.g.
for a new primary key) gets them from a table refresh's chunks, and a change may come before
the chunk holding its row. Its changes apply as refresh rows do (delete by key, insert),
which the later chunks and changes make exact. Its progress row says so (``progress.py``)
from before the table is created until a batch's refresh marks show its load done. A crash
between the pipeline's checkpoint of a key change and the move finds the old table keyed
otherwise than the source's: it is moved aside then; one after the move finds no table,
which is flagged and created.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from cdc_core.capture.position import Position
from cdc_core.capture.source import RefusedColumn, TableDescription
from cdc_core.errors import TerminalError
from cdc_core.lake.layout import RefreshMarks
from cdc_core.lake.target import REFRESH_SEQ_BASE, LakeEvent, Sink, TableBatch, Written, unwritten
from cdc_core.pipeline.config import TargetOptions
from cdc_core.rebuild.copies import has_copies
from connectors.base import key_text
from connectors.database_target.progress import NOTHING_WRITTEN, Progress, progress_table
from connectors.database_target.tables import TargetTables
from connectors.model import RepairDialect, TableSchema
from connectors.sql_target import to_target_value

if TYPE_CHECKING:
    import pyarrow as pa
    from sqlalchemy.engine import Engine

logger = logging.getLogger(__name__)
KEYS_PER_STATEMENT = 500  # keys in one DELETE's IN list


class ConflictError(TerminalError):
    """A change met a target row that contradicts it, under ``conflicts: stop``."""


@dataclass(frozen=True, slots=True)
class _Expected:
    """Keys of one table the batch expects present (True) or absent (False) in the target."""

    present: bool | None  # None: a refresh's or load's row, either
    keys: list[tuple[object, ...]]
    by_insert: bool = False  # absent keys the insert checks (not deleted first)


class _Conflict(Exception):
    def __init__(self, table: str, expected: _Expected) -> None:
        super().__init__(table)
        self.table, self.expected = table, expected


def _behind(mark: Written, held: Written) -> bool:
    """Whether ``mark`` is before what the target holds (a restart re-reads from its
    checkpoint and may flush what the target has in smaller batches): recording it would
    move the table's mark back and apply the changes after it again."""
    if mark.done is None or held.done is None:
        return False
    return (mark.done, mark.seq) < (held.done, held.seq)


class DatabaseSink(Sink):
    """Writes a pipeline's batches into a database, exactly once (module doc).

    Args:
        engine: The target's engine (sessions in UTC: ``connectors.sql_target``).
        dialect: What writing to the target's product must know.
        pipeline: The pipeline's name (its progress rows).
        describe_source: The source table's columns with their logical types.
        options: The target schema and the conflict policy.
        display: The target as messages name it (no password).
    """

    def __init__(
        self,
        engine: Engine,
        dialect: RepairDialect,
        pipeline: str,
        describe_source: Callable[[str], TableSchema],
        options: TargetOptions,
        display: str,
    ) -> None:
        self.engine = engine
        self.dialect = dialect
        self.options = options
        self.conflicts = 0
        self.tables = TargetTables(engine, describe_source, options.schema, display)
        table = progress_table(sa.MetaData(), None)
        table.create(engine, checkfirst=True)
        self.progress = Progress(table, pipeline)
        self._marks: dict[str, Written] = {}
        self._loading: set[str] = set()  # tables whose load is not done (module doc)

    # -- the tables ----------------------------------------------------------------------

    def exists(self, table: str) -> bool:
        """Whether the target has ``table``."""
        return self.tables.exists(table)

    def where(self, table: str) -> str:
        """The target table of ``table``, for messages."""
        return self.tables.where(table)

    def load_position(self, table: str) -> int | None:
        """The position the pipeline's writes to ``table`` reached."""
        return self._mark(table).done

    def remove_table(self, table: str) -> None:
        """Drop a table whose initial load did not finish (and its progress row)."""
        self.tables.drop(table)
        with self.engine.begin() as connection:
            self.progress.forget(connection, table)
        self._marks.pop(table, None)
        self._loading.discard(table)

    def held_schema(self, table: str) -> pa.Schema | None:
        """None: rows are converted by the target columns' own types, never by a
        description's Arrow types."""
        return None

    def holds(self, description: TableDescription) -> bool:
        """Whether the target table's columns hold the described ones' values."""
        return self.tables.holds(description)

    def refused(self, description: TableDescription) -> tuple[RefusedColumn, ...]:
        """The described columns the target has no exact type for."""
        return self.tables.refused(description)

    def follow_schema(self, description: TableDescription, position: Position) -> None:
        """Add columns new at the source (existing rows hold NULL there)."""
        self.tables.add_columns(description)

    def retire_table(self, name: str, position: Position) -> str | None:
        """Rename the table aside to load it again with another schema (or key)."""
        moved = self.tables.retire(name, position)
        self._start_load(name)  # after: a crash between finds no table (``_prepare``)
        return moved

    # -- writing -------------------------------------------------------------------------

    def write_snapshot(
        self, description: TableDescription, events: list[LakeEvent], position: Position
    ) -> None:
        """Insert one chunk of a table's initial load (the table is new and empty)."""
        table = self.tables.ensure(description)
        with self.engine.begin() as connection:
            self._insert(connection, table, events)

    def finish_snapshot(self, description: TableDescription, position: Position) -> None:
        """Record the load complete at ``position`` (refresh rows there may follow)."""
        mark = Written(position.value, REFRESH_SEQ_BASE - 1, None, -1)
        self.tables.ensure(description)
        with self.engine.begin() as connection:
            self.progress.record(connection, description.table, mark, position.text)
        self._marks[description.table] = mark

    def write(
        self,
        batches: Iterable[TableBatch],
        position: Position,
        tables: Sequence[str],
        marks: RefreshMarks | None = None,
    ) -> int:
        """Apply whole transactions reaching ``position`` in one target transaction."""
        batches = list(batches)

        def apply(connection: Any) -> Iterator[tuple[str, Written]]:
            for batch in batches:
                at = [e.seq for e in batch.events if e.commit_pos == position.value]
                mark = Written(position.value, max(at, default=-1), None, -1)
                yield batch.description.table, mark
            self.progress.record_pipeline(connection, position, tables, marks, self.conflicts)

        def loaded(table: str) -> bool:  # a loading refresh's table is exact at no position
            return marks is None or (marks.refreshing.get(table) != 0)

        return self._transaction(batches, apply, position, loaded)

    def write_part(self, batches: Iterable[TableBatch], commit_pos: Position) -> int:
        """Apply part of one transaction too big for a batch, recording the part written."""
        batches = list(batches)

        def apply(connection: Any) -> Iterator[tuple[str, Written]]:
            for batch in batches:
                mark = self._mark(batch.description.table)
                last = batch.events[-1].seq if batch.events else mark.part_seq
                yield batch.description.table, Written(mark.done, mark.seq, commit_pos.value, last)

        return self._transaction(batches, apply, commit_pos, lambda table: False)

    def _transaction(
        self,
        batches: list[TableBatch],
        marks_of: Callable[[Any], Iterator[tuple[str, Written]]],
        position: Position,
        loaded: Callable[[str], bool],
    ) -> int:
        """Apply the unwritten events of ``batches`` and record the new marks, atomically;
        a table ``loaded`` says is done loading loses its flag with them."""
        written, new_marks = 0, {}
        conflicts = self.conflicts
        tables = [self._prepare(batch.description, position) for batch in batches]  # DDL first
        try:
            with self.engine.begin() as connection:
                for batch, table in zip(batches, tables, strict=True):
                    events = unwritten(self._mark(batch.description.table), batch.events)
                    self._apply(connection, table, batch.description, events)
                    written += len(events)
                for name, mark in marks_of(connection):
                    if _behind(mark, self._mark(name)):
                        continue  # re-read after a restart: the target holds more already
                    done = mark.done if mark.done is not None else self._mark(name).done
                    loading = name in self._loading and not loaded(name)
                    text = position.text if done else ""
                    self.progress.record(connection, name, mark, text, loading)
                    new_marks[name] = mark
                done_loading = {name for name in self._loading if loaded(name)}
                for name in done_loading - set(new_marks):
                    self.progress.loaded(connection, name)
        except _Conflict as conflict:
            self.conflicts = conflicts
            raise self._named(conflict) from None
        except BaseException:
            self.conflicts = conflicts
            raise
        self._marks.update(new_marks)
        self._loading -= done_loading
        return written

    def _prepare(self, description: TableDescription, position: Position) -> sa.Table:
        """The batch's target table, ready: one created now starts loading, and one keyed
        otherwise than the source's table (a crash came between the checkpoint of a key
        change's refresh and ``retire_table``) is moved aside first."""
        name, key = description.table, description.key
        if not self.tables.exists(name):
            self._start_load(name)
        elif key and not has_copies(key) and self.tables.keyed_otherwise(description):
            moved = self.retire_table(name, position)
            logger.warning("table %s: its key changed; its target table moved to %s", name, moved)
        return self.tables.ensure(description)

    def _start_load(self, table: str) -> None:
        """Flag ``table`` as loading with nothing written, before its target table is
        created (a crash in between leaves the flag and no table: module doc)."""
        with self.engine.begin() as connection:
            self.progress.record(connection, table, NOTHING_WRITTEN, "", loading=True)
        self._marks[table] = NOTHING_WRITTEN
        self._loading.add(table)

    def _apply(
        self,
        connection: Any,
        table: sa.Table,
        description: TableDescription,
        events: list[LakeEvent],
    ) -> None:
        if not events:
            return
        truncated, first, latest = net_effect(events, description.key)
        if truncated:
            connection.execute(table.delete())
        inserted = [e for e in latest.values() if e.op != "d"]
        unchecked = None
        loading = description.table in self._loading
        for expected in _expectations(
            first, latest, self.options.conflicts == "stop", loading=loading
        ):
            if expected.present is False and expected.by_insert:
                unchecked = expected  # the insert's unique key finds a row already there
                continue
            removed = sum(self._delete(connection, table, description.key, expected.keys))
            found = removed if expected.present else len(expected.keys) - removed
            if expected.present is not None and found != len(expected.keys):
                self._conflicting(description.table, expected, len(expected.keys) - found)
        try:
            self._insert(connection, table, inserted)
        except sa.exc.IntegrityError:
            if unchecked is None:
                raise
            raise _Conflict(description.table, unchecked) from None

    def _conflicting(self, table: str, expected: _Expected, count: int) -> None:
        if self.options.conflicts == "stop":
            raise _Conflict(table, expected)
        self.conflicts += count
        logger.warning(
            "%s: %s rows the source changed were %s in the target; applied anyway"
            " (conflicts: overwrite)",
            table,
            count,
            "absent" if expected.present else "present",
        )

    def _delete(
        self, connection: Any, table: sa.Table, key: Sequence[str], keys: list[tuple[object, ...]]
    ) -> Iterator[int]:
        columns = [table.c[name] for name in key]
        for start in range(0, len(keys), KEYS_PER_STATEMENT):
            chunk = [self._key_values(columns, k) for k in keys[start : start + KEYS_PER_STATEMENT]]
            if len(columns) == 1:
                where = columns[0].in_([values[0] for values in chunk])
            else:
                where = sa.tuple_(*columns).in_(chunk)
            yield connection.execute(table.delete().where(where)).rowcount

    def _insert(self, connection: Any, table: sa.Table, events: list[LakeEvent]) -> None:
        """One multi-row INSERT (PostgreSQL: ``COPY``, the fastest way in)."""
        if not events:
            return
        names = list(dict.fromkeys(n for event in events for n in event.row if n in table.c))
        types = [table.c[name].type for name in names]
        rows = [
            [to_target_value(event.row.get(name), kind, self.dialect)
             for name, kind in zip(names, types, strict=True)]
            for event in events
        ]  # fmt: skip
        if connection.dialect.name == "postgresql":
            _copy(connection, table, names, rows)
        else:
            connection.execute(table.insert(), [dict(zip(names, row, strict=True)) for row in rows])

    def _key_values(
        self, columns: list[sa.Column[Any]], key: tuple[object, ...]
    ) -> tuple[Any, ...]:
        return tuple(
            to_target_value(value, column.type, self.dialect)
            for column, value in zip(columns, key, strict=True)
        )

    def _mark(self, table: str) -> Written:
        mark = self._marks.get(table)
        if mark is None:
            with self.engine.connect() as connection:
                mark, loading = self.progress.read(connection, table)
            self._marks[table] = mark
            if loading:
                self._loading.add(table)
        return mark

    def _named(self, conflict: _Conflict) -> ConflictError:
        """The conflict's first key, found on the target as it was before the batch."""
        table = self.tables.get(conflict.table)
        key = [column.name for column in table.primary_key.columns]
        wrong = next(
            (k for k in conflict.expected.keys
             if self._holds_key(table, key, k) != conflict.expected.present),
            None,
        )  # fmt: skip
        shown = "?" if wrong is None else key_text(key, wrong)
        state = "absent from" if conflict.expected.present else "already in"
        return ConflictError(
            f"table {conflict.table}: the row with key {shown} is {state} the target"
            f" {self.where(conflict.table)}, which the source's change contradicts; repair the"
            " target (replcheck validate / resync) and restart, or set conflicts: overwrite",
            {"table": conflict.table, "key": shown},
        )

    def _holds_key(self, table: sa.Table, key: list[str], values: tuple[object, ...]) -> bool:
        columns = [table.c[name] for name in key]
        converted = self._key_values(columns, values)
        where = sa.and_(*[c == v for c, v in zip(columns, converted, strict=True)])
        with self.engine.connect() as connection:
            found = connection.execute(sa.select(sa.literal(1)).select_from(table).where(where))
            return found.first() is not None


def _copy(connection: Any, table: sa.Table, names: list[str], rows: list[list[Any]]) -> None:
    """``COPY ... FROM STDIN`` of ``rows`` on the transaction's own psycopg connection."""
    prepare = connection.dialect.identifier_preparer
    columns = ", ".join(prepare.quote(name) for name in names)
    statement = f"COPY {prepare.format_table(table)} ({columns}) FROM STDIN"
    import psycopg

    raw = connection.connection.driver_connection
    try:
        with raw.cursor() as cursor, cursor.copy(statement) as copy:
            for row in rows:
                copy.write_row(row)
    except psycopg.IntegrityError as exc:  # as SQLAlchemy reports it for an INSERT
        raise sa.exc.IntegrityError(statement, None, exc) from exc


def net_effect(
    events: Sequence[LakeEvent], key: Sequence[str]
) -> tuple[bool, dict[tuple[object, ...], LakeEvent], dict[tuple[object, ...], LakeEvent]]:
    """Whether the events truncate, and per key after the last truncate its first and its
    latest event."""
    start, truncated = 0, False
    for index, event in enumerate(events):
        if event.op == "t":
            start, truncated = index + 1, True
    first: dict[tuple[object, ...], LakeEvent] = {}
    latest: dict[tuple[object, ...], LakeEvent] = {}
    for event in events[start:]:
        locator = tuple(event.row.get(column) for column in key)
        first.setdefault(locator, event)
        latest[locator] = event
    return truncated, first, latest


def _expectations(
    first: dict[tuple[object, ...], LakeEvent],
    latest: dict[tuple[object, ...], LakeEvent],
    by_insert: bool,
    *,
    loading: bool = False,
) -> list[_Expected]:
    """The keys to delete before the inserts, grouped by what the target must hold: a key
    first inserted absent, first updated or deleted present, a refresh's or load's either
    (every key of a table being loaded: module doc). With ``by_insert``, keys first and last
    inserted form a group of their own that is not deleted: the insert itself fails on a row
    already there (one statement fewer)."""
    groups: dict[tuple[bool | None, bool], list[tuple[object, ...]]] = {}
    for locator, event in first.items():
        group: tuple[bool | None, bool]
        if loading or event.seq >= REFRESH_SEQ_BASE or event.op == "r":
            group = (None, False)
        elif event.op == "c":
            group = (False, by_insert and latest[locator].op != "d")
        else:
            group = (True, False)
        groups.setdefault(group, []).append(locator)
    return [_Expected(present, keys, insert) for (present, insert), keys in groups.items()]
