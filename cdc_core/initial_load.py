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
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

from cdc_core.checkpoint import Checkpoint, write_checkpoint
from cdc_core.errors import TerminalError
from cdc_core.position import Position
from cdc_core.sink import LakeEvent
from cdc_core.source import LOCATOR_COLUMN, TableSnapshot

if TYPE_CHECKING:
    from cdc_core.pipeline import Pipeline

logger = logging.getLogger(__name__)


class LakeTableInUseError(TerminalError):
    """A table to load already exists in the lake and this pipeline did not write it."""


def load_tables(pipeline: Pipeline, checkpoint: Checkpoint) -> Checkpoint:
    """Load every captured table not loaded yet; returns the checkpoint recording it."""
    checkpoint = _settle_unfinished(pipeline, checkpoint)
    wanted = [table for table in pipeline.tables if table not in checkpoint.loaded]
    if pipeline.snapshots is None:
        if checkpoint.lake_position is None and checkpoint.buffer is None:
            # No snapshot reader: the tables start empty where the log ends now.
            start = pipeline.reader.end_position()
            checkpoint = replace(checkpoint, resume_at=start, lake_position=start)
            write_checkpoint(pipeline.config.state_dir, checkpoint)
        return checkpoint
    if not wanted:
        return checkpoint
    _refuse_foreign_tables(pipeline, wanted)
    with pipeline.snapshots.snapshot(wanted) as (position, snapshots):
        _check_not_behind(pipeline, checkpoint, position)
        checkpoint = replace(checkpoint, loading=dict.fromkeys(wanted, position))
        write_checkpoint(pipeline.config.state_dir, checkpoint)
        for snapshot in snapshots:
            _load_table(pipeline, snapshot, position)
    return _finish(pipeline, checkpoint, wanted, position)


def _check_not_behind(pipeline: Pipeline, checkpoint: Checkpoint, position: Position) -> None:
    """A table added to a running pipeline needs a snapshot at or after where it reads: the
    log before that was read without the table, and its changes there are gone."""
    reached = checkpoint.lake_position
    if checkpoint.buffer is not None and reached is not None and position < reached:
        raise TerminalError(
            f"the snapshot for the new tables of pipeline {pipeline.config.name} is at"
            f" {position}, before the {reached} the pipeline has read to; the source's snapshot"
            " reader must snapshot the current state",
            {"position": position.text, "pipeline_position": reached.text},
        )


def _settle_unfinished(pipeline: Pipeline, checkpoint: Checkpoint) -> Checkpoint:
    """Tables whose load a crash interrupted: finished (app transaction) or removed."""
    loaded = dict(checkpoint.loaded)
    for table, position in checkpoint.loading.items():
        lake_table = pipeline._sink.table(table)
        if pipeline._sink.written_position(lake_table.changelog) == position.value:
            loaded[table] = position
            continue
        logger.warning("removing the unfinished initial load of %s to start it over", table)
        pipeline._sink.remove_table(table)
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


def _refuse_foreign_tables(pipeline: Pipeline, tables: list[str]) -> None:
    for table in tables:
        lake_table = pipeline._sink.table(table)
        if lake_table.exists():
            raise LakeTableInUseError(
                f"lake table {table} already exists at {lake_table.root} but pipeline"
                f" {pipeline.config.name} has not loaded it; remove that directory or use"
                " another lake",
                {"table": table},
            )


def _load_table(pipeline: Pipeline, snapshot: TableSnapshot, position: Position) -> None:
    table = snapshot.description.table
    description = pipeline.describe(table)
    store = pipeline._store
    store.truncate(table, position, 0)  # hide images an interrupted earlier load left
    rows = 0
    chunks = _iter_chunks(pipeline, snapshot, position)
    for events in chunks:
        for event, locator in events:
            store.put(table, locator, position, event.row, event.seq)
        rows += len(events)
        pipeline._sink.write_snapshot(description, [event for event, _ in events], position)
    store.flush()  # the images are durable before the lake marks the load finished
    pipeline._sink.finish_snapshot(description, position)
    logger.info("initial load of %s: %s rows at position %s", table, rows, position)


def _iter_chunks(
    pipeline: Pipeline, snapshot: TableSnapshot, position: Position
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
            row = pipeline.config.tables.strip_row(table, row)
            chunk.append((LakeEvent("r", row, position.value, seq, None, None), locator))
            seq += 1
            if len(chunk) >= pipeline.config.batch_max_events:
                yield chunk
                chunk = []
    if chunk:
        yield chunk


def _finish(
    pipeline: Pipeline, checkpoint: Checkpoint, tables: list[str], position: Position
) -> Checkpoint:
    pipeline._store.flush()
    loaded = dict(checkpoint.loaded) | dict.fromkeys(tables, position)
    first = checkpoint.lake_position is None and checkpoint.buffer is None
    checkpoint = replace(
        checkpoint,
        loaded=loaded,
        loading={},
        lake_position=position if first else checkpoint.lake_position,
        resume_at=position if first else checkpoint.resume_at,
    )
    write_checkpoint(pipeline.config.state_dir, checkpoint)
    return checkpoint
