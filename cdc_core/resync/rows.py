"""Re-sync of chosen rows into the lake: refresh (``r``) and delete events at a position.

A re-sync reads exactly the differing keys from the source in one consistent snapshot at
position Ps (DESIGN.md, "Re-sync") and hands them here. They are written as events at
``_commit_pos = Ps``:

- ``r`` events carry the row as the source has it at Ps;
- ``d`` events (key columns set, every other column NULL) mark keys gone at the source.

Their ``_seq`` starts at ``REFRESH_SEQ_BASE`` (2**62), above any sequence a pipeline
gives the changes of one transaction, so at an equal position a refresh orders after the
pipeline's events -- which the snapshot at Ps already contains. Events the pipeline writes
concurrently at a position above Ps order after the refresh and win, so the state of the
table at any position stays right without stopping the pipeline.

The changelog append is one Delta commit with an app transaction of its own
(``replcheck.resync.<request>``) and ``replcheck.resync_position`` in its metadata -- never
``replcheck.position``, which would raise the lake's high-water mark past log positions the
pipeline has not written yet. The mirror is then updated by a MERGE guarded by
``t._commit_pos <= s._commit_pos`` (updates and deletes alike), and keys with a changelog
event above Ps are left alone: the pipeline's newer image stays. A MERGE that conflicts
with a concurrent pipeline commit is retried on the new table version.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import time
from collections.abc import Callable, Hashable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from cdc_core.disk_full import naming_full_disk
from cdc_core.errors import ContractError, TransientError
from cdc_core.lake.layout import (
    RESYNC_POSITION_KEY,
    RESYNC_POSITION_TEXT_KEY,
    RESYNC_REQUEST_KEY,
    LakeTable,
    meta_fields,
)
from cdc_core.lake.mirror_rebuild import merge_or_rebuild
from cdc_core.lake.sink import fit_to_lake
from cdc_core.lake.target import REFRESH_SEQ_BASE
from cdc_core.lake_location import LakeLocation
from cdc_core.names import (
    COMMIT_POS,
    COMMIT_TS,
    OP,
    SEQ,
    TXID,
    merge_assignments,
    merge_key_predicate,
)
from cdc_core.rebuild.image_store import to_locator_bytes

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable

log = logging.getLogger(__name__)

COMMIT_ATTEMPTS = 5
_RERUN = "run the re-sync again (`replcheck resync ... --apply`)"  # on a full disk
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class RefreshRequest:
    """Rows to re-sync into one lake table, all read at one source position.

    Attributes:
        table: The lake table.
        key: Its key columns, as the lake names them.
        rows: The current source rows (lake column names, no bookkeeping columns).
        deleted: The key columns of keys the source no longer has.
        position: The source position the rows were read at (Ps).
        position_text: The same position, human-readable.
        request_id: Names the app transaction (``replcheck.resync.<request_id>``).
    """

    table: LakeTable
    key: tuple[str, ...]
    rows: pa.Table
    deleted: pa.Table
    position: int
    position_text: str
    request_id: str

    def __post_init__(self) -> None:
        if not self.key:
            raise ContractError("a re-sync needs the table's key columns")
        for name, data in (("rows", self.rows), ("deleted", self.deleted)):
            missing = [k for k in self.key if k not in data.column_names]
            if missing:
                raise ContractError(f"re-sync {name} lack key columns {missing}")

    @property
    def app_id(self) -> str:
        """The Delta app transaction of this re-sync's commits."""
        return f"replcheck.resync.{self.request_id}"


@dataclass(frozen=True, slots=True)
class RefreshReport:
    """What a refresh wrote.

    Attributes:
        refreshed: ``r`` events written.
        deleted: ``d`` events written.
        mirror_skipped: Keys the mirror kept because the pipeline had a newer event.
    """

    refreshed: int
    deleted: int
    mirror_skipped: int


