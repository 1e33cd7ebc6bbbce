"""HANA log retention: is a log position still online, archived in a log backup, or gone?

The question a log-based reader asks before it resumes at a position. HANA keeps its redo
log in segments of each service's log volume (``SYS.M_LOG_SEGMENTS``) and, once backed up,
in log backups listed by the backup catalog, whose file names carry the volume, the log
partition and the range: ``log_backup_<volume>_<partition>_<first>_<last>.<backup ID>``,
the backup ID being the epoch milliseconds at which the backup started. Each volume (each
service) counts its own positions, so `locate` takes the volume and partition and never
mixes ranges of different volumes.

Ranges are half-open, ``[first, last)``: the SQL and System Views Reference, "M_LOG_SEGMENTS
System View", says MIN_POSITION is "the first position contained in the log segment" and
MAX_POSITION "the position behind the last log record", filled "for closed log segments
only". A log backup copies closed segments and is read the same way (consecutive backups
of a volume share their boundary: one ends where the next begins), so a position equal to
a backup's last position belongs to the next backup or segment.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import enum
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any, ClassVar

from cdc_core.drivers import driver_import
from cdc_core.errors import TerminalError

if TYPE_CHECKING:
    from connectors.hana.connector import HanaConnector

SEGMENTS_SQL = (
    "SELECT VOLUME_ID, PARTITION_ID, SEGMENT_ID, STATE, MIN_POSITION, MAX_POSITION"
    " FROM SYS.M_LOG_SEGMENTS ORDER BY VOLUME_ID, PARTITION_ID, MIN_POSITION"
)
# Successful log backups of volumes only: the backup of the backup catalog itself is a
# "log backup" entry too (file log_backup_0_0_0_0), but it holds no redo log.
LOG_BACKUPS_SQL = (
    "SELECT C.BACKUP_ID, F.SOURCE_ID, F.DESTINATION_TYPE_NAME, F.DESTINATION_PATH"
    " FROM SYS.M_BACKUP_CATALOG C"
    " JOIN SYS.M_BACKUP_CATALOG_FILES F ON F.ENTRY_ID = C.ENTRY_ID"
    " WHERE C.ENTRY_TYPE_NAME = 'log backup' AND C.STATE_NAME = 'successful'"
    " AND F.SOURCE_TYPE_NAME = 'volume'"
    " ORDER BY F.SOURCE_ID, C.BACKUP_ID"
)

WRITING = "Writing"
# The M_LOG_SEGMENTS states whose segment still holds its log records (SQL and System Views
# Reference, "M_LOG_SEGMENTS System View"): Writing (being written), Closed (not backed up,
# needed for restart), Truncated (not needed for restart, not backed up yet), BackedUp
# (still needed for restart), RetainedFree (backed up, kept to resynchronize system
# replication sites). Not online: Free (backed up and may be overwritten at any moment),
# Formatting and Preallocated (never used), ClosedIncomplete and FreeIncomplete (left
# incomplete on a system replication site), and any state this list does not know.
ONLINE_STATES = frozenset({WRITING, "Closed", "Truncated", "BackedUp", "RetainedFree"})

_LOG_BACKUP_NAME = re.compile(r"log_backup_(\d+)_(\d+)_(\d+)_(\d+)(?:\.(\d+))?")
_NAME_FORM = "log_backup_<volume>_<partition>_<first position>_<last position>.<backup ID>"
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@dataclass(frozen=True, slots=True)
class LogSegment:
    """One row of ``M_LOG_SEGMENTS``: a segment of a log volume's partition.

    ``max_position`` is None for the segment being written (HANA fills it for closed
    segments only): it holds every position from ``min_position`` on.
    """

    volume: int
    partition: int
    segment_id: int
    state: str
    min_position: int
    max_position: int | None

    def __post_init__(self) -> None:
        if self.min_position < 0:
            raise ValueError(f"MIN_POSITION {self.min_position} is negative")
        if self.max_position is None and self.state != WRITING:
            raise ValueError(f"a {self.state} segment has no MAX_POSITION")
        if self.max_position is not None and self.max_position < self.min_position:
            raise ValueError(f"MAX_POSITION {self.max_position} < MIN_POSITION")

    def holds(self, position: int) -> bool:
        """True when the segment's state keeps its records and ``position`` is in range."""
        if self.state not in ONLINE_STATES or position < self.min_position:
            return False
        return self.max_position is None or position < self.max_position


