"""HANA log retention on hand-written view rows (``data/log_retention.json``, shaped as the
SAP HANA reference documents the views; not captured from a server) and file names.

Volume 2 (the indexserver) has segments 40-45: 40 and 41 Free (their records only in log
backups), 42 BackedUp, 43 Truncated, 44 Closed, 45 Writing; its log backups cover
[10683000000, 10683050000) and, after a lost backup, [10683113600, 10683243520) in three
files. Volume 1 (the nameserver) counts its own positions over the same numbers.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from typing import Any

import pytest

from cdc_core.errors import TerminalError
from connectors.hana import log_retention as lr
from connectors.hana.connector import HanaConnector
from connectors.hana.log_retention import Archived, Gone, LogBackupFile, LogSegment, Online
from tests.connectors.hana.recorded import RECORDED, RETENTION

KEYWORDS = {"SELECT", "FROM", "JOIN", "ON", "WHERE", "AND", "ORDER", "BY", "SYS", "C", "F"}


def where(position: int, volume: int = 2) -> lr.LogLocation:
    return lr.locate(position, RETENTION.segments, RETENTION.backups, volume=volume)


def segment_of(location: lr.LogLocation) -> int:
    assert isinstance(location, Online), location
    return location.segment.segment_id


def backup_of(location: lr.LogLocation) -> int:
    assert isinstance(location, Archived), location
    return location.backup.backup_id


@pytest.mark.parametrize("query", [lr.SEGMENTS_SQL, lr.LOG_BACKUPS_SQL])
def test_the_queries_name_only_documented_columns(query: str) -> None:
    documented = RECORDED["documented"]
    views = re.findall(r"SYS\.(M_\w+)", query)
    names = set(re.findall(r"\b[A-Z_]+\b", re.sub(r"'[^']*'", "", query))) - KEYWORDS
    allowed = set().union(*(documented[view] for view in views))
    assert names - set(views) <= allowed


def test_the_catalog_query_keeps_successful_log_backups_of_volumes() -> None:
    assert lr.LOG_BACKUPS_SQL == (
        "SELECT C.BACKUP_ID, F.SOURCE_ID, F.DESTINATION_TYPE_NAME, F.DESTINATION_PATH"
        " FROM SYS.M_BACKUP_CATALOG C JOIN SYS.M_BACKUP_CATALOG_FILES F"
        " ON F.ENTRY_ID = C.ENTRY_ID WHERE C.ENTRY_TYPE_NAME = 'log backup'"
        " AND C.STATE_NAME = 'successful' AND F.SOURCE_TYPE_NAME = 'volume'"
        " ORDER BY F.SOURCE_ID, C.BACKUP_ID"
    )


def test_a_full_path_parses_to_its_volume_range_and_backup_time() -> None:
    path = (
        "/usr/sap/H01/HDB00/backup/log/DB_H01/log_backup_2_0_10683113600_10683180608.1700000100000"
    )
    backup = lr.parse_log_backup_name(path)
    assert backup == LogBackupFile(2, 0, 10683113600, 10683180608, 1700000100000, path)
    assert backup.backed_up_at == dt.datetime(2023, 11, 14, 22, 15, tzinfo=dt.UTC)


def test_a_name_without_backup_id_takes_the_catalogs() -> None:
    backint = RETENTION.backups[0]
    assert (backint.volume, backint.backup_id) == (1, 1700000500000)
    assert lr.parse_log_backup_name("log_backup_3_1_5_9.77", 77).partition == 1


@pytest.mark.parametrize(
    ("name", "backup_id", "says"),
    [
        ("log_backup_2_0_100", None, "not a HANA log backup file name"),
        ("log_backup_2_0_1x_200.1700000100000", None, "not a HANA log backup file name"),
        ("/backup/data/COMPLETE_DATA_BACKUP_databackup_0_1", None, "databackup_0_1"),
        ("log_backup_2_0_100_200.1700000100000.bak", None, "not a HANA log backup file name"),
        ("log_backup_0_0_0_0.1700000100000", None, "backup of its backup catalog"),
        ("log_backup_2_0_200_100.1700000100000", None, "not a usable log backup"),
        ("log_backup_2_0_100_200", None, "carries no backup ID"),
        ("log_backup_2_0_100_200.1700000100000", 1700000990000, "the catalog 1700000990000"),
    ],
)
def test_a_bad_name_is_refused_naming_it(name: str, backup_id: int | None, says: str) -> None:
    with pytest.raises(TerminalError, match=re.escape(says)) as caught:
        lr.parse_log_backup_name(name, backup_id)
    assert name in str(caught.value)


@pytest.mark.parametrize(
    ("position", "segment"),
    [
        (10683196416, 42),  # BackedUp: its first position
        (10683243519, 42),  # its last
        (10683243520, 43),  # its end is the next segment's first: Truncated
        (10683260159, 43),
        (10683260160, 44),  # Closed
        (10683275263, 44),
        (10683275264, 45),  # Writing
    ],
)
def test_a_position_in_a_segment_that_keeps_its_records_is_online(
    position: int, segment: int
) -> None:
    assert segment_of(where(position)) == segment


def test_the_segment_being_written_holds_every_later_position() -> None:
    # HANA fills MAX_POSITION for closed segments only; the recorded one is no end.
    assert RECORDED["M_LOG_SEGMENTS"][8]["MAX_POSITION"] == 10683281920
    assert segment_of(where(10683281920 + 10**6)) == 45


@pytest.mark.parametrize(
    ("position", "backup"),
    [
        (10683113600, 1700000100000),  # segment 40 is Free: only its backup has it
        (10683180607, 1700000100000),
        (10683180608, 1700000990000),  # a backup's last position is the next one's first
        (10683196415, 1700000990000),
        (10683000000, 1699990000000),
        (10683049999, 1699990000000),
    ],
)
def test_a_position_only_in_a_log_backup_is_archived(position: int, backup: int) -> None:
    assert backup_of(where(position)) == backup


def test_before_the_oldest_backup_the_position_is_gone_naming_the_oldest_left() -> None:
    assert where(10682999999) == Gone(10682999999, 2, 0, oldest_available=10683000000)


def test_a_position_in_a_lost_backup_is_gone_although_older_ones_remain() -> None:
    for position in (10683050000, 10683113599):
        assert where(position) == Gone(position, 2, 0, oldest_available=10683000000)


def test_each_volume_answers_from_its_own_segments_and_backups() -> None:
    assert backup_of(where(10683150000, volume=1)) == 1700000500000
    assert backup_of(where(10683150000, volume=2)) == 1700000100000
    assert segment_of(where(10683210000, volume=1)) == 8  # RetainedFree still holds it
    assert segment_of(where(10683210000, volume=2)) == 42
    assert where(10683099999, volume=1) == Gone(10683099999, 1, 0, 10683100000)


def test_with_an_empty_catalog_only_segments_answer() -> None:
    # Segment 40 is Free: without its backup the position is gone; 42 is the oldest left.
    assert lr.locate(10683150000, RETENTION.segments, [], volume=2) == Gone(
        10683150000, 2, 0, oldest_available=10683196416
    )
    assert segment_of(lr.locate(10683200000, RETENTION.segments, [], volume=2)) == 42


def test_an_empty_catalog_and_no_segment_is_a_wrong_volume() -> None:
    with pytest.raises(TerminalError, match="volume 5 partition 0 has no log"):
        lr.locate(1, RETENTION.segments, RETENTION.backups, volume=5)
    with pytest.raises(TerminalError, match="volume 2 partition 1 has no log"):
        lr.locate(1, RETENTION.segments, RETENTION.backups, volume=2, partition=1)


def test_a_position_past_the_end_of_a_log_with_no_segment_being_written_is_refused() -> None:
    closed = [s for s in RETENTION.segments if s.state != "Writing"]
    with pytest.raises(TerminalError, match="beyond the end of HANA log volume 2"):
        lr.locate(10683275264, closed, RETENTION.backups, volume=2)


def test_a_gap_before_the_segment_being_written_is_gone_not_beyond_the_end() -> None:
    segments = [LogSegment(2, 0, 1, "Closed", 100, 200), LogSegment(2, 0, 2, "Writing", 300, None)]
    assert lr.locate(250, segments, [], volume=2) == Gone(250, 2, 0, oldest_available=100)


def test_everything_free_and_no_backup_leaves_nothing_available() -> None:
    free = [LogSegment(2, 0, 1, "Free", 100, 200), LogSegment(2, 0, 2, "Formatting", 0, 0)]
    assert lr.locate(150, free, [], volume=2) == Gone(150, 2, 0, oldest_available=None)


@pytest.mark.parametrize("state", [*RECORDED["documented"]["M_LOG_SEGMENTS.STATE"], "New"])
def test_only_segments_whose_state_keeps_their_records_hold_positions(state: str) -> None:
    keeps = {"Writing", "Closed", "Truncated", "BackedUp", "RetainedFree"}
    assert LogSegment(2, 0, 1, state, 100, 200).holds(150) == (state in keeps)


def test_unused_segments_without_positions_are_left_out() -> None:
    assert 46 not in {s.segment_id for s in RETENTION.segments}
    assert len(RETENTION.segments) == 9


def test_rows_that_break_the_invariants_are_named() -> None:
    row = dict(RECORDED["M_LOG_SEGMENTS"][5], MAX_POSITION=10683196415)
    with pytest.raises(TerminalError, match=r"M_LOG_SEGMENTS row .* MAX_POSITION 10683196415"):
        lr.segment_from_row(row)
    row = dict(RECORDED["M_LOG_SEGMENTS"][5], MAX_POSITION=None)
    with pytest.raises(TerminalError, match="a BackedUp segment has no MAX_POSITION"):
        lr.segment_from_row(row)
    backup = dict(RECORDED["log_backups"][2], SOURCE_ID=3)
    with pytest.raises(TerminalError, match="names volume 2, the catalog 3"):
        lr.backup_from_row(backup)


def test_an_answer_cannot_contradict_its_evidence() -> None:
    segment = RETENTION.segments[5]  # 42: [10683196416, 10683243520)
    with pytest.raises(ValueError, match="does not hold"):
        Online(10683243520, segment)
    with pytest.raises(ValueError, match="does not hold"):
        Archived(10683180608, RETENTION.backups[2])
    with pytest.raises(ValueError, match="available, not gone"):
        Gone(10683000000, 2, 0, 10683000000)


class RecordedCursor:
    """A DB-API cursor that answers the two queries with the recorded rows."""

    def __init__(self) -> None:
        self.description: list[tuple[str, ...]] = []
        self.rows: list[tuple[Any, ...]] = []
        self.executed: list[str] = []
        self.closed = False

    def execute(self, query: str) -> None:
        self.executed.append(query)
        recorded = {lr.SEGMENTS_SQL: "M_LOG_SEGMENTS", lr.LOG_BACKUPS_SQL: "log_backups"}
        rows = RECORDED[recorded[query]]
        select_list = query.removeprefix("SELECT ").split(" FROM ")[0]
        names = [column.strip().split(".")[-1] for column in select_list.split(",")]
        self.description = [(name,) for name in names]
        self.rows = [tuple(row[name] for name in names) for row in rows]

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self.rows

    def close(self) -> None:
        self.closed = True


class RecordedConnection:
    def __init__(self) -> None:
        self.cursors: list[RecordedCursor] = []

    def cursor(self) -> RecordedCursor:
        self.cursors.append(RecordedCursor())
        return self.cursors[-1]


def test_fetching_runs_both_queries_and_reads_columns_by_name() -> None:
    connection = RecordedConnection()
    assert lr.fetch_retention(connection) == RETENTION
    (cursor,) = connection.cursors
    assert cursor.executed == [lr.SEGMENTS_SQL, lr.LOG_BACKUPS_SQL]
    assert cursor.closed


@pytest.mark.hana
@pytest.mark.integration
def test_live_each_segment_being_written_is_online_at_its_first_position() -> None:
    connector = HanaConnector(
        os.environ["REPLCHECK_HANA_URL"], os.environ.get("REPLCHECK_HANA_PASSWORD")
    )
    retention = lr.read_retention(connector)
    states = {segment.state for segment in retention.segments}
    assert states <= set(RECORDED["documented"]["M_LOG_SEGMENTS.STATE"])
    writing = [segment for segment in retention.segments if segment.state == "Writing"]
    assert writing, "every service with a log volume writes one segment"
    for segment in writing:
        found = lr.locate(
            segment.min_position,
            retention.segments,
            retention.backups,
            volume=segment.volume,
            partition=segment.partition,
        )
        assert found == Online(segment.min_position, segment)