def refresh(request: RefreshRequest) -> RefreshReport:
    """Write a re-sync's events to the changelog, then to the mirror (see module doc).

    Raises:
        TerminalError: The lake table has no changelog (``changelog_files`` explains).
        TransientError: The mirror kept conflicting with concurrent commits.
    """
    table = request.table
    if not table.exists():
        raise TransientError(
            f"lake table {table.table} has no changelog at {table.changelog_at}:"
            " run the CDC pipeline (its initial load) before a re-sync",
            {"table": table.table},
        )
    changelog = table.changelog_at.open_delta()
    events = _events(request, changelog)
    if not _done(changelog, request):
        with _writing(table, table.changelog_at):
            _retry(lambda: _append(request, events), table.table, "changelog")
    skipped = 0
    if table.mirror_at.join("_delta_log").is_dir():
        with _writing(table, table.mirror_at):
            skipped = _retry(lambda: _merge_mirror(request, events), table.table, "mirror")
    log.info(
        "re-sync %s of %s at %s: %d refreshed, %d deleted, mirror kept %d newer",
        request.request_id,
        request.table.table,
        request.position_text,
        request.rows.num_rows,
        request.deleted.num_rows,
        skipped,
    )
    return RefreshReport(request.rows.num_rows, request.deleted.num_rows, skipped)


def _writing(table: LakeTable, delta: LakeLocation) -> AbstractContextManager[None]:
    """A full local disk met while writing ``delta`` named (an object store is no disk of
    ours to fill: its errors name themselves, ``cdc_core.lake_location.StoreError``)."""
    if not delta.is_local:
        return contextlib.nullcontext()
    return naming_full_disk(delta.local_path, table.lake, _RERUN)


def _done(delta: DeltaTable, request: RefreshRequest) -> bool:
    """True when this re-sync's commit is already in ``delta`` (a retried call)."""
    version = delta.transaction_version(request.app_id)
    return version is not None and version >= request.position


def _events(request: RefreshRequest, changelog: DeltaTable) -> pa.Table:
    """The refresh and delete events, in the changelog's schema."""
    import pyarrow as pa

    lake_schema = pa.schema(changelog.schema().to_arrow())
    data_fields = [f for f in lake_schema if f.name not in {m.name for m in meta_fields()}]
    parts = [
        _with_meta(_aligned(request.rows, data_fields), "r", request, 0),
        _with_meta(_aligned(request.deleted, data_fields), "d", request, request.rows.num_rows),
    ]
    events = pa.concat_tables(parts)
    return fit_to_lake(events, lake_schema, request.table.table)


def _aligned(data: pa.Table, fields: Sequence[pa.Field]) -> pa.Table:
    """``data`` with exactly the lake's data columns (NULL where the rows lack one)."""
    import pyarrow as pa

    unknown = sorted(set(data.column_names) - {f.name for f in fields})
    if unknown:
        raise ContractError(f"re-sync rows have columns the lake table lacks: {unknown}")
    columns = [
        data.column(f.name).cast(f.type)
        if f.name in data.column_names
        else pa.nulls(len(data), f.type)
        for f in fields
    ]
    return pa.table(columns, schema=pa.schema([f.with_nullable(True) for f in fields]))


def _with_meta(data: pa.Table, op: str, request: RefreshRequest, first: int) -> pa.Table:
    import pyarrow as pa

    count = data.num_rows
    first_seq = REFRESH_SEQ_BASE + first
    values: dict[str, pa.Array] = {
        OP: pa.array([op] * count, pa.string()),
        COMMIT_POS: pa.array([request.position] * count, pa.int64()),
        SEQ: pa.array(range(first_seq, first_seq + count), pa.int64()),
        TXID: pa.array([f"resync:{request.request_id}"] * count, pa.string()),
        COMMIT_TS: pa.array([dt.datetime.now(dt.UTC)] * count, pa.timestamp("us", tz="UTC")),
    }
    for field in meta_fields():
        data = data.append_column(field, values[field.name])
    return data


def _properties(request: RefreshRequest) -> Any:
    from deltalake import CommitProperties, Transaction

    return CommitProperties(
        custom_metadata={
            RESYNC_POSITION_KEY: str(request.position),
            RESYNC_POSITION_TEXT_KEY: request.position_text,
            RESYNC_REQUEST_KEY: request.request_id,
        },
        app_transactions=[Transaction(app_id=request.app_id, version=request.position)],
    )


