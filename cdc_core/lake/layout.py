"""The lake layout (DESIGN.md, "Change events and the lake") and its position bookkeeping.

Per source table ``schema.table`` the lake holds two Delta tables::

    <lake>/<schema>/<table>/changelog   every event, append-only: the table's columns plus
                                        _op, _commit_pos, _seq, _txid, _commit_ts
    <lake>/<schema>/<table>/mirror      the current state, one row per key (kept by MERGE)

Every commit records, in its commit metadata, the source position it reaches
(``replcheck.position`` as a decimal BIGINT and ``replcheck.position_text``) and an
application transaction (deltalake's ``app_transactions``) whose version is that position,
so a restarted writer never writes a transaction twice and a reader knows how far the lake
has caught up: its high-water mark.

A pipeline also records, after each batch, the position it has reached for all the tables
it captures in ``<lake>/_replcheck/progress/<pipeline>.json``, so a table no recent
transaction touched is still known to be caught up. The same file names the tables a
table refresh is rewriting (their high-water mark stays below the refresh's start until it
is done) and the windows of positions at which a finished refresh left a table's state
inexact (``RefreshMarks``; ``cdc_core.ddl.table_refresh``).
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cdc_core.capture.position import Position
from cdc_core.disk_full import naming_full_disk
from cdc_core.errors import TerminalError, TransientError
from cdc_core.files import deleted_on_failure
from cdc_core.lake.delta_reads import read_delta
from cdc_core.lake_location import LakeLocation, as_location
from cdc_core.names import COMMIT_POS, COMMIT_TS, OP, SEQ, TXID, parse_table, to_lake_dir
from cdc_core.state.document import corrupt_file, read_json_bytes, read_json_file

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable

OPS = ("c", "u", "d", "r", "t")  # insert, update, delete, snapshot/refresh read, truncate
POSITION_KEY = "replcheck.position"
POSITION_TEXT_KEY = "replcheck.position_text"
SEQ_KEY = "replcheck.seq"  # the last _seq written at replcheck.position
SNAPSHOT_KEY = "replcheck.snapshot_position"  # a chunk of an initial load at that position
PART_POSITION_KEY = "replcheck.part_position"  # part of a big transaction committed there
PART_SEQ_KEY = "replcheck.part_seq"  # ... up to this seq
RESYNC_POSITION_KEY = "replcheck.resync_position"  # a re-sync's rows, read at that position
RESYNC_POSITION_TEXT_KEY = "replcheck.resync_position_text"
RESYNC_REQUEST_KEY = "replcheck.resync_request"


@dataclass(frozen=True, slots=True)
class LakeTable:
    """Where one source table lives in the lake.

    ``place`` is a local folder or an object-store location (``cdc_core.lake_location``);
    ``root_at``, ``changelog_at`` and ``mirror_at`` work for both, while ``root``,
    ``changelog`` and ``mirror`` are the local folders, for the readers that still need them
    (an object-store lake has none: ``LakeLocation.local_path`` says so by name).
    """

    place: Path | LakeLocation  # the lake's root: its folder, or its object-store location
    table: str  # canonical "schema.table" (or "table"): cdc_core.names

    @property
    def location(self) -> LakeLocation:
        """The lake's root, local or not."""
        return as_location(self.place)

    @property
    def lake(self) -> Path:
        """The lake's local folder (an object-store lake has none: an error says so)."""
        return self.location.local_path

    @property
    def root_at(self) -> LakeLocation:
        """Where this table's changelog and mirror are, one level per encoded name part."""
        return self.location.join(*self._parts())

    @property
    def changelog_at(self) -> LakeLocation:
        """Where the changelog Delta table is."""
        return self.root_at.join("changelog")

    @property
    def mirror_at(self) -> LakeLocation:
        """Where the mirror Delta table is."""
        return self.root_at.join("mirror")

    @property
    def root(self) -> Path:
        """The directory holding this table's changelog and mirror (a local lake's).

        One directory per name part, encoded by ``cdc_core.names.to_lake_dir``.
        """
        return self.location.local_path.joinpath(*self._parts())

    @property
    def changelog(self) -> Path:
        """The append-only changelog Delta table."""
        return self.root / "changelog"

    @property
    def mirror(self) -> Path:
        """The current-state Delta table."""
        return self.root / "mirror"

    def exists(self) -> bool:
        """True when the changelog has been created."""
        return self.changelog_at.join("_delta_log").is_dir()

    def _parts(self) -> list[str]:
        return list(map(to_lake_dir, parse_table(self.table).parts))


