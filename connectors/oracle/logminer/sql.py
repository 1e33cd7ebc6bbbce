"""The SQL and PL/SQL the LogMiner reader sends, as constants and pure functions.

Sources: Oracle Database Reference (V$DATABASE, V$LOG, V$LOGFILE, V$ARCHIVED_LOG,
V$ARCHIVE_DEST_STATUS, V$STANDBY_LOG, V$LOGMNR_CONTENTS), Oracle Database PL/SQL Packages
and Types Reference ("DBMS_LOGMNR"), and Oracle Database Utilities ("Using LogMiner to
Analyze Redo Log Files"). Everything variable is a bind; identifiers are never spliced in
except the flush table's name, which is quoted.
"""

from __future__ import annotations

from collections.abc import Sequence

from connectors.oracle.logminer.contents import (
    COMMIT,
    CONTENTS_COLUMNS,
    DDL,
    DELETE,
    INSERT,
    LOB_OPERATIONS,
    MISSING_SCN,
    ROLLBACK,
    START,
    UNSUPPORTED,
    UPDATE,
)
from connectors.oracle.sql import quote

DATABASE_STATE = (
    "SELECT LOG_MODE, SUPPLEMENTAL_LOG_DATA_MIN, DATABASE_ROLE, OPEN_MODE FROM V$DATABASE"
)
"""ARCHIVELOG mode, minimal supplemental logging (both required), and the role and open mode
the ``mining`` setting is checked against (``PRIMARY``; ``PHYSICAL STANDBY`` open ``READ ONLY
WITH APPLY`` for Active Data Guard)."""

CURRENT_SCN = "SELECT CURRENT_SCN FROM V$DATABASE"
"""On a primary the SCN now; on a physical standby the SCN redo apply has reached (Oracle
Database Reference, V$DATABASE.CURRENT_SCN), so a standby's windows never pass what its
received redo holds."""
SERVER_OFFSET = "SELECT TO_CHAR(SYSTIMESTAMP, 'TZH:TZM') FROM DUAL"
"""The offset of the server's clock, which V$LOGMNR_CONTENTS.TIMESTAMP (a DATE) is in."""

SESSION_SETUP = (
    "ALTER SESSION SET NLS_DATE_FORMAT = 'YYYY-MM-DD HH24:MI:SS'"
    " NLS_TIMESTAMP_FORMAT = 'YYYY-MM-DD HH24:MI:SS.FF'"
    " NLS_TIMESTAMP_TZ_FORMAT = 'YYYY-MM-DD HH24:MI:SS.FF TZH:TZM'"
    " NLS_NUMERIC_CHARACTERS = '.,' TIME_ZONE = '+00:00'"
)
"""LogMiner renders values in the mining session's NLS formats; ``redo_values`` reads these
(TIME_ZONE: WITH LOCAL TIME ZONE values then render in UTC)."""

_LOCAL_DESTINATIONS = (
    "SELECT DEST_ID FROM V$ARCHIVE_DEST_STATUS WHERE STATUS = 'VALID' AND TYPE = 'LOCAL'"
)
VALID_DESTINATIONS = "SELECT DEST_ID FROM V$ARCHIVE_DEST_STATUS WHERE STATUS = 'VALID'"
"""The archive destinations in use, against which ``archive_dest`` is checked at start."""

_READABLE_ARCHIVES = (
    " WHERE NAME IS NOT NULL AND ARCHIVED = 'YES' AND STATUS = 'A' AND DELETED = 'NO'"
    " AND STANDBY_DEST = 'NO' AND RESETLOGS_CHANGE# = (SELECT RESETLOGS_CHANGE# FROM V$DATABASE)"
)


OPEN_THREADS = "SELECT THREAD# FROM V$THREAD WHERE ENABLED <> 'DISABLED' ORDER BY THREAD#"
"""The redo threads in use: more than one is a RAC database (one thread per instance)."""

ARCHIVE_LAG_TARGET = "SELECT VALUE FROM V$PARAMETER WHERE NAME = 'archive_lag_target'"
"""Seconds after which every instance switches (and archives) its log, idle or not (0: never
forced): what bounds how long an idle RAC thread holds the archived-only window back."""

ARCHIVED_UPTO = (
    "SELECT THREAD#, MAX(NEXT_CHANGE#) FROM V$ARCHIVED_LOG"
    f"{_READABLE_ARCHIVES} AND DEST_ID IN ({_LOCAL_DESTINATIONS}) GROUP BY THREAD#"
)
"""Per thread, the SCN its archived logs reach (``rac=archived_logs``): every change of the
thread below it is in an archived log."""


