"""Re-sync of a lake target: the differing keys re-read from the source, written as events.

The keys are read from the source in one consistent snapshot; the position Ps of that
snapshot is the rows' ``POSITION_COLUMN``. A source without a log, or a read that found
none of the keys (so carried no position), uses the lake's high-water mark as it was
before the read: every change up to it was already at the source when the read ran, so
the events do not claim a state the source had not reached. ``cdc_core.resync.rows`` writes
them (see there for how they order against the running pipeline). The keys are then left
for the pipeline feeding the table to read again (``cdc_core.resync.requests``): its row
image store must learn the repaired rows, or a later partial change brings old values back.

Every column the lake keeps and the source has is written -- excluded columns too, as the
pipeline writes whole row images; lake columns the source lacks are NULL. Without ``apply``
(a dry run) the same reads decide what would be written, and nothing is.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cdc_core.capture.position import Position
from cdc_core.lake.layout import changelog_files, high_water_mark
from cdc_core.lake_location import LakeLocation
from cdc_core.names import COMMIT_POS, META_COLUMNS, OP, SEQ
from cdc_core.resync.requests import ResyncRequest, write_request
from cdc_core.resync.rows import RefreshRequest, refresh
from merkle.hashing import RowHasher
from validator.resync.context import (
    ComparisonContext,
    Row,
    Rows,
    SourceRead,
    key_bytes_of,
    read_source,
)
from validator.resync.keys import TypedKey

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LakeRepair:
    """What a lake re-sync wrote (a dry run: would write).

    Attributes:
        refreshed: Keys written as ``r`` events (the source has them).
        deleted: Keys written as ``d`` events (the source no longer has them, the lake does).
        position: The position the events were (would be) written at (Ps).
        absent: Keys neither the source nor the lake has: nothing written for them.
    """

    refreshed: tuple[TypedKey, ...]
    deleted: tuple[TypedKey, ...]
    position: int
    absent: tuple[TypedKey, ...] = ()


def resync_lake(
    context: ComparisonContext, keys: Sequence[TypedKey], request_id: str, apply: bool
) -> LakeRepair:
    """Read ``keys`` from the source and write them to the lake table at Ps (with
    ``apply``; else only what would be written)."""
    lake_table = context.lake_table
    _, lake_schema = changelog_files(lake_table)
    columns = _source_columns(context, lake_schema)
    mark_before = high_water_mark(lake_table)
    read = read_source(context, keys, columns)
    position = read.position if read.position is not None else (mark_before or 0)
    present, gone = _split(context, keys, read)
    in_lake = lake_rows_at(context, gone, None) if gone else {}
    absent = [key for key in gone if key_bytes_of(context, key) not in in_lake]
    gone = [key for key in gone if key_bytes_of(context, key) in in_lake]
    request = RefreshRequest(
        table=lake_table,
        key=context.target_key,
        rows=_rows_table(context, read, present, lake_schema),
        deleted=_keys_table(context, gone, lake_schema),
        position=position,
        position_text=context.source.describe_position(position),
        request_id=request_id,
    )
    if apply:
        refresh(request)
        _ask_pipeline(context, [*present, *gone], position, request_id)
    log.info(
        "comparison %s: %d keys %s, %d %s in %s at %s",
        context.name,
        len(present),
        "refreshed" if apply else "to refresh (dry run)",
        len(gone),
        "deleted" if apply else "to delete",
        lake_table.table,
        context.source.describe_position(position),
    )
    return LakeRepair(tuple(present), tuple(gone), position, tuple(absent))


def _ask_pipeline(
    context: ComparisonContext, keys: Sequence[TypedKey], position: int, request_id: str
) -> None:
    """Leave the repaired keys for the pipeline feeding the table, which reads them again
    so its row image store learns their rows (``cdc_core.resync.requests``)."""
    if not keys:
        return
    lake_table = context.lake_table
    names = context.target_key
    request = ResyncRequest(
        lake_table.table,
        Position(position, str(position)),
        tuple(dict(zip(names, key, strict=True)) for key in keys),
        request_id,
    )
    write_request(lake_table.place, request)


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


def lake_rows_at(
    context: ComparisonContext, keys: Sequence[TypedKey], position: int | None
) -> Rows:
    """The rows of ``keys`` in the lake's mirror, the table users read, as of ``position``
    (None: everything the lake has): the mirror version ``cdc_core.lake.mirror_state`` names,
    with the pipeline's changelog events after it laid over it (a delete drops a row, a
    truncate every row), as the engines read it.
    """
    from cdc_core.lake.mirror_state import mirror_read

    read = mirror_read(context.lake_table, position)
    rows = _latest_rows(context, _key_rows(context, read.files, keys, None, None))
    after = _key_rows(context, read.after, keys, read.mark, position)
    rows = _latest_rows(context, after, rows)
    requested = {key_bytes_of(context, key) for key in keys}
    return {key: row for key, row in rows.items() if key in requested}


def _key_rows(
    context: ComparisonContext,
    files: Sequence[str],
    keys: Sequence[TypedKey],
    mark: tuple[int, int] | None,
    position: int | None,
) -> pa.Table:
    """The rows (or events) of ``files`` whose first key part is one of ``keys``' (whole
    keys are matched by their canonical bytes later), and the truncates; only those after
    ``mark`` and at or below ``position`` when given; with the changelog's columns."""
    import pyarrow as pa

    schema = _schema_of(context)
    firsts = list({key[0] for key in keys if key[0] is not None})
    location = context.lake_table.location
    first = context.target_key[0]
    tables = [_file_rows(location, f, first, firsts, mark, position) for f in files]
    aligned = [_aligned(table, schema) for table in tables]
    return pa.concat_tables(aligned) if aligned else schema.empty_table()


