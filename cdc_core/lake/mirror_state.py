"""A lake table's mirror as it was at a source position: what users read, never a stand-in.

The mirror is the table people query, so a validation reads the mirror, whatever wrote it.
The sink labels each of its commits with the position it reaches (``cdc_core.lake.layout``,
``cdc_core.lake.sink``): a batch's position and last seq, a snapshot chunk's position, a part
of a big transaction up to a seq; a re-sync labels its own with its snapshot's position
(``cdc_core.resync.rows``). The state at P is the mirror's newest version before the first
commit labelled above P (another writer's unlabelled commits before it included: they are
part of what users read), plus the changelog's events after that version's *mark* (the
highest (position, seq) its pipeline commits hold) up to P: the events a batch above P, or
one whose mirror commit has not landed yet (a crash between a batch's two commits), holds
at or below P. A re-sync's label ends the version but is no mark: it merged some keys at
its position while the pipeline may have been behind it.

A table without a key has no mirror: its changelog is what the lake holds of it.

``audit_lake`` is the separate self-consistency check: which commits of either table no
replcheck writer made (named with Delta's record of the writer), whether the two histories
carry the same labels, and which data files no longer match their Delta entry.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from cdc_core.errors import TerminalError
from cdc_core.lake.delta_log import read_commits
from cdc_core.lake.delta_reads import read_delta
from cdc_core.lake.layout import (
    PART_POSITION_KEY,
    PART_SEQ_KEY,
    POSITION_KEY,
    RESYNC_POSITION_KEY,
    SEQ_KEY,
    SNAPSHOT_KEY,
    LakeTable,
)
from cdc_core.lake_location import LakeLocation
from cdc_core.names import COMMIT_POS, SEQ

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable

log = logging.getLogger(__name__)
MAX_SEQ = 2**63 - 1
_PIPELINE_PREFIX = "replcheck."
# Commits that change no row (table features, properties, vacuum's bookkeeping).
ROWLESS_OPERATIONS = frozenset(
    {"ADD FEATURE", "SET TBLPROPERTIES", "VACUUM START", "VACUUM END", "UPGRADE PROTOCOL"}
)
# Reader features a Parquet read of the files Delta lists gets right.
_PLAIN_READER_FEATURES = frozenset({"timestampNtz"})

MISSING = "is missing"
Mark = tuple[int, int]  # (position, seq): every event at or below it is in a mirror version
KeyBounds = tuple[Any, Any]  # a file's lowest and highest key, Delta's statistics (None: unknown)
KeyRange = tuple[int | None, int | None]  # keys [low, high), None where open


@dataclass(frozen=True, slots=True)
class MirrorRead:
    """What holds a table's state at a position.

    Attributes:
        version: The mirror version read (-1: none lies at or below the position).
        files: That version's data files.
        schema: The mirror's newest Arrow schema, what users read (the changelog's when
            ``version`` is -1); a column the version's files lack reads as NULL.
        mark: The highest (position, seq) the version holds (None: no event).
        after: Changelog files that may hold events after ``mark``: their events up to the
            position complete the state (none: the version holds it all).
        after_schema: The changelog's Arrow schema.
        key_bounds: Each of ``files``' key bounds, when asked for (empty: unknown).
    """

    version: int
    files: tuple[str, ...]
    schema: pa.Schema
    mark: Mark | None
    after: tuple[str, ...]
    after_schema: pa.Schema
    key_bounds: tuple[KeyBounds, ...] = ()

    @property
    def exact(self) -> bool:
        """The mirror version alone holds the state: nothing to add from the changelog."""
        return self.version >= 0 and not self.after

    def meeting(self, ranges: Sequence[KeyRange]) -> MirrorRead:
        """This read with only the version's files that may hold a key in ``ranges`` (all of
        them when their key bounds are unknown): a run re-hashing some leaves reads those
        only, and an object store serves the others no request."""
        if len(self.key_bounds) != len(self.files):
            return self
        kept = [
            (uri, (least, most))
            for uri, (least, most) in zip(self.files, self.key_bounds, strict=True)
            if least is None or most is None or any(_meets(least, most, r) for r in ranges)
        ]
        log.info(
            "mirror version %d: %d of %d file(s) hold the keys read",
            self.version,
            len(kept),
            len(self.files),
        )
        return replace(self, files=tuple(u for u, _ in kept), key_bounds=tuple(b for _, b in kept))


def _meets(least: Any, most: Any, keys: KeyRange) -> bool:
    """Whether keys ``[least, most]`` meet the range ``keys``."""
    low, high = keys
    return (low is None or most >= low) and (high is None or least < high)


@dataclass(frozen=True, slots=True)
class ForeignCommit:
    """A commit to a lake table that no replcheck writer made, as Delta records it."""

    table: str  # "mirror" or "changelog"
    version: int
    operation: str
    writer: str  # Delta's engineInfo / clientVersion, or "unknown"


@dataclass(frozen=True, slots=True)
class ChangedFile:
    """A data file whose bytes no longer match its Delta entry (replaced or cut short)."""

    table: str  # "mirror" or "changelog"
    path: str
    problem: str


@dataclass(frozen=True, slots=True)
class LakeAudit:
    """The self-consistency of one lake table's two Delta tables."""

    foreign: tuple[ForeignCommit, ...] = ()
    changed: tuple[ChangedFile, ...] = ()
    unpaired: str | None = None  # how the two histories' labels disagree (None: they pair)


