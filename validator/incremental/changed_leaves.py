"""The leaves holding keys the lake's changelog shows changed since a stored state.

Two key-only reads of the changelog (``pyarrow.parquet`` over its files, skipping the row
groups whose ``_commit_pos`` statistics fall outside the window; not ``pyarrow.dataset``,
whose import takes pandas with it: 0.35 s of a run):

- events with ``P0 < _commit_pos <= P1``: what the pipeline applied between the runs, in
  whichever Delta version it landed (the lake may have been ahead of P0 when P0 was read);
- events at or below P1 in data files added since the stored Delta version: a late write at
  an old position changes the state the stored digests describe.

A key change is a ``d`` of the old key and a ``c`` of the new one (``cdc_core.lake.key_moves``),
so both keys' leaves are found. A truncate changes every leaf.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from cdc_core.lake.delta_reads import read_delta
from cdc_core.lake_location import LakeLocation
from cdc_core.names import COMMIT_POS, OP
from connectors.pushdown import RangeLeaves
from validator.incremental.lake_log import files_added_since
from validator.incremental.state import LogMark
from validator.incremental.stored_digests import int_column

if TYPE_CHECKING:
    import pyarrow as pa

ALL_LEAVES = None  # a truncate in the window: every leaf changed


def leaf_of(key: int | None, scheme: RangeLeaves) -> int:
    """The leaf of an integer key, as ``connectors.pushdown`` computes it in SQL."""
    if key is None:
        return 0
    return (min(max(key, scheme.low), scheme.high) - scheme.low) // scheme.width


def _may_hold(statistics: Any, low: int | None, high: int) -> bool:
    """Whether a row group with these ``_commit_pos`` statistics may hold a position in
    ``(low, high]`` (``low`` None: no lower bound)."""
    if statistics is None or not statistics.has_min_max:
        return True
    return statistics.min <= high and (low is None or statistics.max > low)


def _events(
    changelog: LakeLocation, uris: Iterable[str], key: str, low: int | None, high: int
) -> list[pa.Table]:
    """The key and op of the events in the changelog's Parquet files ``uris`` at positions
    in ``(low, high]``, reading only the row groups that may hold them."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    found = []
    for uri in uris:
        path, filesystem = changelog.file_of(uri)
        file = pq.ParquetFile(path, filesystem=filesystem)
        metadata = file.metadata
        names = [metadata.schema.column(i).path for i in range(metadata.num_columns)]
        position = names.index(COMMIT_POS)
        groups = [
            group
            for group in range(metadata.num_row_groups)
            if _may_hold(metadata.row_group(group).column(position).statistics, low, high)
        ]
        if not groups:
            continue
        events = file.read_row_groups(groups, columns=[key, OP, COMMIT_POS])
        inside = pc.less_equal(events[COMMIT_POS], int_column([high])[0])  # see int_column
        if low is not None:
            inside = pc.and_(inside, pc.greater(events[COMMIT_POS], int_column([low])[0]))
        found.append(events.filter(inside).select([key, OP]))
    return found


def _leaves(tables: Iterable[pa.Table], key: str, scheme: RangeLeaves) -> set[int] | None:
    import pyarrow.compute as pc

    leaves: set[int] = set()
    for table in tables:
        if "t" in pc.unique(table[OP]).to_pylist():
            return ALL_LEAVES
        leaves.update(leaf_of(k, scheme) for k in pc.unique(table[key]).to_pylist())
    return leaves


def changed_leaves(
    changelog: LakeLocation, key: str, scheme: RangeLeaves, stored: LogMark, low: int, high: int
) -> set[int] | None:
    """Leaves with keys (first key column ``key``, lake name) changed between positions
    ``low`` (exclusive) and ``high``, or written since ``stored`` at or below ``high``;
    ``ALL_LEAVES`` (None) after a truncate."""
    tables = _events(changelog, read_delta(changelog).file_uris(), key, low, high)
    tables += _events(changelog, files_added_since(changelog, stored), key, None, high)
    return _leaves(tables, key, scheme)
