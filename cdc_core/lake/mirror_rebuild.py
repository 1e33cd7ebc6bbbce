"""Rebuild a lake table's mirror from its changelog, when a data file of the mirror no
longer matches its Delta entry (replaced or cut short without a Delta commit).

Delta's readers and its MERGE trust the sizes the log records, so such a file fails every
later MERGE: the pipeline would stop at every batch of the table, for good. The changelog
is the pipeline's own record of the table, so the mirror's state is rebuilt from it (each
key's latest event, no delete, nothing before the newest truncate) and written over the
mirror in one commit carrying the batch's label: readers see the old version or the new
one, and the batch's MERGE is that commit. A damaged changelog is no such record: the
pipeline then stops naming its files and the way out.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cdc_core.errors import TerminalError
from cdc_core.lake.layout import LakeTable
from cdc_core.lake.mirror_state import ChangedFile, changed_files
from cdc_core.names import COMMIT_POS, OP, SEQ

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)
_ROW = "__row"


def merge_or_rebuild(
    merger: Any, mirror: Any, table: LakeTable, key: Sequence[str], properties: Any
) -> None:
    """Run a MERGE into ``table``'s ``mirror``; when it fails on data files replaced or cut
    short behind the pipeline's back, rebuild the mirror from the changelog instead (which
    holds the events the MERGE would have applied: they reach the changelog first)."""
    from deltalake.exceptions import DeltaError

    try:
        merger.execute()
    except DeltaError:
        damaged = changed_files(mirror, "mirror")
        if not damaged:
            raise
        rebuild_mirror(table, key, damaged, properties)


def rebuild_mirror(
    table: LakeTable, key: Sequence[str], damaged: Sequence[ChangedFile], properties: Any
) -> None:
    """Write the state the changelog holds over ``table``'s mirror, with ``properties``
    (the label of the batch whose MERGE failed on ``damaged``)."""
    log.warning(
        "lake table %s: mirror file(s) %s no longer match their Delta entries (%s):"
        " rebuilding the mirror from the changelog",
        table.table,
        ", ".join(f.path for f in damaged),
        "; ".join(f.problem for f in damaged),
    )
    state = replayed(_changelog(table), key)
    table.mirror_at.write_delta(
        state,
        mode="overwrite",
        schema_mode="overwrite",
        commit_properties=properties,
    )


def _changelog(table: LakeTable) -> pa.Table:
    import pyarrow as pa
    from deltalake.exceptions import DeltaError

    delta = table.changelog_at.open_delta()
    try:
        return delta.to_pyarrow_table()
    except (OSError, DeltaError, pa.ArrowException) as exc:
        damaged = changed_files(delta, "changelog")
        named = ", ".join(f"{f.path} ({f.problem})" for f in damaged) or str(exc).splitlines()[0]
        raise TerminalError(
            f"lake table {table.table}: its mirror and its changelog were damaged behind the"
            f" pipeline's back (changelog files: {named}); restore those files, or move the"
            f" table's folder {table.root_at} aside and load the table again from the source",
            {"table": table.table},
        ) from exc


def replayed(events: pa.Table, key: Sequence[str]) -> pa.Table:
    """The rows the events leave, as the mirror holds them (with their events' columns)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    events = events.sort_by([(COMMIT_POS, "ascending"), (SEQ, "ascending")])
    truncates = pc.indices_nonzero(pc.equal(events[OP], "t")).to_pylist()
    if truncates:
        events = events.slice(truncates[-1] + 1)
    events = events.append_column(_ROW, pa.array(range(events.num_rows), pa.int64()))
    rows = events.filter(pc.not_equal(events[OP], "t"))
    last = rows.group_by(list(key), use_threads=False).aggregate([(_ROW, "max")])
    latest = events.take(last[f"{_ROW}_max"]).sort_by(_ROW)
    return latest.filter(pc.not_equal(latest[OP], "d")).drop_columns([_ROW])