@dataclass(frozen=True, slots=True)
class LogBackupFile:
    """A log backup of one volume's partition: positions ``[min_position, max_position)``."""

    volume: int
    partition: int
    min_position: int
    max_position: int
    backup_id: int
    path: str

    def __post_init__(self) -> None:
        if self.volume < 1 or self.partition < 0 or self.backup_id < 0:
            raise ValueError("volume, partition and backup ID must be positive")
        if not 0 <= self.min_position <= self.max_position:
            raise ValueError(f"positions {self.min_position} to {self.max_position}")

    @property
    def backed_up_at(self) -> dt.datetime:
        """When the backup started (UTC): its backup ID is that instant in epoch ms."""
        return _EPOCH + dt.timedelta(milliseconds=self.backup_id)

    def holds(self, position: int) -> bool:
        """True when ``position`` is in the backup's range."""
        return self.min_position <= position < self.max_position


class Availability(enum.Enum):
    """Where a reader finds a log position."""

    ONLINE = "online"
    ARCHIVED = "archived"
    GONE = "gone"


@dataclass(frozen=True, slots=True)
class Online:
    """The position is in a log segment that still holds its records."""

    kind: ClassVar[Availability] = Availability.ONLINE
    position: int
    segment: LogSegment

    def __post_init__(self) -> None:
        if not self.segment.holds(self.position):
            raise ValueError(f"segment {self.segment.segment_id} does not hold {self.position}")


@dataclass(frozen=True, slots=True)
class Archived:
    """The position is no longer online but in a successful log backup."""

    kind: ClassVar[Availability] = Availability.ARCHIVED
    position: int
    backup: LogBackupFile

    def __post_init__(self) -> None:
        if not self.backup.holds(self.position):
            raise ValueError(f"backup {self.backup.backup_id} does not hold {self.position}")


@dataclass(frozen=True, slots=True)
class Gone:
    """Neither a segment nor a catalogued log backup holds the position.

    ``oldest_available`` is the oldest position of the volume still online or archived
    (None when nothing is); when it is older than ``position``, the log has a gap there.
    """

    kind: ClassVar[Availability] = Availability.GONE
    fix: ClassVar[str] = (
        "restore the log backups that hold it, or take a new snapshot and resume at its position"
    )
    position: int
    volume: int
    partition: int
    oldest_available: int | None

    def __post_init__(self) -> None:
        if self.oldest_available == self.position:
            raise ValueError(f"position {self.position} is available, not gone")


LogLocation = Online | Archived | Gone


@dataclass(frozen=True, slots=True)
class LogRetention:
    """What a HANA database keeps of its log: segments and catalogued log backups."""

    segments: tuple[LogSegment, ...]
    backups: tuple[LogBackupFile, ...]


def parse_log_backup_name(name: str, backup_id: int | None = None) -> LogBackupFile:
    """The log backup a file name (or a full path) describes.

    Args:
        name: ``log_backup_<volume>_<partition>_<first>_<last>.<backup ID>``, with or
            without its directory.
        backup_id: The catalog's BACKUP_ID, for names that carry none (backint
            destinations); when the name carries one too, both must agree.

    Raises:
        TerminalError: The name is not a log backup of a volume, or disagrees with
            ``backup_id``.
    """
    base = PurePosixPath(name).name
    match = _LOG_BACKUP_NAME.fullmatch(base)
    if match is None:
        raise TerminalError(f"{name!r} is not a HANA log backup file name ({_NAME_FORM})")
    volume, partition, first, last = (int(part) for part in match.group(1, 2, 3, 4))
    if (volume, partition, first, last) == (0, 0, 0, 0):
        raise TerminalError(f"{name!r} is HANA's backup of its backup catalog, not of a log")
    carried = None if match.group(5) is None else int(match.group(5))
    if carried is not None and backup_id is not None and carried != backup_id:
        raise TerminalError(f"{name!r} carries backup ID {carried}, the catalog {backup_id}")
    found_id = carried if carried is not None else backup_id
    if found_id is None:
        raise TerminalError(f"{name!r} carries no backup ID and the catalog gave none")
    try:
        return LogBackupFile(volume, partition, first, last, found_id, name)
    except ValueError as exc:
        raise TerminalError(f"{name!r} is not a usable log backup: {exc}") from exc


def locate(
    position: int,
    segments: Iterable[LogSegment],
    backups: Iterable[LogBackupFile],
    *,
    volume: int,
    partition: int = 0,
) -> LogLocation:
    """Where a reader of one log volume finds ``position``: online, archived, or gone.

    An online segment wins over a backup of the same records (reading it needs no
    restore); among backups, the one with the oldest range and backup ID answers. The
    segment being written holds every position from its first on, so a position not
    written yet is online there: the reader waits for it.

    Raises:
        TerminalError: The volume has neither segments nor backups (a wrong volume), or
            ``position`` lies beyond the volume's log (not this database's log any more,
            e.g. after a recovery to an earlier point).
    """
    own_segments = [s for s in segments if (s.volume, s.partition) == (volume, partition)]
    own_backups = [b for b in backups if (b.volume, b.partition) == (volume, partition)]
    if not own_segments and not own_backups:
        raise TerminalError(f"HANA log volume {volume} partition {partition} has no log")
    for segment in sorted(own_segments, key=lambda s: s.min_position):
        if segment.holds(position):
            return Online(position, segment)
    for backup in sorted(own_backups, key=lambda b: (b.min_position, b.backup_id)):
        if backup.holds(position):
            return Archived(position, backup)
    end = _log_end(own_segments, own_backups)
    if position >= end:
        raise TerminalError(
            f"position {position} is beyond the end of HANA log volume {volume} ({end}): not"
            " from this log (a recovery to an earlier point?); take a new snapshot"
        )
    return Gone(position, volume, partition, _oldest_available(own_segments, own_backups))


