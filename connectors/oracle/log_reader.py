"""Oracle's redo log as raw changes: the LogMiner session loop.

One loop iteration mines one SCN window ``[low, high]``:

1. ``high`` is the current SCN, capped at ``low + window_scns - 1``; when nothing is new
   the reader yields ``Idle`` and waits. On a primary the SCN is read right after committing
   an update of the flush table (which makes the log writer write out every redo record
   generated so far); with ``mining=standby`` nothing is written and the SCN is the one the
   standby's redo apply has reached.
2. The logs covering the window are chosen (``plan_logs``) from V$ARCHIVED_LOG and the
   online logs (V$LOG/V$LOGFILE, or V$STANDBY_LOG on an Active Data Guard standby),
   preferring an archived copy, whose file never gets reused. A needed log that is neither
   online nor archived stops the reader with ``MissingLogError`` naming the SCN, the thread
   and the sequence. With ``dictionary=redo_logs`` the list starts at the latest dictionary
   extracted into the archived redo before the window.
3. When that list differs from the session's (a log switch, an online log archived), the
   logs are added again (``ADD_LOGFILE`` NEW, then ADDFILE): LogMiner only sees logs added
   before ``START_LOGMNR`` (Oracle Database Utilities, "Starting LogMiner").
4. ``START_LOGMNR`` over the window with the configured dictionary, then the
   V$LOGMNR_CONTENTS query; rows become raw changes through ``ChangeAssembler``, the code
   the replay (``replay.py``) runs too. Then ``low = high + 1``.
5. An online log archived and overwritten while it is read (ORA-00310/ORA-00334) makes the
   reader list the logs again (the archived copy now) and mine the same window again,
   skipping the rows it already fed: a window's rows come back in the same redo order from
   either copy.

With ``mining_instance`` (the Active Data Guard "LogMiner on another instance" method) the
LogMiner session (steps 3-5: the NLS setup, ``ADD_LOGFILE``, ``START_LOGMNR``, the contents
query, ``END_LOGMNR``) runs on a connection to that instance, by the log files' names the
database lists; everything else (the role, the SCN, the log lists, the tables) is read from
the database itself, which is never written in standby mode.

Windows split at SCN boundaries, and all rows of one SCN lie in one window, so a CSF
continuation or a row movement pair never straddles two windows, and re-mining from a
position yields the same changes in the same order.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo

from cdc_core.capture.events import RawChange
from cdc_core.capture.position import Position
from cdc_core.capture.source import Idle, TableChanged, TableDescription
from cdc_core.errors import ConfigError
from cdc_core.names import parse_table
from connectors.model import TableSchema
from connectors.oracle.errors import (
    ArchiveDestinationError,
    DictionaryUnavailableError,
    LogReusedError,
    MiningModeError,
    MissingLogError,
    NotArchiveLogError,
    RacError,
    SupplementalLoggingError,
    UnsupportedTableError,
    from_driver_error,
)
from connectors.oracle.logminer import sql as lm
from connectors.oracle.logminer.contents import (
    CONTENTS_COLUMNS,
    ChangeAssembler,
    ContentsRow,
    description_of,
)
from connectors.oracle.position import position_of
from connectors.oracle.source_config import BUILD_FLAT_FILE, BUILD_IN_REDO, LogMinerConfig

logger = logging.getLogger(__name__)


__all__ = ["LogFile", "LogMinerConfig", "OracleLogReader", "next_window", "plan_logs"]
STANDBY_OPEN_MODE = "READ ONLY WITH APPLY"
REUSED_LOG_RETRIES = 3  # re-mining a window whose online log was overwritten, at most


@dataclass(frozen=True, slots=True)
class LogFile:
    """One redo log file LogMiner can read: SCNs ``[first_scn, next_scn)`` of a thread."""

    name: str
    thread: int
    sequence: int
    first_scn: int
    next_scn: int


def plan_logs(
    archived: Iterable[Sequence[Any]], online: Iterable[Sequence[Any]], low: int
) -> list[LogFile]:
    """The logs to mine for a window starting at ``low``, in (thread, sequence) order.

    Args:
        archived: ``lm.ARCHIVED_LOGS`` rows (name, thread, sequence, first, next).
        online: ``lm.ONLINE_LOGS`` or ``lm.STANDBY_LOGS`` rows, same columns.
        low: The window's first SCN.

    Raises:
        MissingLogError: No log holds ``low``, or a thread's sequence has a gap.
    """
    chosen: dict[tuple[int, int], LogFile] = {}
    for rows in (archived, online):  # archived first: its copy wins
        for name, thread, sequence, first, nxt in rows:
            chosen.setdefault(
                (int(thread), int(sequence)),
                LogFile(name, int(thread), int(sequence), int(first), int(nxt)),
            )
    logs = [chosen[key] for key in sorted(chosen)]
    if not logs:
        raise MissingLogError(low, "no online or archived log holds it")
    for thread in sorted({log.thread for log in logs}):
        _check_thread([log for log in logs if log.thread == thread], low)
    return logs


def _check_thread(logs: list[LogFile], low: int) -> None:
    oldest = logs[0]
    if oldest.first_scn > low:
        raise MissingLogError(
            low,
            f"thread {oldest.thread} sequence {oldest.sequence - 1} is neither online nor"
            f" archived: the oldest available log of the thread is sequence {oldest.sequence},"
            f" from SCN {oldest.first_scn}",
            oldest.thread,
            oldest.sequence - 1,
        )
    for before, after in itertools.pairwise(logs):
        if after.sequence != before.sequence + 1:
            raise MissingLogError(
                before.next_scn,
                f"thread {before.thread} sequence {before.sequence + 1} is neither online nor"
                " archived",
                before.thread,
                before.sequence + 1,
            )


def next_window(low: int, current: int, window_scns: int) -> int | None:
    """The last SCN of the window starting at ``low``; ``None`` when ``low`` is in the future."""
    if current < low:
        return None
    return min(current, low + window_scns - 1)


class OracleLogReader:
    """Oracle's redo, read with LogMiner (see the module docstring).

    Args:
        connect: Opens a python-oracledb connection (``OracleConnector`` supplies it).
        tables: The captured tables by ``OWNER.TABLE``.
        config: The reader's configuration.
        sleep: Waits between polls (tests pass a stub that returns at once).
    """

    def __init__(
        self,
        connect: Callable[[], Any],
        tables: Mapping[str, TableSchema],
        config: LogMinerConfig | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        mine: Callable[[], Any] | None = None,
    ) -> None:
        if not tables:
            raise ConfigError("an Oracle log reader needs at least one captured table")
        self._connect = connect
        self._mine = mine
        self.tables = dict(tables)
        self.config = config or LogMinerConfig()
        self._sleep = sleep
        self._connection: Any = None
        self._mining: Any = None
        self._threads: tuple[int, ...] = ()  # RAC mined from archived logs only: its threads
        self._added: tuple[str, ...] = ()
        self._flush_ready = False

    def describe(self, table: str) -> TableDescription:
        """The captured table's columns and key (a TerminalError if it is not captured)."""
        if table not in self.tables:
            raise ConfigError(
                f"table {table} is not captured; capture one of {sorted(self.tables)}"
            )
        return description_of(self.tables[table])

    def end_position(self) -> Position:
        """The current SCN: every transaction committed so far has commit SCN <= it."""
        return position_of(self._scalar(lm.CURRENT_SCN, "read the current SCN"))

    def iter_changes(self, start: Position | None) -> Iterator[RawChange | TableChanged | Idle]:
        """Raw changes and classified DDL from ``start`` (inclusive) on; never ends, yields
        ``Idle`` when caught up. ``tables`` follows the DDL read (``describe`` too)."""
        self._check_database()
        self._run(self._mining_cursor(), lm.SESSION_SETUP, {}, "set the session's NLS formats")
        assembler = ChangeAssembler(self.tables, self._server_zone())
        low = start.value if start is not None else self.end_position().value
        while True:
            current = self._flushed_scn()
            high = next_window(low, current, self.config.window_scns)
            if high is None:
                yield Idle(position_of(low - 1))
                self._sleep(self.config.poll_interval_s)
                continue
            for row in self._window_rows(low, high):
                yield from assembler.feed(row)
            yield from assembler.flush()
            low = high + 1
            if high == current:
                yield Idle(position_of(high))

    def check_tables(self) -> None:
        """Refuse, by name, captured tables whose redo LogMiner cannot give (index-organized
        tables: no ROWID); call before anything of them is read.

        Raises:
            UnsupportedTableError: Names each such table and the way out.
        """
        pairs = [parse_table(table).parts for table in sorted(self.tables)]
        query = lm.INDEX_ORGANIZED.format(pairs=lm.table_pairs(len(pairs)))
        binds = lm.contents_binds(0, 0, pairs)  # type: ignore[arg-type]
        del binds["low_scn"], binds["high_scn"]
        found = self._fetch(query, binds, "find index-organized tables")
        if found:
            names = ", ".join(f"{owner}.{table} ({kind})" for owner, table, kind in found)
            raise UnsupportedTableError(
                f"captured tables {names} are index-organized: LogMiner gives their rows no"
                " ROWID, by which replcheck locates rows, so their changes cannot be captured;"
                " remove them from the pipeline's tables (or move their data to a heap table:"
                " CREATE TABLE ... AS SELECT)",
                {"tables": ", ".join(f"{owner}.{table}" for owner, table, _ in found)},
            )

    def close(self) -> None:
        """End the LogMiner session and close the connection(s)."""
        mining = self._mining if self._mine is not None else self._connection
        if mining is not None:
            with contextlib.suppress(Exception):  # ending a session that never started fails
                mining.cursor().execute(lm.END_LOGMNR)
        for connection in {id(c): c for c in (self._mining, self._connection) if c}.values():
            connection.close()
        self._connection, self._mining, self._added = None, None, ()

    # -- database state ------------------------------------------------------------------
    def _check_database(self) -> None:
        rows = self._fetch(lm.DATABASE_STATE, {}, "read V$DATABASE")
        log_mode, supplemental_min, role, open_mode = rows[0]
        if log_mode != "ARCHIVELOG":
            raise NotArchiveLogError(str(log_mode))
        if supplemental_min == "NO":
            raise SupplementalLoggingError()
        self._check_role(str(role), str(open_mode))
        if self.config.archive_dest:
            self._check_destinations()
        self._check_threads()

    def _check_threads(self) -> None:
        """One redo thread, or RAC mined from archived logs only with every instance's log
        switched within ``ARCHIVE_LAG_TARGET`` (what else the reader cannot make lossless:
        a flush reaches only the instance this session is on, so another instance's redo
        could land below a window already mined)."""
        threads = [int(thread) for (thread,) in self._fetch(lm.OPEN_THREADS, {}, "read V$THREAD")]
        if len(threads) < 2:
            return
        context = {"threads": ",".join(map(str, threads))}
        if self.config.rac != "archived_logs":
            raise RacError(
                f"the database is RAC with redo threads {threads}: mining online logs could miss"
                " another instance's redo not yet written; set rac=archived_logs in the source"
                " URL to mine archived logs only (changes arrive once each thread's log is"
                " archived), or connect to a single-instance database",
                context,
            )
        lag = self._fetch(lm.ARCHIVE_LAG_TARGET, {}, "read ARCHIVE_LAG_TARGET")
        if not lag or not int(lag[0][0] or 0):
            raise RacError(
                f"rac=archived_logs on redo threads {threads}, but ARCHIVE_LAG_TARGET is 0: an"
                " idle instance's log would never be archived and would hold every change"
                " back; run ALTER SYSTEM SET ARCHIVE_LAG_TARGET = 300 SCOPE = BOTH SID = '*';",
                context,
            )
        self._threads = tuple(threads)

    def _check_role(self, role: str, open_mode: str) -> None:
        context = {"database_role": role, "open_mode": open_mode}
        if self.config.mining == "primary" and role != "PRIMARY":
            raise MiningModeError(
                f"the database is a {role} (open {open_mode}), which cannot hold the flush"
                " table: set mining=standby in the source URL to mine it without writing",
                context,
            )
        if self.config.mining == "standby" and role != "PHYSICAL STANDBY":
            raise MiningModeError(
                f"mining=standby, but the database is a {role}: connect to the Active Data"
                " Guard standby, or set mining=primary",
                context,
            )
        if self.config.mining == "standby" and open_mode != STANDBY_OPEN_MODE:
            raise MiningModeError(
                f"the standby is open {open_mode}, not {STANDBY_OPEN_MODE}: LogMiner reads a"
                " standby open read-only with redo apply (Active Data Guard); on it run"
                " ALTER DATABASE RECOVER MANAGED STANDBY DATABASE CANCEL; ALTER DATABASE OPEN"
                " READ ONLY; ALTER DATABASE RECOVER MANAGED STANDBY DATABASE DISCONNECT;",
                context,
            )

    def _check_destinations(self) -> None:
        rows = self._fetch(lm.VALID_DESTINATIONS, {}, "read V$ARCHIVE_DEST_STATUS")
        valid = {int(dest) for (dest,) in rows}
        missing = sorted(set(self.config.archive_dest) - valid)
        if missing:
            raise ArchiveDestinationError(
                f"archive_dest names {missing}, which are not VALID archive destinations (valid:"
                f" {sorted(valid)}); see SELECT DEST_ID, DEST_NAME, STATUS, ERROR FROM"
                " V$ARCHIVE_DEST_STATUS, and enable one with ALTER SYSTEM SET"
                f" LOG_ARCHIVE_DEST_STATE_{missing[0]} = ENABLE;",
                {"archive_dest": missing},
            )

    def _server_zone(self) -> dt.tzinfo:
        if self.config.server_time_zone:
            return ZoneInfo(self.config.server_time_zone)
        offset = str(self._scalar(lm.SERVER_OFFSET, "read the server's time zone"))
        sign = -1 if offset.startswith("-") else 1
        hours, minutes = (int(part) for part in offset.lstrip("+-").split(":"))
        return dt.timezone(sign * dt.timedelta(hours=hours, minutes=minutes))

    def _flushed_scn(self) -> int:
        if self._threads:
            return self._archived_scn()
        if self.config.flushes:
            assert self.config.flush_table is not None  # ``flushes`` says so
            self._flush_log_buffer(self.config.flush_table)
        return int(self._scalar(lm.CURRENT_SCN, "read the current SCN"))

    def _archived_scn(self) -> int:
        """RAC, archived logs only: the last SCN every thread's archived logs hold (an idle
        thread holds the others back until ARCHIVE_LAG_TARGET switches its log)."""
        rows = self._fetch(lm.ARCHIVED_UPTO, {}, "list archived logs per thread")
        reached = {int(thread): int(upto) for thread, upto in rows}
        return min(reached.get(thread, 1) for thread in self._threads) - 1

    def _flush_log_buffer(self, table: str) -> None:
        create, seed, update = lm.flush_statements(table)
        if not self._flush_ready:
            exists = self._fetch(
                lm.FLUSH_TABLE_EXISTS, {"name": table.upper()}, "find the flush table"
            )
            if not exists[0][0]:
                logger.info("creating the LogMiner flush table %s", table)
                self._execute(create, {}, "create the flush table (or set flush_table: null)")
                self._execute(seed, {}, "seed the flush table")
            self._flush_ready = True
        scn = self._scalar(lm.CURRENT_SCN, "read the current SCN")
        self._execute(update, {"scn": scn}, "update the flush table")
        self._open().commit()

    # -- the LogMiner session ------------------------------------------------------------
    def _window_rows(self, low: int, high: int) -> Iterator[ContentsRow]:
        """The window's rows, once each, mined again from the logs listed anew when an
        online log was overwritten while read (see the module docstring, step 5)."""
        done = 0
        for attempt in itertools.count(1):
            try:
                self._start_session(low, high)
                for index, row in enumerate(self._rows(low, high)):
                    if index >= done:
                        done += 1
                        yield row
                return
            except LogReusedError:
                if attempt >= REUSED_LOG_RETRIES:
                    raise
                logger.warning(
                    "LogMiner: an online log was overwritten while read at SCN %s..%s; mining"
                    " the window again from the logs listed now (%s rows already read)",
                    low,
                    high,
                    done,
                )
                self._added = ()

    def _start_session(self, low: int, high: int) -> None:
        logs = self._plan(low, high)
        names = tuple(log.name for log in logs)
        if names != self._added:
            logger.info("LogMiner: adding %s logs for SCN %s..%s", len(names), low, high)
            for index, name in enumerate(names):
                statement = lm.ADD_FIRST_LOGFILE if index == 0 else lm.ADD_LOGFILE
                self._run(self._mining_cursor(), statement, {"name": name}, "add a redo log", low)
            self._added = names
        dictionary = self.config.dictionary
        start, extra = lm.START_WITH_ONLINE_CATALOG, {}
        if dictionary.kind == "redo_logs":
            start = lm.START_WITH_REDO_DICTIONARY
        elif dictionary.kind == "flat_file":
            start, extra = lm.START_WITH_DICTIONARY_FILE, {"dictionary_file": dictionary.path}
        binds = {"start_scn": low, "end_scn": high, **extra}
        try:
            self._run(self._mining_cursor(), start, binds, "start LogMiner", low)
        except MissingLogError as exc:
            if dictionary.kind != "flat_file":
                raise
            raise DictionaryUnavailableError(
                f"LogMiner cannot open the dictionary file {dictionary.path} ({exc.message});"
                f" build it on the server with {BUILD_FLAT_FILE}, or set dictionary=redo_logs",
                {"dictionary": dictionary.to_text()},
            ) from exc

    def _plan(self, low: int, high: int) -> list[LogFile]:
        """The logs of the window [low, high] (from the dictionary's logs on, if in redo)."""
        first = self._dictionary_scn(low) if self.config.dictionary.kind == "redo_logs" else low
        online = lm.STANDBY_LOGS if self.config.mining == "standby" else lm.ONLINE_LOGS
        binds: dict[str, object] = {"low_scn": first, "high_scn": high}
        destinations = {f"dest{i}": d for i, d in enumerate(self.config.archive_dest, start=1)}
        archived = lm.archived_logs_query(len(destinations))
        return plan_logs(
            self._fetch(archived, binds | destinations, "list archived logs"),
            [] if self._threads else self._fetch(online, binds, "list online logs"),
            first,
        )

    def _dictionary_scn(self, low: int) -> int:
        scn = self._fetch(lm.DICTIONARY_BUILD, {"low_scn": low}, "find the redo dictionary")
        if not scn or scn[0][0] is None:
            raise DictionaryUnavailableError(
                f"dictionary=redo_logs, but no dictionary extracted into the archived redo ends"
                f" before SCN {low}; on the primary run {BUILD_IN_REDO} (then restart capture"
                " at or after its SCN), or set dictionary=online_catalog",
                {"scn": low, "dictionary": "redo_logs"},
            )
        return int(scn[0][0])

    def _rows(self, low: int, high: int) -> Iterator[ContentsRow]:
        pairs = [parse_table(table).parts for table in sorted(self.tables)]
        query = lm.contents_query(len(pairs))
        binds = lm.contents_binds(low, high, pairs)  # type: ignore[arg-type]
        cursor = self._mining_cursor()
        cursor.arraysize = 1000
        self._run(cursor, query, binds, "query V$LOGMNR_CONTENTS", scn=low)
        while batch := self._fetch_batch(cursor, low):
            for values in batch:
                yield ContentsRow.from_record(dict(zip(CONTENTS_COLUMNS, values, strict=True)))

    @staticmethod
    def _fetch_batch(cursor: Any, low: int) -> list[Any]:
        import oracledb

        try:
            return list(cursor.fetchmany())
        except oracledb.DatabaseError as exc:
            (error,) = exc.args
            raise from_driver_error(
                error.code, error.message, "read V$LOGMNR_CONTENTS", {"scn": low}
            ) from exc

    # -- driver plumbing -----------------------------------------------------------------
    def _open(self) -> Any:
        if self._connection is None:
            self._connection = self._connect()
        return self._connection

    def _mining_cursor(self) -> Any:
        """A cursor of the LogMiner session: on the mining instance's connection when the
        config names one (``mining_instance``), else on the database's."""
        if self._mine is None:
            return self._open().cursor()
        if self._mining is None:
            self._mining = self._mine()
        return self._mining.cursor()

    def _scalar(self, query: str, action: str) -> Any:
        return self._fetch(query, {}, action)[0][0]

    def _fetch(self, query: str, binds: Mapping[str, object], action: str) -> list[Any]:
        cursor = self._open().cursor()
        self._run(cursor, query, binds, action)
        return list(cursor.fetchall())

    def _execute(
        self, statement: str, binds: Mapping[str, object], action: str, scn: int | None = None
    ) -> None:
        self._run(self._open().cursor(), statement, binds, action, scn)

    @staticmethod
    def _run(
        cursor: Any,
        statement: str,
        binds: Mapping[str, object],
        action: str,
        scn: int | None = None,
    ) -> None:
        import oracledb

        try:
            cursor.execute(statement, dict(binds))
        except oracledb.DatabaseError as exc:
            (error,) = exc.args
            context = {} if scn is None else {"scn": scn}
            raise from_driver_error(error.code, error.message, action, context) from exc