def meta_fields() -> list[pa.Field]:
    """Arrow fields of the changelog's bookkeeping columns."""
    import pyarrow as pa

    return [
        pa.field(OP, pa.string(), nullable=False),
        pa.field(COMMIT_POS, pa.int64(), nullable=False),
        pa.field(SEQ, pa.int64(), nullable=False),
        pa.field(TXID, pa.string()),
        pa.field(COMMIT_TS, pa.timestamp("us", tz="UTC")),
    ]


def append_changelog(
    table: LakeTable, events: pa.Table, position: int, position_text: str, app_id: str
) -> None:
    """Append committed events in one Delta commit that records the position they reach."""
    from deltalake import CommitProperties, Transaction

    properties = CommitProperties(
        custom_metadata={POSITION_KEY: str(position), POSITION_TEXT_KEY: position_text},
        app_transactions=[Transaction(app_id=app_id, version=position)],
    )
    if table.location.is_local:
        table.changelog.mkdir(parents=True, exist_ok=True)
    table.changelog_at.write_delta(
        events, mode="append", schema_mode="merge", commit_properties=properties
    )


def high_water_mark(table: LakeTable) -> int | None:
    """How far the lake has caught up for ``table`` (None: nothing yet).

    The highest source position any changelog commit records, or a pipeline's progress
    for the table when that is higher: every change up to it is in the changelog. While a
    refresh rewrites the table, no higher than just before the refresh began.
    """
    positions = [
        progress.value
        for progress, tables in read_progress(table.place).values()
        if table.table in tables
    ]
    positions += [int(commit[POSITION_KEY]) for commit in _history(table) if POSITION_KEY in commit]
    mark = max(positions, default=None)
    since = read_marks(table.place).refreshing.get(table.table)
    if mark is not None and since is not None:
        return min(mark, since - 1) if since > 0 else None  # 0: the lake holds none of it yet
    return mark


def _history(table: LakeTable) -> list[dict[str, Any]]:
    """The changelog's commits; none while it is being created, or moved aside by a reload
    at this moment (a validator waiting for the lake reads it while the pipeline writes)."""
    from deltalake.exceptions import DeltaError, TableNotFoundError

    generation = _generation_before(table)
    if generation is None:
        return []
    try:
        delta = read_delta(table.changelog_at)
        generation = _generation_read(generation, delta)
        return delta.history()
    except (FileNotFoundError, TableNotFoundError):
        return []
    except DeltaError:  # a log file listed, then gone with the table: moved aside
        if not _moved_since(table, generation):
            raise
        return []


@dataclass(frozen=True, slots=True)
class RefreshMarks:
    """Where a pipeline's lake tables are not exact at every position.

    Args:
        refreshing: Per table being refreshed, the position its state stopped being exact.
        stale: Per table, windows ``[start, end)`` of positions at which a finished refresh
            left its state inexact (exact before ``start`` and from ``end`` on).
    """

    refreshing: Mapping[str, int] = field(default_factory=dict)
    stale: Mapping[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)

    def to_document(self) -> dict[str, object]:
        """The JSON form kept in the progress file."""
        return {
            "refreshing": dict(self.refreshing),
            "stale": {table: [list(w) for w in windows] for table, windows in self.stale.items()},
        }

    @classmethod
    def from_document(cls, document: Mapping[str, object]) -> RefreshMarks:
        """The inverse of ``to_document`` (absent keys: nothing marked)."""
        refreshing = document.get("refreshing") or {}
        stale = document.get("stale") or {}
        if not isinstance(refreshing, dict) or not isinstance(stale, dict):
            raise TypeError("refreshing and stale must be JSON objects")
        return cls(
            {str(t): int(p) for t, p in refreshing.items()},
            {str(t): tuple((int(a), int(b)) for a, b in w) for t, w in stale.items()},
        )

    def merged(self, other: RefreshMarks) -> RefreshMarks:
        """Both pipelines' marks (the earliest refresh start per table)."""
        refreshing = dict(self.refreshing)
        for table, since in other.refreshing.items():
            refreshing[table] = min(since, refreshing.get(table, since))
        stale = dict(self.stale)
        for table, windows in other.stale.items():
            stale[table] = (*stale.get(table, ()), *windows)
        return RefreshMarks(refreshing, stale)

    def window_at(self, table: str, position: int) -> tuple[int, int] | None:
        """The stale window of ``table`` holding ``position``, if any."""
        for start, end in self.stale.get(table, ()):
            if start <= position < end:
                return start, end
        return None


def read_marks(lake: Path | LakeLocation) -> RefreshMarks:
    """The refresh marks of every pipeline writing ``lake``."""
    marks = RefreshMarks()
    for progress in _progress_files(lake):
        marks = marks.merged(progress.marks)
    return marks