def _append(request: RefreshRequest, events: pa.Table) -> None:
    request.table.changelog_at.write_delta(
        events,
        mode="append",
        schema_mode="merge",
        commit_properties=_properties(request),
    )


def _merge_mirror(request: RefreshRequest, events: pa.Table) -> int:
    """One guarded MERGE of the events into the mirror; the number of keys left alone.

    The mirror version is loaded *before* the changelog is searched for newer events: a
    pipeline commits a transaction to the changelog before the mirror, so every mirror
    change this MERGE can see has its changelog event found by the search, and later
    mirror commits make the MERGE conflict and run again.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    mirror = request.table.mirror_at.open_delta()
    if _done(mirror, request):
        return 0
    newer = _keys_with_newer_events(request)
    keys_of_events = events.select(list(request.key)).to_pylist()
    keep = [_key_of(row, request.key) not in newer for row in keys_of_events]
    data = events.filter(pa.array(keep, pa.bool_()))
    mirror_schema = pa.schema(mirror.schema().to_arrow())
    data = fit_to_lake(_aligned_to(data, mirror_schema), mirror_schema, request.table.table)
    keys = merge_key_predicate(request.key)
    guard = f"t.`{COMMIT_POS}` <= s.`{COMMIT_POS}`"
    merger = mirror.merge(
        data, keys, source_alias="s", target_alias="t", commit_properties=_properties(request)
    )
    merger = merger.when_matched_delete(f"s.`{OP}` = 'd' AND {guard}")
    columns = merge_assignments(data.column_names)
    merger = merger.when_matched_update(columns, f"s.`{OP}` <> 'd' AND {guard}")
    merger = merger.when_not_matched_insert(columns, f"s.`{OP}` <> 'd'")
    merge_or_rebuild(merger, mirror, request.table, request.key, _properties(request))
    return int(pc.sum(pc.invert(pa.array(keep, pa.bool_()))).as_py() or 0)


def _aligned_to(data: pa.Table, schema: pa.Schema) -> pa.Table:
    """``data`` with the mirror's columns in its order (NULL for columns it lacks)."""
    import pyarrow as pa

    columns = [
        data.column(f.name) if f.name in data.column_names else pa.nulls(len(data), f.type)
        for f in schema
    ]
    return pa.table(columns, names=schema.names)


def _keys_with_newer_events(request: RefreshRequest) -> set[Hashable]:
    """Keys of the request that have a changelog event above the refresh position."""
    import pyarrow.compute as pc

    dataset = request.table.changelog_at.open_delta().to_pyarrow_dataset()
    later = dataset.to_table(
        columns=list(request.key), filter=pc.field(COMMIT_POS) > request.position
    )
    return {_key_of(row, request.key) for row in later.to_pylist()}


def _key_of(row: dict[str, object], key: Sequence[str]) -> Hashable:
    """A row's key as the store keys rows: every NaN one value, as the databases compare
    them (Python finds no NaN equal; a table without a key has its floats in its key).
    A type the store never keys a row by (an interval) is compared as Python compares it."""
    values = tuple(row[k] for k in key)
    try:
        return to_locator_bytes(values)
    except ContractError:
        return values


def _retry(
    attempt: Callable[[], _T],
    table: str,
    what: str,
    sleep: Callable[[float], None] = time.sleep,
) -> _T:
    """Run a Delta commit, again on the table's new version when a concurrent commit won."""
    from deltalake.exceptions import CommitFailedError

    for number in range(1, COMMIT_ATTEMPTS + 1):
        try:
            return attempt()
        except CommitFailedError as exc:
            if number == COMMIT_ATTEMPTS:
                raise TransientError(
                    f"re-sync of lake table {table}: the {what} commit kept conflicting with"
                    f" concurrent commits ({COMMIT_ATTEMPTS} attempts); run the re-sync again",
                    {"table": table},
                ) from exc
            log.info("re-sync of %s: %s commit conflicted (%s), retrying", table, what, exc)
            sleep(0.2 * number)
    raise AssertionError("unreachable")