def _commits(path: LakeLocation, delta: DeltaTable) -> list[dict[str, Any]]:
    """The history of the Delta table at ``path`` up to ``delta``'s version, oldest first,
    each commit under its own version (``delta_log``: not ``history()``'s numbering)."""
    return read_commits(path, delta.version())


def _position(commit: Mapping[str, Any]) -> int | None:
    """The position a replcheck commit is labelled with (None: unlabelled)."""
    for key in (POSITION_KEY, SNAPSHOT_KEY, PART_POSITION_KEY, RESYNC_POSITION_KEY):
        if commit.get(key) is not None:
            return int(commit[key])
    return None


def _mark(commit: Mapping[str, Any]) -> Mark | None:
    """The (position, seq) up to which a pipeline commit holds every event (None: a commit
    that is no pipeline batch)."""
    if commit.get(POSITION_KEY) is not None:
        return int(commit[POSITION_KEY]), int(commit.get(SEQ_KEY, MAX_SEQ))
    if commit.get(SNAPSHOT_KEY) is not None:
        return int(commit[SNAPSHOT_KEY]), MAX_SEQ
    if commit.get(PART_POSITION_KEY) is not None:
        return int(commit[PART_POSITION_KEY]), int(commit[PART_SEQ_KEY])
    return None


def mirror_read(
    table: LakeTable, position: int | None, highest: int | None = None, key: str | None = None
) -> MirrorRead:
    """What holds ``table``'s state at ``position`` (None: everything the lake has); with
    per-partition positions, ``position`` is the lowest and ``highest`` the highest; with
    ``key``, each mirror file's bounds of that column (``MirrorRead.meeting``).

    Raises:
        TerminalError: The mirror's Delta log no longer reaches back to the position, or a
            writer gave the mirror a Delta feature a Parquet read would get wrong.
    """
    changelog = read_delta(table.changelog_at)
    after_schema = _arrow_schema(changelog)
    upto = highest if highest is not None else position
    if not table.mirror_at.join("_delta_log").is_dir():  # no key: its changelog holds it
        files = tuple(
            f for f in changelog.file_uris() if _holds_events(table.location, f, None, upto)
        )
        return MirrorRead(-1, (), after_schema, None, files, after_schema)
    # Each Delta table opened once (on an object store an open reads every commit file of
    # the log): the mirror's newest version gives its history and its schema.
    newest = read_delta(table.mirror_at)
    version, mark = _version_at(table, newest, position)
    after = _pipeline_files_after(table, changelog, mark, upto)
    if version < 0:
        return MirrorRead(-1, (), after_schema, None, after, after_schema)
    delta = newest if version == newest.version() else read_delta(table.mirror_at, version)
    _check_plain(table, delta, version)
    _check_present(table, delta, version)
    # The newest schema: a column added since the version reads as NULL, as at the source.
    schema = _arrow_schema(newest)
    files = tuple(delta.file_uris())
    bounds = _key_bounds(delta, key, files) if key is not None else ()
    return MirrorRead(version, files, schema, mark, after, after_schema, bounds)