def read_marks_of(lake: Path | LakeLocation, pipeline: str) -> RefreshMarks:
    """The refresh marks one pipeline last recorded (none when it recorded nothing)."""
    lake = as_location(lake).place()
    if isinstance(lake, LakeLocation):
        data = _progress_at(lake).join(f"{pipeline}.json").read_bytes()
        if data is None:
            return RefreshMarks()
        return _read_progress(data, _progress_at(lake).join(f"{pipeline}.json")).marks
    path = progress_dir(lake) / f"{pipeline}.json"
    if not path.is_file():
        return RefreshMarks()
    return _read_progress_file(path).marks


def progress_dir(lake: Path) -> Path:
    """Where pipelines record the position they have reached."""
    return lake / "_replcheck" / "progress"


def _progress_at(lake: LakeLocation) -> LakeLocation:
    """``progress_dir`` of a lake on an object store."""
    return lake.join("_replcheck", "progress")


def _progress_files(lake: Path | LakeLocation) -> list[_Progress]:
    """Every pipeline's progress file, in name order."""
    lake = as_location(lake).place()
    if isinstance(lake, LakeLocation):
        directory = _progress_at(lake)
        found = []
        for name in directory.list_names(".json"):
            data = directory.join(name).read_bytes()
            if data is not None:  # gone since listed: its pipeline is no more
                found.append(_read_progress(data, directory.join(name)))
        return found
    folder = progress_dir(lake)
    paths = sorted(folder.glob("*.json")) if folder.is_dir() else []
    return [_read_progress_file(path) for path in paths]


RETIRED = ("_replcheck", "retired")


def retired_dir(lake: Path, pipeline: str) -> Path:
    """Where a pipeline moves lake tables it had to load again with another schema."""
    return lake.joinpath(*RETIRED, pipeline)


def retired_at(lake: LakeLocation, pipeline: str) -> LakeLocation:
    """``retired_dir`` of a lake anywhere (an object store's too)."""
    return lake.join(*RETIRED, pipeline)


def write_progress(
    lake: Path | LakeLocation,
    pipeline: str,
    position: Position,
    tables: Sequence[str],
    marks: RefreshMarks | None = None,
    source: str | None = None,
) -> None:
    """Record atomically that ``pipeline`` wrote everything up to ``position`` of ``tables``
    (except where ``marks`` say otherwise), reading the log of ``source`` (the server its
    reader names, ``LogReader.source_identity``; None: not told)."""
    document = {
        "pipeline": pipeline,
        "position": position.value,
        "position_text": position.text,
        "tables": sorted(tables),
        **(marks or RefreshMarks()).to_document(),
        **({"source": source} if source is not None else {}),
    }
    lake = as_location(lake).place()
    if isinstance(lake, LakeLocation):  # one PUT: readers see the old file or the new one
        _progress_at(lake).join(f"{pipeline}.json").write_bytes(json.dumps(document).encode())
        return
    directory = progress_dir(lake)
    path = directory / f"{pipeline}.json"
    temporary = directory / f".{pipeline}.json.tmp"
    with naming_full_disk(path, lake):  # the old one stays whole
        directory.mkdir(parents=True, exist_ok=True)
        with deleted_on_failure(temporary):
            temporary.write_text(json.dumps(document), encoding="utf-8")
        os.replace(temporary, path)


def read_progress(lake: Path | LakeLocation) -> dict[str, tuple[Position, frozenset[str]]]:
    """Per pipeline, the position it has reached and the tables it covers."""
    found = {}
    for progress in _progress_files(lake):
        found[progress.pipeline] = (progress.position, progress.tables)
    return found


def sources_of(lake: Path | LakeLocation, table: str) -> list[tuple[str | None, Position]]:
    """Per pipeline writing ``table``, the server whose log it reads (None: not recorded)
    and the position it has reached."""
    return [(p.source, p.position) for p in _progress_files(lake) if table in p.tables]


# The pipeline writes its progress file with every batch, the first batch of a run included
# (even an empty one: ``Pipeline._flush``), from its checkpoint's state.
_PROGRESS_FIX = "delete it: the pipeline's next `cdc run` writes it again with its first batch"


@dataclass(frozen=True, slots=True)
class _Progress:
    """One pipeline's progress file (``write_progress``)."""

    pipeline: str
    position: Position
    tables: frozenset[str]
    marks: RefreshMarks
    source: str | None = None


def _read_progress_file(path: Path) -> _Progress:
    """A progress file, read through the checked reader: a corrupt one names the fix."""
    return _from_document(read_json_file(path, _PROGRESS_FIX), path)


def _read_progress(data: bytes, where: LakeLocation) -> _Progress:
    """A progress file of an object-store lake (``_read_progress_file``)."""
    return _from_document(read_json_bytes(data, where.display(), _PROGRESS_FIX), where.display())