def _file_rows(
    location: LakeLocation,
    uri: str,
    first_key: str,
    firsts: list[object],
    mark: tuple[int, int] | None,
    position: int | None,
) -> pa.Table:
    """One file's rows of ``_key_rows``, its string views as strings first (delta-rs may
    write them; pyarrow's filters have no kernel for them)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    path, filesystem = location.file_of(uri)
    table = pq.read_table(path, filesystem=filesystem)
    plain = [f.with_type(_without_views(f.type)) for f in table.schema]
    table = table.cast(pa.schema(plain))
    key = table.column(first_key)
    wanted = pc.or_(pc.is_in(key, pa.array(firsts).cast(key.type)), pc.equal(table[OP], "t"))
    positions, seqs = table.column(COMMIT_POS), table.column(SEQ)
    if mark is not None:
        at_mark = pc.and_(pc.equal(positions, mark[0]), pc.greater(seqs, mark[1]))
        wanted = pc.and_(wanted, pc.or_(pc.greater(positions, mark[0]), at_mark))
    if position is not None:
        wanted = pc.and_(wanted, pc.less_equal(positions, position))
    return table.filter(wanted)


def _without_views(kind: pa.DataType) -> pa.DataType:
    import pyarrow as pa

    views = {pa.string_view(): pa.string(), pa.binary_view(): pa.binary()}
    return views.get(kind, kind)


def _aligned(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with ``schema``'s columns and types (NULL where a file lacks a column)."""
    import pyarrow as pa

    columns = [
        table.column(f.name).cast(f.type)
        if f.name in table.column_names
        else pa.nulls(len(table), f.type)
        for f in schema
    ]
    return pa.table(columns, schema=schema)


def _schema_of(context: ComparisonContext) -> pa.Schema:
    """The changelog's schema: the mirror's rows carry the same columns."""
    import pyarrow as pa

    return pa.schema(context.lake_table.changelog_at.open_delta().schema().to_arrow())


def _latest_rows(context: ComparisonContext, events: pa.Table, rows: Rows | None = None) -> Rows:
    """``rows`` (none by default) with ``events`` applied in commit order."""
    columns = context.target_columns
    hasher = RowHasher(context.reconciled.layout)
    ordered = sorted(events.to_pylist(), key=lambda e: (e[COMMIT_POS], e[SEQ]))
    rows = dict(rows or {})
    for event in ordered:
        if event[OP] == "t":
            rows.clear()
            continue
        values: Row = [event.get(c) for c in columns]
        key_bytes = hasher.key_bytes(values)
        if event[OP] == "d":
            rows.pop(key_bytes, None)
        else:
            rows[key_bytes] = values
    return rows