def _version_at(
    table: LakeTable, mirror: DeltaTable, position: int | None
) -> tuple[int, Mark | None]:
    """The version of ``mirror`` (its newest) before its first commit labelled above
    ``position``, and its mark."""
    commits = _commits(table.mirror_at, mirror)
    chosen, mark = -1, None
    for commit in commits:
        labelled = _position(commit)
        if position is not None and labelled is not None and labelled > position:
            break
        chosen, reached = int(commit["version"]), _mark(commit)
        if reached is not None and (mark is None or reached > mark):
            mark = reached
    if chosen >= 0 and commits[0]["version"] != 0 and mark is None:
        raise TerminalError(
            f"lake table {table.table}: the mirror's Delta log no longer holds a commit that"
            f" says which source position its version {chosen} holds (its first commits were"
            " cleaned up); validate again once the pipeline has written to the table",
            {"table": table.table},
        )
    return chosen, mark


def _pipeline_files_after(
    table: LakeTable, changelog: DeltaTable, mark: Mark | None, upto: int | None
) -> tuple[str, ...]:
    """The files of ``changelog`` (its version read) a replcheck writer added after ``mark``
    that hold an event after it at or below ``upto``. Another writer's appends are no part
    of the mirror's state: they are named by ``audit_lake``."""
    wanted: list[str] = []
    for commit in _commits(table.changelog_at, changelog):
        reached = _mark(commit)
        if reached is None and commit.get(RESYNC_POSITION_KEY) is not None:
            reached = (int(commit[RESYNC_POSITION_KEY]), MAX_SEQ)
        if reached is not None and (mark is None or reached > mark):
            wanted += _added_files(table.changelog_at, int(commit["version"]))
    lake = table.location
    return tuple(f for f in wanted if lake.file_exists(f) and _holds_events(lake, f, mark, upto))


def _added_files(path: LakeLocation, version: int) -> list[str]:
    """The data files a Delta commit added (its ``add`` actions; Delta protocol, "Actions")."""
    from urllib.parse import unquote

    data = path.join("_delta_log", f"{version:020d}.json").read_bytes()
    try:
        if data is None:
            raise FileNotFoundError(version)
        lines = data.decode("utf-8").splitlines()
    except FileNotFoundError as exc:
        raise TerminalError(
            f"the Delta log of {path} no longer holds version {version}, which the mirror's"
            " state at the position needs; validate again once the pipeline has caught up",
        ) from exc
    actions = [json.loads(line) for line in lines if line.strip()]
    return [path.join(unquote(a["add"]["path"])).url for a in actions if "add" in a]


