"""The real ``OracleLogReader`` loop (ADD_LOGFILE, START_LOGMNR, V$LOGMNR_CONTENTS, log
switches, re-adding logs, END_LOGMNR) driven through a recorded LogMiner session
(``logminer_recording``), which fails on any statement it does not hold next.

The recordings ``data/session_*.json`` are HAND-WRITTEN (their ``origin`` says so): composed
from the Oracle Database Reference and Utilities, never captured from a server. They check
what the reader sends and what it makes of documented answers; whether a real server answers
so is for the live tests (``test_live``, REPLCHECK_ORACLE_URL) to show.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc_core.capture.events import RawChange, RowChange
from cdc_core.capture.position import Position
from cdc_core.capture.source import Idle, TableChanged
from connectors.oracle.errors import (
    ArchiveDestinationError,
    DictionaryUnavailableError,
    MiningModeError,
    MissingLogError,
    RacError,
    UnsupportedTableError,
)
from connectors.oracle.log_reader import OracleLogReader
from connectors.oracle.source_config import Dictionary, LogMinerConfig
from tests.connectors.oracle.harness import DATA
from tests.connectors.oracle.logminer_recording import (
    RecordedConnection,
    Recording,
    recording_connect,
    save,
)
from tests.connectors.oracle.replay import load_tables

TABLES = {"SHOP.ORDERS": load_tables(DATA / "shop_tables.json")["SHOP.ORDERS"]}
X1, X2, X3 = "0A001F00E7030000", "0B000300A1040000", "0C000500B2050000"
R1, R2, R3 = "AAAR3sAAEAAAACXAAA", "AAAR3sAAEAAAACXAAB", "AAAR3sAAEAAAACXAAC"
NO_FLUSH = LogMinerConfig(flush_table=None)


def reader_of(recording: Recording, config: LogMinerConfig) -> OracleLogReader:
    connection = RecordedConnection(recording)
    return OracleLogReader(lambda: connection, TABLES, config, sleep=lambda _: None)


def until_idles(
    changes: Iterator[RawChange | TableChanged | Idle], idles: int
) -> list[RawChange | Idle]:
    out: list[RawChange | Idle] = []
    for change in changes:
        assert not isinstance(change, TableChanged)
        out.append(change)
        idles -= isinstance(change, Idle)
        if idles == 0:
            return out
    raise AssertionError("the reader stopped")


def run(name: str, config: LogMinerConfig, idles: int) -> list[tuple[Any, ...]]:
    """Read the recording ``name`` from SCN 1000 until ``idles`` Idles, close the reader,
    and check every recorded exchange was asked for; the changes summarised."""
    recording = Recording(DATA / name)
    assert recording.origin == "hand-written"
    return read(reader_of(recording, config), recording, idles)


def read(reader: OracleLogReader, recording: Recording, idles: int) -> list[tuple[Any, ...]]:
    """``run``'s read, by a reader answered from ``recording``."""
    try:
        changes = until_idles(reader.iter_changes(Position(1000, "1000")), idles)
    finally:
        reader.close()
    assert recording.unanswered() == []
    return [summary(change) for change in changes]


def summary(change: RawChange | TableChanged | Idle) -> tuple[Any, ...]:
    if isinstance(change, RowChange):
        assert change.after is not None
        return ("row", change.txid, change.position.value, change.locator, change.after["ID"])
    if isinstance(change, Idle):
        assert change.position is not None
        return ("idle", change.position.value)
    assert not isinstance(change, TableChanged)
    return (type(change).__name__.lower(), change.txid, change.position.value)


def test_a_log_switch_mid_window_re_adds_the_archived_and_the_new_online_log() -> None:
    """Hand-written recording: the flush, window 1000..1004 on online sequence 11, then a
    switch at SCN 1008 inside window 1005..1020 (sequence 11 archived by then)."""
    assert run("session_log_switch.json", LogMinerConfig(), idles=2) == [
        ("begin", X1, 1001), ("row", X1, 1002, R1, 1), ("commit", X1, 1003), ("idle", 1004),
        ("begin", X2, 1006), ("row", X2, 1007, R2, 2), ("row", X2, 1009, R3, 3),
        ("commit", X2, 1010), ("idle", 1020),
    ]  # fmt: skip


