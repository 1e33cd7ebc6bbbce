"""The lake sink: committed, full-width changes into Delta changelog and mirror tables.

Exactly once (DESIGN.md, "Change events and the lake"): every Delta commit the sink makes
carries the app transaction ``replcheck.pipeline.<name>`` whose version is the source
position the batch reaches. Transactions are written in commit order and each batch holds
whole transactions, so a table's recorded version V means "every event of this table with
``_commit_pos <= V`` is in it". After a crash at any point -- between the changelog and the
mirror commit, or between two tables -- the restarted pipeline re-reads the log from its
checkpoint and the sink drops, per Delta table, the events at or below that table's V.

After each batch the sink records the position the whole pipeline has reached in a small
progress file (``cdc_core.lake.write_progress``), so a table that saw no change is still
known to be caught up: the lake's high-water mark is exact.

Schema rule (README, "Schema changes"): a column added at the source is added to both lake
tables (Delta schema merge, no rewrite); a dropped column stays in the lake and is NULL in
later events; a column whose type changed keeps the lake's type while every value converts
losslessly (e.g. INT widened to BIGINT), otherwise the sink stops with ``SchemaChangeError``.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, time, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cdc_core.errors import TerminalError
from cdc_core.events import CommittedTransaction, RowChange
from cdc_core.lake import (
    COMMIT_POS,
    COMMIT_TS,
    OP,
    PART_POSITION_KEY,
    PART_SEQ_KEY,
    POSITION_KEY,
    POSITION_TEXT_KEY,
    SEQ,
    SNAPSHOT_KEY,
    TXID,
    LakeTable,
    meta_fields,
    write_progress,
)
from cdc_core.names import merge_assignments, merge_key_predicate
from cdc_core.position import Position
from cdc_core.source import TableDescription

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable

logger = logging.getLogger(__name__)


class SchemaChangeError(TerminalError):
    """A source column changed type in a way the lake's column cannot hold losslessly."""


class StaleDescriptionError(Exception):
    """A batch's values do not fit its table description: describe the table again."""

    def __init__(self, table: str) -> None:
        super().__init__(f"the description of table {table} does not fit its events")
        self.table = table


@dataclass(frozen=True, slots=True)
class LakeEvent:
    """One change as the lake stores it: the full row image plus its bookkeeping.

    ``row`` is the after-image (``c``, ``u``, ``r``), the before-image (``d``) or empty
    (``t``). ``seq`` orders events inside one ``commit_pos``.
    """

    op: str
    row: Mapping[str, object]
    commit_pos: int
    seq: int
    txid: str | None
    commit_ts: datetime | None

    @classmethod
    def of_change(cls, change: RowChange, seq: int, transaction: CommittedTransaction) -> LakeEvent:
        """The lake event of a rebuilt change of a committed transaction."""
        image = change.before if change.op == "d" else change.after
        return cls(
            change.op,
            image or {},
            transaction.commit_pos.value,
            seq,
            transaction.txid,
            transaction.commit_ts,
        )

    def to_record(self) -> dict[str, object]:
        """The changelog row: the image's columns, then the bookkeeping columns."""
        return {
            **self.row,
            OP: self.op,
            COMMIT_POS: self.commit_pos,
            SEQ: self.seq,
            TXID: self.txid,
            COMMIT_TS: self.commit_ts,
        }


@dataclass(slots=True)
class TableBatch:
    """The events of one table in one sink batch, in commit order."""

    description: TableDescription
    events: list[LakeEvent] = field(default_factory=list)


def app_id_of(pipeline: str) -> str:
    """The Delta app transaction id of a pipeline's commits."""
    return f"replcheck.pipeline.{pipeline}"


