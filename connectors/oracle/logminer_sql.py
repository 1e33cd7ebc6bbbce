"""The SQL and PL/SQL the LogMiner reader sends, as constants and pure functions.

Sources: Oracle Database Reference (V$DATABASE, V$LOG, V$LOGFILE, V$ARCHIVED_LOG,
V$ARCHIVE_DEST_STATUS, V$STANDBY_LOG, V$LOGMNR_CONTENTS), Oracle Database PL/SQL Packages
and Types Reference ("DBMS_LOGMNR"), and Oracle Database Utilities ("Using LogMiner to
Analyze Redo Log Files"). Everything variable is a bind; identifiers are never spliced in
except the flush table's name, which is quoted.
"""

from __future__ import annotations

from collections.abc import Sequence

from connectors.oracle.contents import (
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
    "SELECT LOG_MODE, SUPPLEMENTAL_LOG_DATA_MIN, CURRENT_SCN, RESETLOGS_CHANGE# FROM V$DATABASE"
)
"""ARCHIVELOG mode, minimal supplemental logging (both required) and the current SCN."""

CURRENT_SCN = "SELECT CURRENT_SCN FROM V$DATABASE"
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

ARCHIVED_LOGS = (
    "SELECT NAME, THREAD#, SEQUENCE#, FIRST_CHANGE#, NEXT_CHANGE# FROM V$ARCHIVED_LOG"
    " WHERE NAME IS NOT NULL AND ARCHIVED = 'YES' AND STATUS = 'A' AND DELETED = 'NO'"
    " AND STANDBY_DEST = 'NO' AND NEXT_CHANGE# > :low_scn AND FIRST_CHANGE# <= :high_scn"
    " AND RESETLOGS_CHANGE# = (SELECT RESETLOGS_CHANGE# FROM V$DATABASE)"
    f" AND DEST_ID IN ({_LOCAL_DESTINATIONS})"
    " ORDER BY THREAD#, SEQUENCE#"
)
"""Archived logs overlapping the window [low_scn, high_scn], local destinations only (a
standby destination lists the same sequences again), of the current incarnation."""

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

STANDBY_LOGS = _ONLINE_TEMPLATE.format(view="V$STANDBY_LOG", statuses="'ACTIVE'")
"""On an Active Data Guard standby: the standby redo logs being written by redo transport."""

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
    pairs = ", ".join(f"(:owner{i}, :table{i})" for i in range(1, table_count + 1))
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