def _holds_events(lake: LakeLocation, uri: str, mark: Mark | None, upto: int | None) -> bool:
    """Whether a changelog file holds an event after ``mark`` at or below ``upto`` (its
    statistics only bound them: the last batch's file also holds the events before it)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    path, filesystem = lake.file_of(uri)
    events = pq.read_table(path, columns=[COMMIT_POS, SEQ], filesystem=filesystem)
    position, seq = events.column(COMMIT_POS), events.column(SEQ)
    wanted = pc.is_valid(position)
    if mark is not None:
        at_mark = pc.and_(pc.equal(position, mark[0]), pc.greater(seq, mark[1]))
        wanted = pc.and_(wanted, pc.or_(pc.greater(position, mark[0]), at_mark))
    if upto is not None:
        wanted = pc.and_(wanted, pc.less_equal(position, upto))
    return bool(pc.any(wanted).as_py())


def _actions(delta: Any, columns: Sequence[str]) -> dict[str, list[Any]]:
    """``columns`` of Delta's add actions of the version, column by column (``pa.table``
    of the whole imports pandas, 0.25 s of a validation)."""
    import pyarrow as pa

    actions = delta.get_add_actions(flatten=True)
    return {name: pa.chunked_array(actions.column(name)).to_pylist() for name in columns}


def _key_bounds(delta: Any, key: str, files: Sequence[str]) -> tuple[KeyBounds, ...]:
    """Each of ``files``' lowest and highest ``key`` in Delta's statistics (empty: the
    version keeps none of that column)."""
    names = ("path", f"min.{key}", f"max.{key}")
    try:
        actions = _actions(delta, names)
    except KeyError:
        return ()
    by_name = {
        os.path.basename(path): (least, most)
        for path, least, most in zip(*(actions[n] for n in names), strict=True)
    }
    bounds = [by_name.get(os.path.basename(uri)) for uri in files]
    return tuple(b for b in bounds if b is not None) if all(bounds) else ()


def _uris_by_name(delta: Any) -> dict[str, str]:
    """The version's file URIs by file name (unique: Delta names files by a UUID)."""
    return {os.path.basename(uri): uri for uri in delta.file_uris()}


def _arrow_schema(delta: Any) -> pa.Schema:
    import pyarrow as pa

    return pa.schema(delta.schema().to_arrow())


def _check_plain(table: LakeTable, delta: Any, version: int) -> None:
    """Refuse a mirror version that a plain Parquet read of its files would get wrong."""
    features = set(delta.protocol().reader_features or ()) - _PLAIN_READER_FEATURES
    partitions = delta.metadata().partition_columns
    if features or partitions:
        what = ", ".join(sorted(features)) or f"partitions by {', '.join(partitions)}"
        raise TerminalError(
            f"lake table {table.table}: version {version} of its mirror uses {what}, which"
            " replcheck's pipeline never writes and its readers do not read; another writer"
            " changed the table's layout: restore the mirror (or load the table again)",
            {"table": table.table},
        )


def _check_present(table: LakeTable, delta: Any, version: int) -> None:
    """Refuse a mirror version whose data files are gone: nobody can read it."""
    local = (_local_path(uri) for uri in delta.file_uris())
    gone = [os.path.basename(path) for path in local if path and not os.path.exists(path)]
    if gone:
        raise TerminalError(
            f"lake table {table.table}: data file(s) {', '.join(gone)} of version {version} of"
            " its mirror are missing (deleted without a Delta commit); restore them, or let"
            " the pipeline's next write to the table rebuild the mirror from its changelog",
            {"table": table.table},
        )


def audit_lake(table: LakeTable) -> LakeAudit:
    """The self-consistency check of ``table``'s changelog and mirror (see the module
    docstring): foreign commits, unpaired histories, changed data files."""
    paths = {"changelog": table.changelog_at, "mirror": table.mirror_at}
    present = {name: p for name, p in paths.items() if p.join("_delta_log").is_dir()}
    opened = {name: read_delta(p) for name, p in present.items()}
    histories = {name: _commits(paths[name], delta) for name, delta in opened.items()}
    foreign = tuple(
        ForeignCommit(name, int(c["version"]), str(c.get("operation", "unknown")), _writer(c))
        for name, commits in histories.items()
        for c in _since_rewritten(commits)
        if _is_foreign(c)
    )
    changed = tuple(
        changed for name, delta in opened.items() for changed in changed_files(delta, name)
    )
    unpaired = None
    if len(histories) == 2:
        unpaired = _unpaired(histories["changelog"], histories["mirror"])
    return LakeAudit(foreign, changed, unpaired)