class LakeSink:
    """Writes batches of whole committed transactions to the lake, exactly once.

    Args:
        lake: The lake's root directory.
        pipeline: The pipeline's name (its app transaction id and progress file).
    """

    def __init__(self, lake: Path, pipeline: str) -> None:
        self.lake = lake
        self.pipeline = pipeline
        self.app_id = app_id_of(pipeline)
        self._tables: dict[Path, DeltaTable] = {}

    def table(self, name: str) -> LakeTable:
        """Where source table ``name`` lives in this lake."""
        return LakeTable(self.lake, name)

    def remove_table(self, name: str) -> None:
        """Delete a table's changelog and mirror (an initial load that did not finish)."""
        root = self.table(name).root
        for path in list(self._tables):
            if path.is_relative_to(root):
                del self._tables[path]
        shutil.rmtree(root, ignore_errors=True)

    def written_position(self, path: Path) -> int | None:
        """The position this pipeline's commits to the Delta table at ``path`` reached."""
        delta = self._open(path)
        return None if delta is None else delta.transaction_version(self.app_id)

    def write(
        self, batches: Iterable[TableBatch], position: Position, tables: Sequence[str]
    ) -> int:
        """Write one batch that reaches ``position``, then record the pipeline's progress.

        Args:
            batches: Per table, its events with ``commit_pos <= position``.
            position: How far the source log has been consumed, in whole transactions.
            tables: Every table the pipeline captures (the progress file lists them).

        Returns:
            The number of events written (events already in the lake are not counted).
        """
        written = 0
        for batch in batches:
            written += self._write_table(batch, position)
        write_progress(self.lake, self.pipeline, position, tables)
        return written

    def write_snapshot(
        self, description: TableDescription, events: list[LakeEvent], position: Position
    ) -> None:
        """Append one chunk of a table's initial snapshot (``r`` events) to both tables.

        The chunks carry no app transaction: ``finish_snapshot`` marks the load complete.
        """
        target = self.table(description.table)
        properties = self._properties(position, snapshot=True)
        records = [event.to_record() for event in events]
        for path in (target.changelog, target.mirror) if description.key else (target.changelog,):
            self._write(path, self._arrow(path, description, records), properties)

    def finish_snapshot(self, description: TableDescription, position: Position) -> None:
        """Mark a table's initial load complete: an empty commit with the app transaction."""
        target = self.table(description.table)
        empty = self._arrow(target.changelog, description, [])
        paths = (target.mirror, target.changelog) if description.key else (target.changelog,)
        for path in paths:  # the changelog's mark last: it is what a restart checks
            self._write(path, empty, self._properties(position))

    def _write(self, path: Path, data: pa.Table, properties: Any) -> None:
        from deltalake import write_deltalake

        path.mkdir(parents=True, exist_ok=True)
        target = self._open(path) or str(path)
        write_deltalake(
            target, data, mode="append", schema_mode="merge", commit_properties=properties
        )

    def _write_table(self, batch: TableBatch, position: Position) -> int:
        target = self.table(batch.description.table)
        events = self._unwritten(target.changelog, batch.events)
        if events:
            self._append(target.changelog, batch.description, events, position)
        if batch.description.key:
            mirror_events = self._unwritten(target.mirror, batch.events)
            if mirror_events:
                properties = self._properties(position)
                self._merge_mirror(target.mirror, batch.description, mirror_events, properties)
        return len(events)

    def _unwritten(self, path: Path, events: list[LakeEvent]) -> list[LakeEvent]:
        """The events not in the Delta table yet: after its app transaction version, and
        after the last part written of a transaction too big for one batch."""
        done = self.written_position(path)
        part_pos, part_seq = self._written_part(path)
        return [
            event
            for event in events
            if (done is None or event.commit_pos > done)
            and not (event.commit_pos == part_pos and event.seq <= part_seq)
        ]

    def _written_part(self, path: Path) -> tuple[int | None, int]:
        """(commit_pos, last seq) of a big transaction's part the newest commit recorded."""
        delta = self._open(path)
        if delta is None:
            return None, -1
        newest = delta.history(limit=1)
        if not newest or PART_POSITION_KEY not in newest[0]:
            return None, -1
        return int(newest[0][PART_POSITION_KEY]), int(newest[0][PART_SEQ_KEY])

    def write_part(self, batches: Iterable[TableBatch], commit_pos: Position) -> int:
        """Write part of one transaction too big for a batch (its events in seq order).

        The commits record the transaction's position and the last seq they hold instead of
        an app transaction: the transaction is complete only once a batch that reaches its
        commit position is written, and a restart skips the parts already in the lake.
        """
        written = 0
        for batch in batches:
            target = self.table(batch.description.table)
            paths = (
                [target.changelog, target.mirror] if batch.description.key else [target.changelog]
            )
            for path in paths:
                events = self._unwritten(path, batch.events)
                if not events:
                    continue
                marker = {
                    PART_POSITION_KEY: str(commit_pos.value),
                    PART_SEQ_KEY: str(events[-1].seq),
                }
                properties = self._part_properties(marker)
                if path == target.changelog:
                    data = self._arrow(path, batch.description, [e.to_record() for e in events])
                    self._write(path, data, properties)
                    written += len(events)
                else:
                    self._merge_mirror(path, batch.description, events, properties)
        return written

    @staticmethod
    def _part_properties(marker: dict[str, str]) -> Any:
        from deltalake import CommitProperties

        return CommitProperties(custom_metadata=marker)

    def _open(self, path: Path) -> DeltaTable | None:
        from deltalake import DeltaTable

        delta = self._tables.get(path)
        if delta is not None:
            delta.update_incremental()
            return delta
        if not (path / "_delta_log").is_dir():
            return None
        delta = self._tables[path] = DeltaTable(str(path))
        return delta

    def _properties(self, position: Position, *, snapshot: bool = False) -> Any:
        """Commit metadata: the position reached, and the app transaction at it (a snapshot
        chunk instead records the snapshot's position and no app transaction)."""
        from deltalake import CommitProperties, Transaction

        if snapshot:
            return CommitProperties(custom_metadata={SNAPSHOT_KEY: str(position.value)})
        return CommitProperties(
            custom_metadata={POSITION_KEY: str(position.value), POSITION_TEXT_KEY: position.text},
            app_transactions=[Transaction(app_id=self.app_id, version=position.value)],
        )

    def _append(
        self,
        path: Path,
        description: TableDescription,
        events: list[LakeEvent],
        position: Position,
    ) -> None:
        data = self._arrow(path, description, [event.to_record() for event in events])
        self._write(path, data, self._properties(position))

    def _merge_mirror(
        self,
        path: Path,
        description: TableDescription,
        events: list[LakeEvent],
        properties: Any,
    ) -> None:
        """Apply the batch's net effect per key in one MERGE (or create the mirror)."""
        truncated, latest = net_effect(events, description.key)
        data = self._arrow(path, description, [event.to_record() for event in latest])
        delta = self._open(path)
        if delta is None:
            self._create_mirror(path, data, properties)
            return
        keys = merge_key_predicate(description.key)
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
        merger.execute()

    def _create_mirror(self, path: Path, data: pa.Table, properties: Any) -> None:
        import pyarrow.compute as pc

        self._write(path, data.filter(pc.not_equal(data[OP], "d")), properties)

    def _arrow(
        self, path: Path, description: TableDescription, records: list[dict[str, object]]
    ) -> pa.Table:
        """The records as Arrow, typed by the source description, fitted to the lake's types."""
        import pyarrow as pa

        schema = pa.schema([*description.schema, *meta_fields()])
        failures = (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError)
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
        return fit_to_lake(data, pa.schema(delta.schema().to_arrow()), description.table)


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
        latest[tuple(event.row.get(column) for column in key)] = event
    return truncated, list(latest.values())


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
    """Cast columns whose source type changed back to the lake's type, losslessly only.

    Raises:
        SchemaChangeError: A value does not convert without loss (names table, column and
            both types, and the fix).
    """
    import pyarrow as pa

    for index, column in enumerate(data.schema):
        if column.name not in lake_schema.names:
            continue  # a new column: Delta's schema merge adds it
        wanted = lake_schema.field(column.name).type
        if _same_type(column.type, wanted):
            continue
        try:
            converted = data.column(index).cast(wanted, safe=True)
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
