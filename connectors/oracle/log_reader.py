"""Oracle's redo log as raw changes: the LogMiner session loop.

One loop iteration mines one SCN window ``[low, high]``:

1. ``high`` is the current SCN, read right after committing an update of the flush table
   (which makes the log writer write out every redo record generated so far), capped at
   ``low + window_scns - 1``; when nothing is new the reader yields ``Idle`` and waits.
2. The logs covering the window are chosen (``plan_logs``) from V$ARCHIVED_LOG and the
   online logs (V$LOG/V$LOGFILE, or V$STANDBY_LOG on an Active Data Guard standby),
   preferring an archived copy, whose file never gets reused. A needed log that is neither
   online nor archived stops the reader with ``MissingLogError`` naming the SCN.
3. When that list differs from the session's (a log switch, an online log archived), the
   logs are added again (``ADD_LOGFILE`` NEW, then ADDFILE): LogMiner only sees logs added
   before ``START_LOGMNR`` (Oracle Database Utilities, "Starting LogMiner").
4. ``START_LOGMNR`` over the window with the online catalog (or a flat-file dictionary), then
   the V$LOGMNR_CONTENTS query; rows become raw changes through ``ChangeAssembler``, the
   code the replay (``replay.py``) runs too. Then ``low = high + 1``.

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

from cdc_core.errors import ConfigError
from cdc_core.events import RawChange
from cdc_core.names import parse_table
from cdc_core.position import Position
from cdc_core.source import Idle, TableChanged, TableDescription
from connectors.model import TableSchema
from connectors.oracle import logminer_sql as lm
from connectors.oracle.contents import (
    CONTENTS_COLUMNS,
    ChangeAssembler,
    ContentsRow,
    description_of,
)
from connectors.oracle.errors import (
    MissingLogError,
    NotArchiveLogError,
    SupplementalLoggingError,
    from_driver_error,
)
from connectors.oracle.position import position_of

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LogMinerConfig:
    """The Oracle log reader's section of the configuration.

    Args:
        window_scns: The most SCNs one LogMiner session covers.
        poll_interval_s: How long to wait when the reader has caught up.
        dictionary_file: A flat-file LogMiner dictionary on the server; ``None`` mines with
            the online catalog.
        standby_logs: Read the standby redo logs (mining on an Active Data Guard standby).
        flush_table: The table whose update flushes the log buffer (created if missing);
            ``None`` skips the flush (only safe when nothing else writes redo).
        server_time_zone: IANA zone of the server's clock; ``None`` asks the server for its
            current offset.
    """

    window_scns: int = 100_000
    poll_interval_s: float = 1.0
    dictionary_file: str | None = None
    standby_logs: bool = False
    flush_table: str | None = "REPLCHECK_LOGMNR_FLUSH"
    server_time_zone: str | None = None

    def __post_init__(self) -> None:
        if self.window_scns < 1:
            raise ConfigError("oracle.window_scns must be >= 1")
        if self.poll_interval_s < 0:
            raise ConfigError("oracle.poll_interval_s must be >= 0")


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
    if logs[0].first_scn > low:
        raise MissingLogError(
            low, f"thread {logs[0].thread}'s oldest available log starts at SCN {logs[0].first_scn}"
        )
    for before, after in itertools.pairwise(logs):
        if after.sequence != before.sequence + 1:
            raise MissingLogError(
                before.next_scn,
                f"thread {before.thread} sequence {before.sequence + 1} is neither online nor"
                " archived",
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
    ) -> None:
        if not tables:
            raise ConfigError("an Oracle log reader needs at least one captured table")
        self._connect = connect
        self.tables = dict(tables)
        self.config = config or LogMinerConfig()
        self._sleep = sleep
        self._connection: Any = None
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
        self._execute(lm.SESSION_SETUP, {}, "set the session's NLS formats")
        assembler = ChangeAssembler(self.tables, self._server_zone())
        low = start.value if start is not None else self.end_position().value
        while True:
            current = self._flushed_scn()
            high = next_window(low, current, self.config.window_scns)
            if high is None:
                yield Idle(position_of(low - 1))
                self._sleep(self.config.poll_interval_s)
                continue
            self._start_session(low, high)
            for row in self._rows(low, high):
                yield from assembler.feed(row)
            yield from assembler.flush()
            low = high + 1
            if high == current:
                yield Idle(position_of(high))

    def close(self) -> None:
        """End the LogMiner session and close the connection."""
        if self._connection is None:
            return
        with contextlib.suppress(Exception):  # ending a session that never started fails
            self._connection.cursor().execute(lm.END_LOGMNR)
        self._connection.close()
        self._connection, self._added = None, ()

    # -- database state ------------------------------------------------------------------
    def _check_database(self) -> None:
        rows = self._fetch(lm.DATABASE_STATE, {}, "read V$DATABASE")
        log_mode, supplemental_min, _, _ = rows[0]
        if log_mode != "ARCHIVELOG":
            raise NotArchiveLogError(str(log_mode))
        if supplemental_min == "NO":
            raise SupplementalLoggingError()

    def _server_zone(self) -> dt.tzinfo:
        if self.config.server_time_zone:
            return ZoneInfo(self.config.server_time_zone)
        offset = str(self._scalar(lm.SERVER_OFFSET, "read the server's time zone"))
        sign = -1 if offset.startswith("-") else 1
        hours, minutes = (int(part) for part in offset.lstrip("+-").split(":"))
        return dt.timezone(sign * dt.timedelta(hours=hours, minutes=minutes))

    def _flushed_scn(self) -> int:
        if self.config.flush_table is not None:
            self._flush_log_buffer(self.config.flush_table)
        return int(self._scalar(lm.CURRENT_SCN, "read the current SCN"))

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
    def _start_session(self, low: int, high: int) -> None:
        online = lm.STANDBY_LOGS if self.config.standby_logs else lm.ONLINE_LOGS
        binds = {"low_scn": low, "high_scn": high}
        logs = plan_logs(
            self._fetch(lm.ARCHIVED_LOGS, binds, "list archived logs"),
            self._fetch(online, binds, "list online logs"),
            low,
        )
        names = tuple(log.name for log in logs)
        if names != self._added:
            logger.info("LogMiner: adding %s logs for SCN %s..%s", len(names), low, high)
            for index, name in enumerate(names):
                statement = lm.ADD_FIRST_LOGFILE if index == 0 else lm.ADD_LOGFILE
                self._execute(statement, {"name": name}, "add a redo log", scn=low)
            self._added = names
        if self.config.dictionary_file is None:
            start, extra = lm.START_WITH_ONLINE_CATALOG, {}
        else:
            start, extra = (
                lm.START_WITH_DICTIONARY_FILE,
                {"dictionary_file": self.config.dictionary_file},
            )
        self._execute(
            start, {"start_scn": low, "end_scn": high, **extra}, "start LogMiner", scn=low
        )

    def _rows(self, low: int, high: int) -> Iterator[ContentsRow]:
        pairs = [parse_table(table).parts for table in sorted(self.tables)]
        query = lm.contents_query(len(pairs))
        binds = lm.contents_binds(low, high, pairs)  # type: ignore[arg-type]
        cursor = self._open().cursor()
        cursor.arraysize = 1000
        self._run(cursor, query, binds, "query V$LOGMNR_CONTENTS", scn=low)
        while batch := cursor.fetchmany():
            for values in batch:
                yield ContentsRow.from_record(dict(zip(CONTENTS_COLUMNS, values, strict=True)))

    # -- driver plumbing -----------------------------------------------------------------
    def _open(self) -> Any:
        if self._connection is None:
            self._connection = self._connect()
        return self._connection

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
