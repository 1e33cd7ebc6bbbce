"""The initial load: tables a pipeline captures but has not loaded yet are first read in one
consistent snapshot at a position P, into the row image store and the lake as ``r`` events
with ``commit_pos = P``; streaming then applies only their transactions committed after P.

A load is recorded in the checkpoint before it starts (``loading``) and after it ends
(``loaded``). A crash in between leaves lake tables this pipeline created and did not
finish: they are removed and the load starts over at a new snapshot. The last commit of a
load carries the pipeline's app transaction at P, so a crash after it and before the
checkpoint is recognised as a finished load.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

from cdc_core.capture.position import Position
from cdc_core.capture.source import (
    LOCATOR_COLUMN,
    LogReader,
    SnapshotReader,
    TableDescription,
    TableSnapshot,
)
from cdc_core.ddl.descriptions import check_carried
from cdc_core.errors import TerminalError
from cdc_core.lake.target import LakeEvent, Sink
from cdc_core.pipeline.checkpoint import Checkpoint, write_checkpoint
from cdc_core.pipeline.config import PipelineConfig
from cdc_core.pipeline.metrics import MetricsTracker
from cdc_core.rebuild.copies import has_copies, held_copies, numbered_event, with_copy
from cdc_core.rebuild.full_width import EqualKeysError
from cdc_core.rebuild.image_store import RowImageStore


@dataclass(frozen=True, slots=True)
class LoadContext:
    """What an initial load uses of its context."""

    config: PipelineConfig
    reader: LogReader
    snapshots: SnapshotReader | None
    tables: Sequence[str]
    sink: Sink
    store: RowImageStore
    describe: Callable[[str], TableDescription]
    metrics: MetricsTracker


logger = logging.getLogger(__name__)


class LakeTableInUseError(TerminalError):
    """A table to load already exists in the lake and this pipeline did not write it."""


def load_tables(context: LoadContext, checkpoint: Checkpoint) -> Checkpoint:
    """Load every captured table not loaded yet; returns the checkpoint recording it."""
    checkpoint = _settle_unfinished(context, checkpoint)
    wanted = [table for table in context.tables if table not in checkpoint.loaded]
    if context.snapshots is None:
        if checkpoint.lake_position is None and checkpoint.buffer is None:
            # No snapshot reader: the tables start empty where the log ends now.
            start = context.reader.end_position()
            checkpoint = replace(checkpoint, resume_at=start, lake_position=start)
            write_checkpoint(context.config.state_dir, checkpoint)
        return checkpoint
    if not wanted:
        return checkpoint
    _refuse_foreign_tables(context, wanted)
    _refuse_uncarried_columns(context, wanted)
    with context.snapshots.snapshot(wanted) as (position, snapshots):
        _check_not_behind(context, checkpoint, position)
        checkpoint = replace(checkpoint, loading=dict.fromkeys(wanted, position))
        write_checkpoint(context.config.state_dir, checkpoint)
        for number, snapshot in enumerate(snapshots, start=1):
            _load_table(context, snapshot, position, (number, len(wanted)))
    context.metrics.load_finished(position)
    return _finish(context, checkpoint, wanted, position)


def _check_not_behind(context: LoadContext, checkpoint: Checkpoint, position: Position) -> None:
    """A table added to a running pipeline needs a snapshot at or after where it reads: the
    log before that was read without the table, and its changes there are gone."""
    reached = checkpoint.lake_position
    if checkpoint.buffer is not None and reached is not None and position < reached:
        raise TerminalError(
            f"the snapshot for the new tables of pipeline {context.config.name} is at"
            f" {position}, before the {reached} the pipeline has read to; the source's snapshot"
            " reader must snapshot the current state",
            {"position": position.text, "pipeline_position": reached.text},
        )


def _settle_unfinished(context: LoadContext, checkpoint: Checkpoint) -> Checkpoint:
    """Tables whose load a crash interrupted: finished (app transaction) or removed."""
    loaded = dict(checkpoint.loaded)
    for table, position in checkpoint.loading.items():
        if context.sink.load_position(table) == position.value:
            loaded[table] = position
            continue
        logger.warning("removing the unfinished initial load of %s to start it over", table)
        context.sink.remove_table(table)
    if loaded == checkpoint.loaded and not checkpoint.loading:
        return checkpoint
    settled = replace(checkpoint, loaded=loaded, loading={})
    finished = [position for table, position in checkpoint.loading.items() if table in loaded]
    if finished and checkpoint.lake_position is None and checkpoint.buffer is None:
        # A first load finished before its checkpoint: the log is read from where it was
        # taken, as ``_finish`` records (without it, reading would start at the log's end).
        position = max(finished)
        settled = replace(settled, lake_position=position, resume_at=position)
    return settled


def _refuse_foreign_tables(context: LoadContext, tables: list[str]) -> None:
    for table in tables:
        if context.sink.exists(table):
            raise LakeTableInUseError(
                f"table {table} already exists at {context.sink.where(table)} but pipeline"
                f" {context.config.name} has not loaded it; remove it there or write to"
                " another lake or schema",
                {"table": table},
            )


def _refuse_uncarried_columns(context: LoadContext, tables: list[str]) -> None:
    """Every table is checked before any is loaded, so a column the source cannot carry or
    the target cannot hold stops the pipeline before it writes anything, named in one
    message with the table's other such columns."""
    for table in tables:
        described = context.reader.describe(table)
        ignored = context.config.tables.ignore_columns.get(table, frozenset())
        check_carried(described, ignored, context.sink.refused(described))


