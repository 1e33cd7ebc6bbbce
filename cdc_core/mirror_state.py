"""When a lake table's mirror provably holds its state at a source position.

The changelog is the lake's record of a table; the sink keeps the mirror from it batch by
batch (``cdc_core.sink``), and labels every commit of a batch to either table alike in its
commit metadata: the position the batch reaches and its last seq, or a snapshot chunk's
position, or a part of a big transaction. So while the pipeline is the only writer, both
histories carry the same labels in the same order, and the mirror's version after the last
of them holds the state the changelog's events make. When no label lies above the agreed
position P, that is the state at P: the lake has reached P (the caller waited for its
high-water mark), so every event with ``_commit_pos <= P`` is in the changelog, and no
commit holds an event above P, since a commit's events lie at or below its label.

Anything that breaks the pairing gives None, and the caller replays the changelog: another
writer's commit (drift written behind the pipeline's back), a crash between the two commits
of a batch, commits above P, an unlabelled commit that changed rows, a Delta log cleaned of
its first commits, or a Delta feature a plain Parquet read would get wrong (deletion
vectors, column mapping, partitions).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cdc_core.lake import (
    PART_POSITION_KEY,
    PART_SEQ_KEY,
    POSITION_KEY,
    SEQ_KEY,
    SNAPSHOT_KEY,
    LakeTable,
)

if TYPE_CHECKING:
    import pyarrow as pa

# What a commit's label is made of (cdc_core.lake); a commit with none of them is unlabelled.
_LABEL_KEYS = (POSITION_KEY, SEQ_KEY, SNAPSHOT_KEY, PART_POSITION_KEY, PART_SEQ_KEY)
_POSITION_KEYS = (POSITION_KEY, SNAPSHOT_KEY, PART_POSITION_KEY)
# Reader features a Parquet read of the files Delta lists gets right.
_PLAIN_READER_FEATURES = frozenset({"timestampNtz"})

Label = tuple[str | None, ...]


@dataclass(frozen=True, slots=True)
class MirrorVersion:
    """A version of a table's mirror, its data files and its Arrow schema."""

    version: int
    files: tuple[str, ...]
    schema: pa.Schema


def _label(commit: Mapping[str, Any]) -> Label | None:
    """The commit's label; None for an unlabelled commit that added or removed no rows (a
    schema change: ``LakeSink.follow_schema``)."""
    label = tuple(commit.get(key) for key in _LABEL_KEYS)
    if any(part is not None for part in label):
        return label
    metrics = commit.get("operationMetrics") or {}
    if metrics.get("num_added_rows") == 0 and metrics.get("num_removed_files", 0) == 0:
        return None
    raise _Unprovable


class _Unprovable(Exception):
    """The histories do not prove the mirror's state (internal to this module)."""


def _labels(history: Sequence[Mapping[str, Any]]) -> list[Label]:
    """The labels of a Delta table's whole history, oldest first."""
    ordered = sorted(history, key=lambda commit: int(commit["version"]))
    if not ordered or int(ordered[0]["version"]) != 0:  # the log's first commits are gone
        raise _Unprovable
    return [label for commit in ordered if (label := _label(commit)) is not None]


def _highest(labels: Sequence[Label]) -> int:
    """The highest position any label names."""
    where = [_LABEL_KEYS.index(key) for key in _POSITION_KEYS]
    named = (label[i] for label in labels for i in where)
    return max(int(position) for position in named if position is not None)


def mirror_version_at(table: LakeTable, position: int | None) -> MirrorVersion | None:
    """The mirror version that holds ``table``'s state at ``position`` (None: everything the
    lake has), when the histories prove it (see the module docstring); else None."""
    from deltalake import DeltaTable

    if not (table.exists() and (table.mirror / "_delta_log").is_dir()):
        return None
    try:
        # The changelog first: a batch the pipeline writes meanwhile shows in the mirror's
        # history as a label the changelog's lacks.
        changelog = _labels(DeltaTable(str(table.changelog)).history())
        delta = DeltaTable(str(table.mirror))
        history = delta.history()
        mirror = _labels(history)
    except _Unprovable:
        return None
    if not mirror or mirror != changelog or mirror[-1][0] is None:  # the last: a whole batch
        return None
    if position is not None and _highest(mirror) > position:
        return None
    version = max(int(commit["version"]) for commit in history)
    return _plain_version(str(table.mirror), version)


def _plain_version(path: str, version: int) -> MirrorVersion | None:
    """The mirror at ``version``, unless a plain Parquet read of its files would be wrong."""
    import pyarrow as pa
    from deltalake import DeltaTable

    delta = DeltaTable(path, version=version)
    features = set(delta.protocol().reader_features or ())
    if not features <= _PLAIN_READER_FEATURES or delta.metadata().partition_columns:
        return None
    schema = pa.schema(delta.schema().to_arrow())
    return MirrorVersion(version, tuple(delta.file_uris()), schema)