def test_an_online_log_overwritten_while_read_is_mined_again_from_its_archived_copy() -> None:
    """Hand-written recording: ORA-00310 after two rows; the window is mined again from the
    archived copy and each row reaches the pipeline once."""
    assert run("session_log_overwritten.json", NO_FLUSH, idles=1) == [
        ("begin", X1, 1001), ("row", X1, 1002, R1, 1), ("row", X1, 1003, R2, 2),
        ("commit", X1, 1009), ("idle", 1010),
    ]  # fmt: skip


def test_a_missing_archived_log_names_its_sequence_and_thread() -> None:
    """Hand-written recording: thread 1 sequence 11 is neither archived nor online; nothing
    is added to the session."""
    with pytest.raises(MissingLogError) as caught:
        run("session_missing_log.json", NO_FLUSH, idles=1)
    assert "thread 1 sequence 11 is neither online nor archived" in caught.value.message
    assert "RESTORE ARCHIVELOG SEQUENCE 11 THREAD 1" in caught.value.message
    assert caught.value.context["thread"] == 1 and caught.value.context["sequence"] == 11


def test_standby_mining_writes_nothing_and_reads_the_standby_redo_log() -> None:
    """Hand-written recording: mining=standby sends no flush, no commit, no DDL; the
    standby redo log being written is read up to its LAST_CHANGE#."""
    changes = run("session_standby.json", LogMinerConfig(mining="standby"), idles=1)
    assert changes == [
        ("begin", X1, 1001), ("row", X1, 1002, R1, 1), ("row", X1, 1005, R2, 2),
        ("commit", X1, 1006), ("idle", 1010),
    ]  # fmt: skip


def test_a_mining_instance_runs_the_logminer_session_and_the_standby_is_only_read() -> None:
    """Hand-written recordings, one per connection: the standby answers its role, the SCN
    redo apply reached and its logs by file name; the mining instance (mining_instance)
    runs NLS setup, ADD_LOGFILE by those names, START_LOGMNR with the flat-file
    dictionary, the contents query and END_LOGMNR. Each recording fails on a statement of
    the other."""
    database = Recording(DATA / "session_mining_instance_database.json")
    logmnr = Recording(DATA / "session_mining_instance_logmnr.json")
    assert (database.origin, logmnr.origin) == ("hand-written", "hand-written")
    config = LogMinerConfig(
        mining="standby",
        dictionary=Dictionary("flat_file", "/u02/logmnr/dictionary.ora"),
        mining_instance="logmnr1:1521/LOGMNR",
    )
    reader = OracleLogReader(
        lambda: RecordedConnection(database),
        TABLES,
        config,
        sleep=lambda _: None,
        mine=lambda: RecordedConnection(logmnr),
    )
    changes = read(reader, database, idles=1)
    assert logmnr.unanswered() == []
    assert changes == [
        ("begin", X1, 1001), ("row", X1, 1002, R1, 1), ("row", X1, 1005, R2, 2),
        ("commit", X1, 1006), ("idle", 1010),
    ]  # fmt: skip


def test_the_recording_fails_on_a_statement_it_does_not_hold() -> None:
    """The standby recording read as a primary: the first flush statement is not in it."""
    recording = Recording(DATA / "session_standby.json")
    recording.exchanges[0]["rows"] = [["ARCHIVELOG", "YES", "PRIMARY", "READ WRITE"]]
    with pytest.raises(AssertionError, match="FLUSH_TABLE_EXISTS"):
        next(reader_of(recording, LogMinerConfig()).iter_changes(Position(1000, "1000")))


def state(
    role: str, open_mode: str, *more: dict[str, Any], threads: tuple[int, ...] = (1,)
) -> Recording:
    """A hand-written recording of the start: V$DATABASE (and the archive destinations when
    ``more`` starts with them), the redo ``threads``, then ``more``."""
    exchanges = [{"sql": "DATABASE_STATE", "rows": [["ARCHIVELOG", "YES", role, open_mode]]}]
    if more and more[0].get("sql") == "VALID_DESTINATIONS":
        exchanges, more = [*exchanges, more[0]], more[1:]
    exchanges.append({"sql": "OPEN_THREADS", "rows": [[thread] for thread in threads]})
    document = {"origin": "hand-written", "exchanges": [*exchanges, *more]}
    return Recording(Path("start.json"), document)


