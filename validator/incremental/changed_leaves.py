"""The leaves holding keys the lake's changelog shows changed since a stored state.

Two key-only reads of the changelog (``pyarrow`` over its Parquet files, so row groups
whose ``_commit_pos`` statistics fall outside the window are skipped):

- events with ``P0 < _commit_pos <= P1``: what the pipeline applied between the runs, in
  whichever Delta version it landed (the lake may have been ahead of P0 when P0 was read);
- events at or below P1 in data files added since the stored Delta version: a late write at
  an old position changes the state the stored digests describe.

A key change is a ``d`` of the old key and a ``c`` of the new one (``cdc_core.key_moves``),
so both keys' leaves are found. A truncate changes every leaf.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from cdc_core.lake import COMMIT_POS, OP
from connectors.pushdown import RangeLeaves
from validator.incremental.lake_log import files_added_since
from validator.incremental.state import LogMark

if TYPE_CHECKING:
    import pyarrow as pa

ALL_LEAVES = None  # a truncate in the window: every leaf changed


def leaf_of(key: int | None, scheme: RangeLeaves) -> int:
    """The leaf of an integer key, as ``connectors.pushdown`` computes it in SQL."""
    if key is None:
        return 0
    return (min(max(key, scheme.low), scheme.high) - scheme.low) // scheme.width


def _window(changelog: Path, key: str, low: int, high: int) -> pa.Table:
    import pyarrow.dataset as ds
    from deltalake import DeltaTable

    position = ds.field(COMMIT_POS)
    dataset = DeltaTable(str(changelog)).to_pyarrow_dataset()
    return dataset.to_table(columns=[key, OP], filter=(position > low) & (position <= high))


def _late_writes(changelog: Path, key: str, stored: LogMark, high: int) -> pa.Table | None:
    import pyarrow.dataset as ds

    added = files_added_since(changelog, stored)
    if not added:
        return None
    dataset = ds.dataset(added, format="parquet")
    return dataset.to_table(columns=[key, OP], filter=ds.field(COMMIT_POS) <= high)


def _leaves(tables: Iterable[pa.Table], key: str, scheme: RangeLeaves) -> set[int] | None:
    import pyarrow.compute as pc

    leaves: set[int] = set()
    for table in tables:
        if pc.any(pc.equal(table[OP], "t")).as_py():
            return ALL_LEAVES
        leaves.update(leaf_of(k, scheme) for k in pc.unique(table[key]).to_pylist())
    return leaves


def changed_leaves(
    changelog: Path, key: str, scheme: RangeLeaves, stored: LogMark, low: int, high: int
) -> set[int] | None:
    """Leaves with keys (first key column ``key``, lake name) changed between positions
    ``low`` (exclusive) and ``high``, or written since ``stored`` at or below ``high``;
    ``ALL_LEAVES`` (None) after a truncate."""
    tables = [_window(changelog, key, low, high)]
    late = _late_writes(changelog, key, stored, high)
    if late is not None:
        tables.append(late)
    return _leaves(tables, key, scheme)