def _load_table(
    context: LoadContext, snapshot: TableSnapshot, position: Position, number: tuple[int, int]
) -> None:
    table = snapshot.description.table
    context.metrics.loading(table, *number, snapshot.estimated_rows)
    description = context.describe(table)
    store = context.store
    store.truncate(table, position, 0)  # hide images an interrupted earlier load left
    rows = 0
    chunks = _iter_chunks(context, snapshot, position)
    copies = has_copies(description.key)
    for events in chunks:
        placed: list[LakeEvent] = []
        for event, locator in events:
            if copies:  # equal rows: the next copy of their values
                copy = held_copies(store, table, locator, position, event.seq)
                event, locator = numbered_event(event, copy), with_copy(locator, copy)
            elif not description.unique and store.get(table, locator, position, seq=event.seq - 1):
                raise EqualKeysError.of(table, position)
            store.put(table, locator, position, event.row, event.seq)
            placed.append(event)
        rows += len(events)
        context.sink.write_snapshot(description, placed, position)
        context.metrics.loaded_rows(len(events))
    store.flush()  # the images are durable before the lake marks the load finished
    context.sink.finish_snapshot(description, position)
    logger.info("initial load of %s: %s rows at position %s", table, rows, position)


def _iter_chunks(
    context: LoadContext, snapshot: TableSnapshot, position: Position
) -> Iterator[list[tuple[LakeEvent, object]]]:
    """The snapshot's rows as ``r`` events with their locators, a batch's worth at a time."""
    table = snapshot.description.table
    key = snapshot.description.key
    chunk: list[tuple[LakeEvent, object]] = []
    seq = 1  # seq 0 is the truncate that hides older images
    for batch in snapshot.batches:
        for row in batch.to_pylist():
            if LOCATOR_COLUMN in row:  # a physical row id, as the log locates rows
                locator = row.pop(LOCATOR_COLUMN)
            else:
                locator = tuple(row[column] for column in key)
            row = context.config.tables.strip_row(table, row)
            chunk.append((LakeEvent("r", row, position.value, seq, None, None), locator))
            seq += 1
            if len(chunk) >= context.config.batch_max_events:
                yield chunk
                chunk = []
    if chunk:
        yield chunk


def _finish(
    context: LoadContext, checkpoint: Checkpoint, tables: list[str], position: Position
) -> Checkpoint:
    context.store.flush()
    loaded = dict(checkpoint.loaded) | dict.fromkeys(tables, position)
    keys = checkpoint.keys | {table: context.describe(table).key for table in tables}
    first = checkpoint.lake_position is None and checkpoint.buffer is None
    checkpoint = replace(
        checkpoint,
        loaded=loaded,
        keys=keys,
        loading={},
        lake_position=position if first else checkpoint.lake_position,
        resume_at=position if first else checkpoint.resume_at,
    )
    write_checkpoint(context.config.state_dir, checkpoint)
    return checkpoint