@pytest.mark.parametrize(
    ("config", "role", "open_mode", "fix"),
    [
        (LogMinerConfig(), "PHYSICAL STANDBY", "READ ONLY WITH APPLY", "set mining=standby"),
        (LogMinerConfig(mining="standby"), "PRIMARY", "READ WRITE", "or set mining=primary"),
        (LogMinerConfig(mining="standby"), "PHYSICAL STANDBY", "MOUNTED", "OPEN READ ONLY"),
    ],
)
def test_a_mining_mode_that_does_not_match_the_database_says_what_to_do(
    config: LogMinerConfig, role: str, open_mode: str, fix: str
) -> None:
    reader = reader_of(state(role, open_mode), config)
    with pytest.raises(MiningModeError, match=fix):
        next(reader.iter_changes(Position(1000, "1000")))


def test_archive_destinations_are_checked_at_start() -> None:
    valid = {"sql": "VALID_DESTINATIONS", "rows": [[1], [2]]}
    reader = reader_of(state("PRIMARY", "READ WRITE", valid), LogMinerConfig(archive_dest=(2, 3)))
    with pytest.raises(ArchiveDestinationError, match=r"\[3\].*LOG_ARCHIVE_DEST_STATE_3"):
        next(reader.iter_changes(Position(1000, "1000")))


def test_a_redo_dictionary_that_was_never_built_says_how_to_build_it() -> None:
    config = LogMinerConfig(mining="standby", dictionary=Dictionary("redo_logs"))
    more: list[dict[str, Any]] = [
        {"sql": "SESSION_SETUP"},
        {"sql": "SERVER_OFFSET", "rows": [["+00:00"]]},
        {"sql": "CURRENT_SCN", "rows": [[1010]]},
        {"sql": "DICTIONARY_BUILD", "binds": {"low_scn": 1000}, "rows": [[None]]},
    ]
    reader = reader_of(state("PHYSICAL STANDBY", "READ ONLY WITH APPLY", *more), config)
    with pytest.raises(DictionaryUnavailableError, match="STORE_IN_REDO_LOGS"):
        next(reader.iter_changes(Position(1000, "1000")))


def test_a_flat_file_dictionary_lists_logs_from_the_window_and_names_the_file() -> None:
    path = "/u01/logmnr/dict.ora"
    dictionary = Dictionary("flat_file", path)
    config = LogMinerConfig(dictionary=dictionary, flush_table=None)
    window = {"low_scn": 1000, "high_scn": 1010}
    log = ["/u01/oradata/ORCL/redo01.log", 1, 11, 900, 2**48]
    more: list[dict[str, Any]] = [
        {"sql": "SESSION_SETUP"},
        {"sql": "SERVER_OFFSET", "rows": [["+00:00"]]},
        {"sql": "CURRENT_SCN", "rows": [[1010]]},
        {"sql": "ARCHIVED_LOGS", "binds": window, "rows": []},
        {"sql": "ONLINE_LOGS", "binds": window, "rows": [log]},
        {"sql": "ADD_FIRST_LOGFILE", "binds": {"name": log[0]}},
        {
            "sql": "START_WITH_DICTIONARY_FILE",
            "binds": {"start_scn": 1000, "end_scn": 1010, "dictionary_file": path},
            "error": {"code": 1284, "message": f"ORA-01284: file {path} cannot be opened"},
        },
    ]  # fmt: skip
    reader = reader_of(state("PRIMARY", "READ WRITE", *more), config)
    with pytest.raises(DictionaryUnavailableError, match=r"dict\.ora.*STORE_IN_FLAT_FILE"):
        next(reader.iter_changes(Position(1000, "1000")))