def _log_end(segments: Sequence[LogSegment], backups: Sequence[LogBackupFile]) -> int:
    """How far the volume's log is known to reach (a segment being written: its start)."""
    ends = [s.min_position if s.max_position is None else s.max_position for s in segments]
    return max([*ends, *(b.max_position for b in backups)])


def _oldest_available(
    segments: Sequence[LogSegment], backups: Sequence[LogBackupFile]
) -> int | None:
    starts = [s.min_position for s in segments if s.state in ONLINE_STATES]
    starts += [b.min_position for b in backups if b.min_position < b.max_position]
    return min(starts, default=None)


def segment_from_row(row: Mapping[str, Any]) -> LogSegment:
    """A ``M_LOG_SEGMENTS`` row (keyed by the view's column names) as a segment.

    Raises:
        TerminalError: The row breaks a segment's invariants.
    """
    state = str(row["STATE"])
    maximum = row["MAX_POSITION"]
    try:
        return LogSegment(
            volume=int(row["VOLUME_ID"]),
            partition=int(row["PARTITION_ID"]),
            segment_id=int(row["SEGMENT_ID"]),
            state=state,
            min_position=int(row["MIN_POSITION"]),
            # Only closed segments have a MAX_POSITION; a Writing one's is not an end.
            max_position=None if state == WRITING or maximum is None else int(maximum),
        )
    except (TypeError, ValueError) as exc:
        raise TerminalError(f"M_LOG_SEGMENTS row {dict(row)} is not a log segment: {exc}") from exc


def backup_from_row(row: Mapping[str, Any]) -> LogBackupFile:
    """A row of `LOG_BACKUPS_SQL` as a log backup file, its name checked against the row.

    Raises:
        TerminalError: The file name is not a log backup's, or names another volume or
            backup ID than the catalog.
    """
    backup = parse_log_backup_name(str(row["DESTINATION_PATH"]), int(row["BACKUP_ID"]))
    if backup.volume != int(row["SOURCE_ID"]):
        raise TerminalError(
            f"{backup.path!r} names volume {backup.volume}, the catalog {row['SOURCE_ID']}"
        )
    return backup


def retention_from_rows(
    segment_rows: Iterable[Mapping[str, Any]], backup_rows: Iterable[Mapping[str, Any]]
) -> LogRetention:
    """Both views' rows, keyed by column name, as segments and log backups.

    Segments in a state that holds no records and shows no positions (a Preallocated
    one, say) are left out: they say nothing about where a position is.
    """
    return LogRetention(
        tuple(segment_from_row(row) for row in segment_rows if not _unused(row)),
        tuple(backup_from_row(row) for row in backup_rows),
    )


def _unused(row: Mapping[str, Any]) -> bool:
    no_positions = row["MIN_POSITION"] is None or row["MAX_POSITION"] is None
    return no_positions and row["STATE"] not in ONLINE_STATES


def fetch_retention(connection: Any) -> LogRetention:
    """Run `SEGMENTS_SQL` and `LOG_BACKUPS_SQL` on an open DB-API connection."""
    with contextlib.closing(connection.cursor()) as cursor:
        segment_rows = _fetch_mappings(cursor, SEGMENTS_SQL)
        backup_rows = _fetch_mappings(cursor, LOG_BACKUPS_SQL)
    return retention_from_rows(segment_rows, backup_rows)


def _fetch_mappings(cursor: Any, query: str) -> list[dict[str, Any]]:
    cursor.execute(query)
    names = [str(column[0]).upper() for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def read_retention(connector: HanaConnector) -> LogRetention:
    """Connect with ``connector`` and fetch the database's log retention.

    Raises:
        TerminalError: The views cannot be read (e.g. the user lacks the privilege).
        TransientError: The server cannot be reached.
    """
    with driver_import("the HANA log retention check"):
        from hdbcli import dbapi
    with contextlib.closing(connector.connect()) as connection:
        try:
            return fetch_retention(connection)
        except dbapi.Error as exc:
            raise TerminalError(
                f"cannot read the log segments and backup catalog on {connector.where}:"
                f" {exc.errortext}"
            ) from exc