def _since_rewritten(commits: Sequence[Mapping[str, Any]]) -> Sequence[Mapping[str, Any]]:
    """The commits since replcheck last wrote the whole table (``cdc_core.lake.mirror_rebuild``):
    what came before is no longer in it."""
    for index in range(len(commits) - 1, -1, -1):
        commit = commits[index]
        mode = (commit.get("operationParameters") or {}).get("mode")
        if mode == "Overwrite" and not _is_foreign(commit):
            return commits[index + 1 :]
    return commits


def _is_foreign(commit: Mapping[str, Any]) -> bool:
    """A commit no replcheck writer made that may have changed rows."""
    if any(str(name).startswith(_PIPELINE_PREFIX) for name in commit):
        return False
    operation = str(commit.get("operation", "unknown"))
    if operation in ROWLESS_OPERATIONS:
        return False
    metrics = commit.get("operationMetrics") or {}
    # The sink's own schema changes: an append of no rows, with no label (follow_schema).
    return not (metrics.get("num_added_rows") == 0 and metrics.get("num_removed_files", 0) == 0)


def _writer(commit: Mapping[str, Any]) -> str:
    return str(commit.get("engineInfo") or commit.get("clientVersion") or "unknown")


def _unpaired(
    changelog: Sequence[Mapping[str, Any]], mirror: Sequence[Mapping[str, Any]]
) -> str | None:
    """How the two histories' pipeline labels show them out of step (None: in step).

    A batch commits to the changelog, then to the mirror, so the mirror trails by the batch
    being written at most. Labels alone may differ: after a crash between a batch's two
    commits, the batch written again can end below or above the one the changelog holds.
    What stays true is that the mirror reaches no further than the changelog, and at least
    as far as the changelog's batch before its last."""
    first = [mark for mark in map(_mark, changelog) if mark is not None]
    second = [mark for mark in map(_mark, mirror) if mark is not None]
    shown = {mark: _shown(mark) for mark in first[-2:] + second[-1:]}
    if not second:
        return (
            None
            if len(first) <= 1
            else f"the changelog holds {len(first)} pipeline batches, the mirror none"
        )
    # Positions, not seqs: a snapshot's mark holds every seq at its position, and the batch
    # after it at that position a lower one.
    if not first or second[-1][0] > first[-1][0]:
        reached = shown[first[-1]] if first else "nothing"
        return (
            f"the mirror reaches {shown[second[-1]]}, the changelog {reached}: the mirror is ahead"
        )
    if len(first) >= 2 and second[-1][0] < first[-2][0]:
        return (
            f"the mirror reaches {shown[second[-1]]}, the changelog {shown[first[-1]]} (and"
            f" {shown[first[-2]]} the batch before): the mirror lags more than the batch being"
            " written; the two tables were not written by one pipeline in step"
        )
    return None


def _shown(mark: Mark) -> str:
    """A batch's mark for people: its position, and its last event's seq where it ends
    inside the transaction at that position."""
    position, seq = mark
    return f"position {position}" if seq == MAX_SEQ else f"position {position} (seq {seq})"


def changed_files(delta: Any, name: str) -> list[ChangedFile]:
    """The data files of ``delta``'s version whose size on disk is not the one Delta
    recorded (replaced under the same name, cut short) or that are gone."""
    actions, by_name = _actions(delta, ("path", "size_bytes")), _uris_by_name(delta)
    found = []
    for path, size in zip(actions["path"], actions["size_bytes"], strict=True):
        local = _local_path(by_name.get(os.path.basename(path), path))
        if local is None:
            continue
        try:
            on_disk = os.path.getsize(local)
        except FileNotFoundError:
            found.append(ChangedFile(name, path, MISSING))
            continue
        if on_disk != int(size):
            found.append(
                ChangedFile(name, path, f"holds {on_disk} bytes, Delta recorded {int(size)}")
            )
    return found


def _local_path(uri: str) -> str | None:
    """The local path of a file URI (None: an object store, checked by its own reader)."""
    if uri.startswith("file://"):
        return uri[len("file://") :]
    return None if "://" in uri else uri