def test_index_organized_tables_are_refused_by_name_before_any_read() -> None:
    iot = {
        "sql": "INDEX_ORGANIZED(1)",
        "binds": {"owner1": "SHOP", "table1": "ORDERS"},
        "rows": [["SHOP", "ORDERS", "IOT"]],
    }
    recording = Recording(Path("start.json"), {"origin": "hand-written", "exchanges": [iot]})
    with pytest.raises(UnsupportedTableError, match=r"SHOP\.ORDERS \(IOT\).*remove them"):
        reader_of(recording, NO_FLUSH).check_tables()
    assert recording.unanswered() == []


def test_windows_after_a_quiet_poll_start_where_the_last_one_ended() -> None:
    """The reader sleeps and polls again when nothing is new (hand-written start)."""
    more: list[dict[str, Any]] = [
        {"sql": "SESSION_SETUP"},
        {"sql": "SERVER_OFFSET", "rows": [["+00:00"]]},
        *itertools.repeat({"sql": "CURRENT_SCN", "rows": [[999]]}, 2),
    ]
    reader = reader_of(state("PRIMARY", "READ WRITE", *more), NO_FLUSH)
    changes = reader.iter_changes(Position(1000, "1000"))
    assert [summary(next(changes)) for _ in range(2)] == [("idle", 999), ("idle", 999)]


@pytest.mark.parametrize(
    ("name", "config", "idles"),
    [
        ("session_log_switch.json", LogMinerConfig(), 2),
        ("session_log_overwritten.json", NO_FLUSH, 1),
        ("session_standby.json", LogMinerConfig(mining="standby"), 1),
    ],
)
def test_the_recorder_writes_what_the_replay_reads(
    tmp_path: Path, name: str, config: LogMinerConfig, idles: int
) -> None:
    """REPLCHECK_ORACLE_RECORD's recorder (``recording_connect``) over a replayed session
    in place of a server: it writes the same exchanges (an error in the middle of a read
    included), marked captured, and the reader replays them to the same changes."""
    exchanges: list[dict[str, Any]] = []
    recording = Recording(DATA / name)
    connect = recording_connect(lambda: RecordedConnection(recording), exchanges)
    reader = OracleLogReader(connect, TABLES, config, sleep=lambda _: None)
    first = read(reader, recording, idles)
    save(tmp_path / name, f"{name} recorded again", exchanges)
    assert exchanges == json.loads((DATA / name).read_text(encoding="utf-8"))["exchanges"]
    captured = Recording(tmp_path / name)
    assert captured.origin == "captured"
    assert read(reader_of(captured, config), captured, idles) == first


def test_rac_is_refused_unless_mined_from_archived_logs_with_a_lag_target() -> None:
    """A flush reaches only this session's instance: mining another instance's online log
    could miss redo it has not written yet, below a window already mined."""
    reader = reader_of(state("PRIMARY", "READ WRITE", threads=(1, 2)), LogMinerConfig())
    with pytest.raises(RacError, match=r"RAC with redo threads \[1, 2\].*rac=archived_logs"):
        next(reader.iter_changes(Position(1000, "1000")))
    no_lag = {"sql": "ARCHIVE_LAG_TARGET", "rows": [["0"]]}
    config = LogMinerConfig(rac="archived_logs")
    reader = reader_of(state("PRIMARY", "READ WRITE", no_lag, threads=(1, 2)), config)
    with pytest.raises(RacError, match="SET ARCHIVE_LAG_TARGET = 300"):
        next(reader.iter_changes(Position(1000, "1000")))


def test_rac_windows_end_where_every_thread_is_archived_and_an_idle_thread_holds_back() -> None:
    """Hand-written recording: two threads, thread 2 idle; the reader mines archived logs
    only, never past the SCN the least archived thread reaches (it waits at 1005 while
    thread 1 is archived to 1020), and goes on once thread 2 is switched and archived."""
    changes = run("session_rac_archived.json", LogMinerConfig(rac="archived_logs"), idles=3)
    assert changes == [
        ("begin", X1, 1001), ("row", X1, 1002, R1, 1), ("begin", X2, 1003),
        ("row", X2, 1004, R2, 2), ("commit", X1, 1005), ("idle", 1005), ("idle", 1005),
        ("commit", X2, 1007), ("begin", X3, 1012), ("row", X3, 1013, R3, 3),
        ("commit", X3, 1014), ("idle", 1019),
    ]  # fmt: skip