def _from_document(document: dict[str, Any], path: Path | str) -> _Progress:
    try:
        position = Position(int(document["position"]), str(document["position_text"]))
        tables = frozenset(map(str, document["tables"]))
        marks = RefreshMarks.from_document(document)
        source = document.get("source")  # files written before it have none
        pipeline = str(document["pipeline"])
        return _Progress(pipeline, position, tables, marks, None if source is None else str(source))
    except (KeyError, TypeError, ValueError, TerminalError) as exc:
        raise corrupt_file(path, f"a field is missing or wrong ({exc!r})", _PROGRESS_FIX) from exc


def changelog_files(table: LakeTable) -> tuple[list[str], pa.Schema]:
    """Data files of the changelog's newest version and its Arrow schema."""
    import pyarrow as pa
    from deltalake.exceptions import DeltaError

    generation = _generation_before(table)
    if generation is None:
        if _was_retired(table):
            raise ChangelogMoved.of(table)
        raise TerminalError(
            f"lake table {table.table} has no changelog at {table.changelog_at}: "
            "check the comparison's target table, or run the CDC pipeline first"
        )
    try:
        delta = read_delta(table.changelog_at)
        generation = _generation_read(generation, delta)
        return list(delta.file_uris()), pa.schema(delta.schema().to_arrow())
    except (OSError, DeltaError) as exc:
        if not _moved_since(table, generation):
            raise TerminalError(
                f"lake table {table.table}: its changelog at {table.changelog_at} cannot be"
                f" read ({str(exc).splitlines()[0]}); check the Delta log files under that"
                " path (one is missing or damaged)",
                {"table": table.table},
            ) from exc
        raise ChangelogMoved.of(table) from exc


class ChangelogMoved(TransientError):
    """A reload moved a changelog aside under a reader (``PipelineSink.retire_table``)."""

    @classmethod
    def of(cls, table: LakeTable) -> ChangelogMoved:
        return cls(
            f"lake table {table.table}: its changelog was moved aside while it was read (the"
            " CDC pipeline is loading the table again after a DDL); validate again",
            {"table": table.table},
        )


def _was_retired(table: LakeTable) -> bool:
    """Whether a pipeline moved ``table`` aside to load it again (``retired_dir``)."""
    if not table.location.is_local:
        *folders, name = table.root_at.relative_to(table.location).split("/")
        pipelines = table.location.join(*RETIRED).list_folders()
        return any(
            found.startswith(f"{name}@")
            for pipeline in pipelines
            for found in retired_at(table.location, pipeline).join(*folders).list_folders()
        )
    retired = retired_dir(table.lake, "*").relative_to(table.lake)
    name = glob.escape(str(table.root.relative_to(table.lake)))
    return any(table.lake.glob(f"{retired}/{name}@*"))


def changelog_generation(table: LakeTable) -> int | str | None:
    """Which generation of the changelog is there (None: none): a reload moves the table's
    directory aside and creates a new one, so the log's inode tells them apart (on an
    object store, where a move is a copy and a delete, the Delta table's id)."""
    if not table.location.is_local:
        return _table_id(table.changelog_at) if table.exists() else None
    try:
        return os.stat(table.changelog / "_delta_log").st_ino
    except FileNotFoundError:
        return None


# A store's generation before its read: the table id, which the read itself finds (reading
# the id first would read the whole Delta log twice: a GET per commit file each time).
_FROM_THE_READ = "the id the read finds"


def _generation_before(table: LakeTable) -> int | str | None:
    """The changelog's generation before a read of it (None: there is none)."""
    if table.location.is_local:
        return changelog_generation(table)
    return _FROM_THE_READ if table.exists() else None


def _generation_read(generation: int | str, delta: DeltaTable) -> int | str:
    """``generation``, made the table's id when it is to come from the read."""
    return str(delta.metadata().id) if generation == _FROM_THE_READ else generation


def _moved_since(table: LakeTable, generation: int | str) -> bool:
    """Whether a reload moved the changelog aside since it was ``generation``. A store's
    read that failed before it found the id can only tell a table gone (a new one already
    there is the caller's to see: ``validator.reloads`` compares the ids around a
    comparison)."""
    now = changelog_generation(table)
    if generation == _FROM_THE_READ:
        return now is None
    return now != generation


def _table_id(delta: LakeLocation) -> str | None:
    """The id of the Delta table at ``delta`` (None: none, or gone while read)."""
    from deltalake.exceptions import DeltaError

    try:
        return str(read_delta(delta).metadata().id)
    except (OSError, DeltaError):
        return None
