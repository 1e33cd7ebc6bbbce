"""The errors of Oracle LogMiner CDC, each saying what to run to fix it.

Every error carries structured context (table, SCN, XID) and never a row value: SQL_REDO
and SQL_UNDO hold row values, so they are never quoted in a message.

``from_driver_error`` maps the ORA- codes LogMiner sessions fail with to these errors
(Oracle Database Error Messages reference; "LogMiner" chapter of Oracle Database Utilities).
"""

from __future__ import annotations

from collections.abc import Mapping

from cdc_core.errors import ReplcheckError, TerminalError, TransientError
from connectors.oracle.source_config import BUILD_IN_REDO

PRIVILEGE_FIX = (
    "as a DBA run: GRANT CREATE SESSION, LOGMINING, SELECT ANY TRANSACTION,"
    " FLASHBACK ANY TABLE TO <user>; GRANT EXECUTE ON DBMS_LOGMNR TO <user>;"
    " GRANT SELECT ON V_$DATABASE, V_$LOG, V_$LOGFILE, V_$ARCHIVED_LOG, V_$STANDBY_LOG,"
    " V_$LOGMNR_CONTENTS, V_$LOGMNR_LOGS TO <user>"
)
"""The grants a LogMiner reader needs (Oracle Database Utilities, "LogMiner", "Requirements
for Using LogMiner": LOGMINING since 12c, EXECUTE on DBMS_LOGMNR, SELECT on the V$ views)."""


class OracleLogError(TerminalError):
    """Root of the Oracle connector's terminal errors."""


class NotArchiveLogError(OracleLogError):
    """The database runs in NOARCHIVELOG mode: redo is overwritten before it can be mined."""

    def __init__(self, log_mode: str) -> None:
        super().__init__(
            f"the Oracle database is in {log_mode} mode, so redo logs are overwritten before"
            " replcheck can mine them; as SYSDBA run: SHUTDOWN IMMEDIATE; STARTUP MOUNT;"
            " ALTER DATABASE ARCHIVELOG; ALTER DATABASE OPEN;",
            {"log_mode": log_mode},
        )


class SupplementalLoggingError(OracleLogError):
    """Minimal supplemental logging is off: LogMiner cannot rebuild row changes reliably."""

    def __init__(self) -> None:
        super().__init__(
            "minimal supplemental logging is off, so LogMiner cannot reconstruct chained and"
            " migrated rows; run: ALTER DATABASE ADD SUPPLEMENTAL LOG DATA; (optionally also"
            " ALTER TABLE <owner>.<table> ADD SUPPLEMENTAL LOG DATA (PRIMARY KEY) COLUMNS;)",
            {"supplemental_log_data_min": "NO"},
        )


class LogMinerPrivilegeError(OracleLogError):
    """The user lacks a privilege a LogMiner session needs."""

    def __init__(self, action: str, detail: str) -> None:
        super().__init__(
            f"cannot {action}: {detail}; {PRIVILEGE_FIX}", {"action": action, "detail": detail}
        )


class DictionaryMismatchError(OracleLogError):
    """A captured table's definition changed (DDL): its redo no longer matches the dictionary."""

    def __init__(self, table: str, scn: int, what: str) -> None:
        super().__init__(
            f"table {table} changed its definition at SCN {scn} ({what}); the dictionary"
            " LogMiner mines with (the online catalog, or a flat file) describes it as it was"
            " when that dictionary was taken, not as this redo wrote it. Re-snapshot the table"
            f" (initial load AS OF SCN at or after {scn}) and restart capture from that"
            " snapshot's SCN, or mine with the dictionary in the redo logs, which LogMiner"
            " follows across DDL: set dictionary=redo_logs in the source URL and, on the"
            f" primary, run {BUILD_IN_REDO}",
            {"table": table, "scn": scn},
        )


