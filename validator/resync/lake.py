"""Re-sync of a lake target: the differing keys re-read from the source, written as events.

The keys are read from the source in one consistent snapshot; the position Ps of that
snapshot is the rows' ``POSITION_COLUMN``. A source without a log, or a read that found
none of the keys (so carried no position), uses the lake's high-water mark as it was
before the read: every change up to it was already at the source when the read ran, so
the events do not claim a state the source had not reached. ``cdc_core.refresh`` writes
them (see there for how they order against the running pipeline).

Every column the lake keeps and the source has is written -- excluded columns too, as the
pipeline writes whole row images; lake columns the source lacks are NULL.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cdc_core.lake import META_COLUMNS, changelog_files, high_water_mark
from cdc_core.refresh import RefreshRequest, refresh
from validator.resync.context import ComparisonContext, SourceRead, key_bytes_of, read_source
from validator.resync.keys import TypedKey

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LakeRepair:
    """What a lake re-sync wrote.

    Attributes:
        refreshed: Keys written as ``r`` events (the source has them).
        deleted: Keys written as ``d`` events (the source no longer has them).
        position: The position the events were written at (Ps).
    """

    refreshed: tuple[TypedKey, ...]
    deleted: tuple[TypedKey, ...]
    position: int


def resync_lake(
    context: ComparisonContext, keys: Sequence[TypedKey], request_id: str
) -> LakeRepair:
    """Read ``keys`` from the source and write them to the lake table at Ps."""
    lake_table = context.lake_table
    _, lake_schema = changelog_files(lake_table)
    columns = _source_columns(context, lake_schema)
    mark_before = high_water_mark(lake_table)
    read = read_source(context, keys, columns)
    position = read.position if read.position is not None else (mark_before or 0)
    present, gone = _split(context, keys, read)
    request = RefreshRequest(
        table=lake_table,
        key=context.target_key,
        rows=_rows_table(context, read, present, lake_schema),
        deleted=_keys_table(context, gone, lake_schema),
        position=position,
        position_text=str(position),
        request_id=request_id,
    )
    refresh(request)
    log.info(
        "comparison %s: %d keys refreshed, %d deleted in %s at %s",
        context.name,
        len(present),
        len(gone),
        lake_table.table,
        position,
    )
    return LakeRepair(tuple(present), tuple(gone), position)


def _source_columns(context: ComparisonContext, lake_schema: pa.Schema) -> list[str]:
    """Source columns the lake keeps (by their target names), readable by the connector."""
    rules = context.comparison.columns
    kept = set(lake_schema.names) - set(META_COLUMNS)
    return [
        c.name
        for c in context.source_schema.columns
        if c.ltype is not None and rules.target_name(c.name) in kept
    ]


def _split(
    context: ComparisonContext, keys: Sequence[TypedKey], read: SourceRead
) -> tuple[list[TypedKey], list[TypedKey]]:
    present: list[TypedKey] = []
    gone: list[TypedKey] = []
    for key in keys:
        (present if key_bytes_of(context, key) in read.rows else gone).append(key)
    return present, gone


def _rows_table(
    context: ComparisonContext, read: SourceRead, keys: Sequence[TypedKey], lake_schema: pa.Schema
) -> pa.Table:
    rename = context.comparison.columns.target_name
    records = [
        {rename(name): value for name, value in read.extra[key_bytes_of(context, key)].items()}
        for key in keys
    ]
    names = [rename(c) for c in _source_columns(context, lake_schema)]
    return _typed(records, [lake_schema.field(n) for n in names])


def _keys_table(
    context: ComparisonContext, keys: Sequence[TypedKey], lake_schema: pa.Schema
) -> pa.Table:
    names = context.target_key
    records = [dict(zip(names, key, strict=True)) for key in keys]
    return _typed(records, [lake_schema.field(n) for n in names])


def _typed(records: list[dict[str, object]], fields: list[pa.Field]) -> pa.Table:
    import pyarrow as pa

    schema = pa.schema([f.with_nullable(True) for f in fields])
    return pa.Table.from_pylist(records, schema=schema)