def archived_logs_query(destinations: int = 0) -> str:
    """Archived logs overlapping the window [low_scn, high_scn] of the current incarnation,
    from the local valid destinations (a standby destination lists the same sequences again)
    or, with ``destinations`` > 0, from those bound as ``:dest1`` ... (``archive_dest``)."""
    chosen = _LOCAL_DESTINATIONS
    if destinations:
        chosen = ", ".join(f":dest{index}" for index in range(1, destinations + 1))
    return (
        "SELECT NAME, THREAD#, SEQUENCE#, FIRST_CHANGE#, NEXT_CHANGE# FROM V$ARCHIVED_LOG"
        f"{_READABLE_ARCHIVES} AND NEXT_CHANGE# > :low_scn AND FIRST_CHANGE# <= :high_scn"
        f" AND DEST_ID IN ({chosen}) ORDER BY THREAD#, SEQUENCE#"
    )


ARCHIVED_LOGS = archived_logs_query()

DICTIONARY_BUILD = (
    "SELECT MAX(B.FIRST_CHANGE#) FROM V$ARCHIVED_LOG B"
    f"{_READABLE_ARCHIVES} AND B.DICTIONARY_BEGIN = 'YES'"
    " AND EXISTS (SELECT 1 FROM V$ARCHIVED_LOG E WHERE E.DICTIONARY_END = 'YES'"
    " AND E.THREAD# = B.THREAD# AND E.SEQUENCE# >= B.SEQUENCE# AND E.NEXT_CHANGE# <= :low_scn)"
)
"""The first SCN of the latest dictionary extracted into the redo (``dictionary=redo_logs``)
whose last log ends before the window starting at ``low_scn``: LogMiner reads the dictionary
from the logs added to the session, so they are listed from there on (Oracle Database
Utilities, "Extracting the LogMiner Dictionary to the Redo Log Files")."""

_ONLINE_TEMPLATE = (
    "SELECT MIN(F.MEMBER), L.THREAD#, L.SEQUENCE#, L.FIRST_CHANGE#, L.NEXT_CHANGE#"
    " FROM {view} L JOIN V$LOGFILE F ON F.GROUP# = L.GROUP#"
    " WHERE L.STATUS IN ({statuses})"
    " AND (F.STATUS IS NULL OR F.STATUS NOT IN ('INVALID', 'DELETED'))"
    " AND L.NEXT_CHANGE# > :low_scn AND L.FIRST_CHANGE# <= :high_scn"
    " GROUP BY L.THREAD#, L.SEQUENCE#, L.FIRST_CHANGE#, L.NEXT_CHANGE#"
    " ORDER BY L.THREAD#, L.SEQUENCE#"
)
ONLINE_LOGS = _ONLINE_TEMPLATE.format(view="V$LOG", statuses="'CURRENT', 'ACTIVE', 'INACTIVE'")
"""Online redo log groups overlapping the window, one valid member each (the CURRENT log's
NEXT_CHANGE# is the largest SCN, so it always overlaps an open-ended window)."""

STANDBY_LOGS = (
    "SELECT MIN(F.MEMBER), L.THREAD#, L.SEQUENCE#, L.FIRST_CHANGE#,"
    " NVL(L.NEXT_CHANGE#, L.LAST_CHANGE# + 1)"
    " FROM V$STANDBY_LOG L JOIN V$LOGFILE F ON F.GROUP# = L.GROUP#"
    " WHERE L.STATUS = 'ACTIVE' AND L.ARCHIVED = 'NO' AND F.TYPE = 'STANDBY'"
    " AND (F.STATUS IS NULL OR F.STATUS NOT IN ('INVALID', 'DELETED'))"
    " AND NVL(L.NEXT_CHANGE#, L.LAST_CHANGE# + 1) > :low_scn AND L.FIRST_CHANGE# <= :high_scn"
    " GROUP BY L.THREAD#, L.SEQUENCE#, L.FIRST_CHANGE#, L.NEXT_CHANGE#, L.LAST_CHANGE#"
    " ORDER BY L.THREAD#, L.SEQUENCE#"
)
"""On an Active Data Guard standby: the standby redo logs redo transport is writing and that
are not archived yet (an archived one is in V$ARCHIVED_LOG). The one being written has no
NEXT_CHANGE# yet; it holds redo up to LAST_CHANGE# (Oracle Database Reference,
V$STANDBY_LOG)."""

INDEX_ORGANIZED = (
    "SELECT OWNER, TABLE_NAME, IOT_TYPE FROM ALL_TABLES"
    " WHERE IOT_TYPE IS NOT NULL AND (OWNER, TABLE_NAME) IN ({pairs}) ORDER BY OWNER, TABLE_NAME"
)
"""Captured tables that are index-organized (ALL_TABLES.IOT_TYPE; format ``pairs`` with
``table_pairs``): LogMiner gives their rows no ROWID, which the reader locates rows by."""


def table_pairs(count: int) -> str:
    """``(:owner1, :table1), ...`` for ``count`` tables (binds: ``contents_binds``'s names)."""
    return ", ".join(f"(:owner{i}, :table{i})" for i in range(1, count + 1))