class MissingLogError(OracleLogError):
    """The redo needed for an SCN is neither online nor archived any more."""

    def __init__(
        self, scn: int, detail: str, thread: int | None = None, sequence: int | None = None
    ) -> None:
        restore = f"RESTORE ARCHIVELOG FROM SCN {scn};"
        if thread is not None and sequence is not None:
            restore = f"RESTORE ARCHIVELOG SEQUENCE {sequence} THREAD {thread};"
        located = {"thread": thread, "sequence": sequence} if thread is not None else {}
        super().__init__(
            f"the redo log covering SCN {scn} is gone ({detail}); restore it (RMAN: {restore})"
            " or re-snapshot the captured tables and restart capture at the snapshot's SCN;"
            " keep archived logs longer than the longest capture outage",
            {"scn": scn, "detail": detail, **located},
        )


class LogReusedError(OracleLogError):
    """An online log was archived and overwritten while LogMiner read it (ORA-00310,
    ORA-00334): the reader mines the window again from the archived copy."""


class MiningModeError(OracleLogError):
    """The database's role does not match the source's ``mining`` setting."""


class RacError(OracleLogError):
    """A RAC database the source is not set up to mine without loss (``rac``)."""


class DictionaryUnavailableError(OracleLogError):
    """The LogMiner dictionary the source names cannot be read."""


class ArchiveDestinationError(OracleLogError):
    """An archive destination named in ``archive_dest`` is not a valid one."""


class UnsupportedTableError(OracleLogError):
    """A captured table whose redo LogMiner cannot give replcheck (index-organized)."""


class FlashbackTooOldError(OracleLogError):
    """A flashback query asked for an SCN the undo no longer reaches (or one from before the
    table's definition changed)."""

    def __init__(self, code: int, action: str, scn: int | None) -> None:
        super().__init__(
            f"cannot {action}: ORA-{code:05d} (the database no longer holds the table as of"
            f" SCN {scn}); keep undo longer than replcheck lags behind (ALTER SYSTEM SET"
            " UNDO_RETENTION = <seconds>; ALTER TABLESPACE <undo tablespace> RETENTION"
            " GUARANTEE;) or give the table a flashback archive (ALTER TABLE <table>"
            " FLASHBACK ARCHIVE), then re-snapshot the table",
            {"code": f"ORA-{code:05d}", "scn": scn},
        )


class UnsupportedRedoError(OracleLogError):
    """A redo record of a captured table that replcheck cannot turn into a row change."""


class RedoParseError(OracleLogError):
    """SQL_REDO/SQL_UNDO text that is not the statement shape LogMiner generates."""


# ORA- codes (Oracle Database Error Messages): privileges, then missing or unreadable logs.
_PRIVILEGE_CODES = frozenset({1031, 942, 6550})  # no privilege; view unseen; PLS-00201
_MISSING_LOG_CODES = frozenset({308, 1284, 1289, 1291, 1292, 1371})
# ORA-00310 "archived log contains sequence %s; sequence %s required" and ORA-00334
# "archived log: %s": the file of an online log being read now holds a later sequence.
_REUSED_LOG_CODES = frozenset({310, 334})
# Flashback reads past the undo: snapshot too old, SCN too old or invalid, table redefined.
_FLASHBACK_CODES = frozenset({1555, 8180, 8181, 1466})


def from_driver_error(
    code: int, message: str, action: str, context: Mapping[str, object] | None = None
) -> ReplcheckError:
    """The replcheck error for an ORA- error raised while doing ``action``.

    Args:
        code: The ORA- number (``oracledb``'s ``error.code``).
        message: The driver's message (never holds row values for these statements).
        action: What replcheck was doing, for the message ("start LogMiner").
        context: Structured facts to attach (SCN, log file).
    """
    facts = dict(context or {})
    scn = facts.get("scn")
    if code in _FLASHBACK_CODES:
        error: ReplcheckError = FlashbackTooOldError(
            code, action, scn if isinstance(scn, int) else None
        )
    elif code in _PRIVILEGE_CODES:
        error = LogMinerPrivilegeError(action, f"ORA-{code:05d}: {message}")
    elif code in _REUSED_LOG_CODES:
        error = LogReusedError(f"an online redo log was overwritten while read: ORA-{code:05d}")
    elif code in _MISSING_LOG_CODES:
        error = MissingLogError(
            scn if isinstance(scn, int) else -1, f"ORA-{code:05d} while trying to {action}"
        )
    else:
        error = TransientError(f"Oracle failed to {action}: ORA-{code:05d}: {message}")
    error.context.update(facts)
    return error