ADD_FIRST_LOGFILE = (
    "BEGIN DBMS_LOGMNR.ADD_LOGFILE(LOGFILENAME => :name, OPTIONS => DBMS_LOGMNR.NEW); END;"
)
"""``NEW`` ends the current LogMiner session and starts a new list of logs."""

ADD_LOGFILE = (
    "BEGIN DBMS_LOGMNR.ADD_LOGFILE(LOGFILENAME => :name, OPTIONS => DBMS_LOGMNR.ADDFILE); END;"
)

_START_OPTIONS = "DBMS_LOGMNR.NO_ROWID_IN_STMT"  # ROW_ID is its own column; keep SQL short
START_WITH_ONLINE_CATALOG = (
    "BEGIN DBMS_LOGMNR.START_LOGMNR(STARTSCN => :start_scn, ENDSCN => :end_scn,"
    f" OPTIONS => DBMS_LOGMNR.DICT_FROM_ONLINE_CATALOG + {_START_OPTIONS}); END;"
)
"""Mine [start_scn, end_scn] with the dictionary the database uses now. Not
COMMITTED_DATA_ONLY: the core buffers transactions; not CONTINUOUS_MINE: desupported in 19c."""

START_WITH_DICTIONARY_FILE = (
    "BEGIN DBMS_LOGMNR.START_LOGMNR(STARTSCN => :start_scn, ENDSCN => :end_scn,"
    f" DICTFILENAME => :dictionary_file, OPTIONS => {_START_OPTIONS}); END;"
)
"""Mine with a flat-file dictionary (built by DBMS_LOGMNR_D.BUILD ... STORE_IN_FLAT_FILE),
which still describes tables as they were before later DDL."""

START_WITH_REDO_DICTIONARY = (
    "BEGIN DBMS_LOGMNR.START_LOGMNR(STARTSCN => :start_scn, ENDSCN => :end_scn, OPTIONS =>"
    f" DBMS_LOGMNR.DICT_FROM_REDO_LOGS + DBMS_LOGMNR.DDL_DICT_TRACKING + {_START_OPTIONS}); END;"
)
"""Mine with the dictionary extracted into the added logs, kept current across the DDL
those logs hold (DDL_DICT_TRACKING), so redo renders as of its own time."""

END_LOGMNR = "BEGIN DBMS_LOGMNR.END_LOGMNR; END;"

_CONTROL_CODES = (START, COMMIT, MISSING_SCN, ROLLBACK)
_TABLE_CODES = (INSERT, DELETE, UPDATE, DDL, *sorted(LOB_OPERATIONS), UNSUPPORTED)


def contents_query(table_count: int) -> str:
    """The V$LOGMNR_CONTENTS query of one window: transaction control rows of every
    transaction, and the rows of the captured tables.

    Binds: ``low_scn``, ``high_scn`` (inclusive), then ``owner1``, ``table1``, ... for each
    captured table (see ``contents_binds``). Rows come back in redo (SCN) order.
    """
    if table_count < 1:
        raise ValueError("capture at least one table")
    pairs = table_pairs(table_count)
    return (
        f"SELECT {', '.join(CONTENTS_COLUMNS)} FROM V$LOGMNR_CONTENTS"
        " WHERE SCN >= :low_scn AND SCN <= :high_scn"
        f" AND (OPERATION_CODE IN ({_codes(_CONTROL_CODES)})"
        f" OR (OPERATION_CODE IN ({_codes(_TABLE_CODES)})"
        f" AND (SEG_OWNER, TABLE_NAME) IN ({pairs})))"
    )


def contents_binds(low: int, high: int, tables: Sequence[tuple[str, str]]) -> dict[str, object]:
    """The binds of ``contents_query`` for the window [low, high] and (owner, table) pairs."""
    binds: dict[str, object] = {"low_scn": low, "high_scn": high}
    for index, (owner, table) in enumerate(tables, start=1):
        binds[f"owner{index}"] = owner
        binds[f"table{index}"] = table
    return binds


def _codes(codes: Sequence[int]) -> str:
    return ", ".join(str(code) for code in codes)


FLUSH_TABLE_EXISTS = "SELECT COUNT(*) FROM USER_TABLES WHERE TABLE_NAME = :name"


def flush_statements(table: str) -> tuple[str, str, str]:
    """(create, seed, update) for the flush table: committing an update of it makes the log
    writer write every redo record generated so far, so a window that ends at the SCN read
    afterwards misses nothing still in the log buffer (the approach Debezium's Oracle
    connector documents as its log writer flush strategy)."""
    name = quote(table.upper())
    return (
        f"CREATE TABLE {name} (LAST_SCN NUMBER(19,0))",
        f"INSERT INTO {name} (LAST_SCN) VALUES (0)",
        f"UPDATE {name} SET LAST_SCN = :scn",
    )
