"""The SQL the LogMiner reader sends, checked against the documented views and procedures
(``data/documented_views.json``), and the pure decisions around it: which logs to add,
how far a window reaches."""

from __future__ import annotations

import json
import re

import pytest

from connectors.oracle.errors import MissingLogError
from connectors.oracle.log_reader import LogFile, next_window, plan_logs
from connectors.oracle.logminer import sql as lm
from connectors.oracle.logminer.contents import CONTENTS_COLUMNS
from tests.connectors.oracle.harness import DATA

VIEWS: dict[str, list[str]] = json.loads((DATA / "documented_views.json").read_text("utf-8"))
KEYWORDS = {
    "SELECT", "FROM", "WHERE", "AND", "OR", "IN", "IS", "NOT", "NULL", "JOIN", "ON", "ORDER",
    "BY", "GROUP", "MIN", "MAX", "COUNT", "NVL", "EXISTS", "TO_CHAR", "SYSTIMESTAMP", "DUAL",
    "BEGIN", "END",
}  # fmt: skip
QUERIES = {
    "DATABASE_STATE": lm.DATABASE_STATE,
    "CURRENT_SCN": lm.CURRENT_SCN,
    "ARCHIVED_LOGS": lm.ARCHIVED_LOGS,
    "ONLINE_LOGS": lm.ONLINE_LOGS,
    "STANDBY_LOGS": lm.STANDBY_LOGS,
    "FLUSH_TABLE_EXISTS": lm.FLUSH_TABLE_EXISTS,
    "contents_query": lm.contents_query(2),
    "archived_logs_query": lm.archived_logs_query(2),
    "DICTIONARY_BUILD": lm.DICTIONARY_BUILD,
    "VALID_DESTINATIONS": lm.VALID_DESTINATIONS,
    "INDEX_ORGANIZED": lm.INDEX_ORGANIZED.format(pairs=lm.table_pairs(2)),
}


def referenced_columns(query: str) -> tuple[set[str], dict[str, set[str]]]:
    """Views a query reads and the identifiers it uses per alias ('' for unqualified)."""
    text = re.sub(r"'[^']*'", "", query)  # literals
    text = re.sub(r":\w+", "", text)  # binds
    views = set(re.findall(r"\b(V\$\w+|USER_TABLES|ALL_TABLES)\b", text))
    aliases = {alias: view for view, alias in re.findall(r"\b(V\$\w+)\s+([A-Z])\b", text)}
    used: dict[str, set[str]] = {}
    for alias, name in re.findall(r"\b(?:([A-Z])\.)?([A-Z_][A-Z0-9_#$]*)(?![A-Z0-9_#$])", text):
        if name not in KEYWORDS and name not in views and name not in aliases:
            used.setdefault(alias and aliases[alias], set()).add(name)
    return views, used


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_queries_use_only_documented_columns(name: str) -> None:
    views, used = referenced_columns(QUERIES[name])
    assert views, "every query reads a documented view"
    documented = {view: set(VIEWS[view]) for view in views}
    for view, columns in used.items():
        allowed = documented[view] if view else set().union(*documented.values())
        assert columns <= allowed, f"{name}: {sorted(columns - allowed)} not in {view or views}"


def test_the_contents_query_reads_the_transaction_columns_and_captured_tables() -> None:
    query = lm.contents_query(2)
    assert query.startswith(f"SELECT {', '.join(CONTENTS_COLUMNS)} FROM V$LOGMNR_CONTENTS")
    # START, COMMIT, MISSING_SCN, ROLLBACK of every transaction; DML, DDL, LOB and
    # unsupported rows (op codes of V$LOGMNR_CONTENTS.OPERATION_CODE) of captured tables only.
    assert "OPERATION_CODE IN (6, 7, 34, 36)" in query
    assert "OPERATION_CODE IN (1, 2, 3, 5, 9, 10, 11, 29, 255)" in query
    assert "(SEG_OWNER, TABLE_NAME) IN ((:owner1, :table1), (:owner2, :table2))" in query
    assert "SCN >= :low_scn AND SCN <= :high_scn" in query
    binds = lm.contents_binds(10, 20, [("SHOP", "ORDERS"), ("SHOP", "EVENTS")])
    assert binds == {"low_scn": 10, "high_scn": 20, "owner1": "SHOP", "table1": "ORDERS",
                     "owner2": "SHOP", "table2": "EVENTS"}  # fmt: skip
    assert set(re.findall(r":(\w+)", query)) == set(binds)
    with pytest.raises(ValueError, match="at least one table"):
        lm.contents_query(0)


def test_session_start_uses_documented_procedure_arguments_and_constants() -> None:
    for statement, procedure in (
        (lm.ADD_FIRST_LOGFILE, "ADD_LOGFILE"),
        (lm.ADD_LOGFILE, "ADD_LOGFILE"),
        (lm.START_WITH_ONLINE_CATALOG, "START_LOGMNR"),
        (lm.START_WITH_DICTIONARY_FILE, "START_LOGMNR"),
        (lm.START_WITH_REDO_DICTIONARY, "START_LOGMNR"),
    ):
        arguments = set(re.findall(r"(\w+) =>", statement))
        assert arguments <= set(VIEWS[f"DBMS_LOGMNR.{procedure}"]), statement
        constants = set(re.findall(r"DBMS_LOGMNR\.(\w+)\b(?!\()", statement))
        assert constants <= set(VIEWS["DBMS_LOGMNR constants"]), statement
    assert "OPTIONS => DBMS_LOGMNR.NEW" in lm.ADD_FIRST_LOGFILE
    assert "OPTIONS => DBMS_LOGMNR.ADDFILE" in lm.ADD_LOGFILE
    assert "DICT_FROM_ONLINE_CATALOG" in lm.START_WITH_ONLINE_CATALOG
    assert "DICTFILENAME => :dictionary_file" in lm.START_WITH_DICTIONARY_FILE
    assert "DICT_FROM_REDO_LOGS + DBMS_LOGMNR.DDL_DICT_TRACKING" in lm.START_WITH_REDO_DICTIONARY
    starts = (lm.START_WITH_ONLINE_CATALOG, lm.START_WITH_DICTIONARY_FILE)
    for start in (*starts, lm.START_WITH_REDO_DICTIONARY):
        assert "STARTSCN => :start_scn, ENDSCN => :end_scn" in start
        assert "COMMITTED_DATA_ONLY" not in start and "CONTINUOUS_MINE" not in start


def test_log_selection_prefers_archived_copies_and_local_destinations() -> None:
    assert "STATUS = 'A' AND DELETED = 'NO' AND STANDBY_DEST = 'NO'" in lm.ARCHIVED_LOGS
    assert "TYPE = 'LOCAL'" in lm.ARCHIVED_LOGS
    assert "NEXT_CHANGE# > :low_scn AND FIRST_CHANGE# <= :high_scn" in lm.ARCHIVED_LOGS
    assert "FROM V$LOG L JOIN V$LOGFILE F" in lm.ONLINE_LOGS
    assert "FROM V$STANDBY_LOG L JOIN V$LOGFILE F" in lm.STANDBY_LOGS
    archived = [("/arch/1_10.arc", 1, 10, 100, 200), ("/arch/1_11.arc", 1, 11, 200, 300)]
    online = [("/redo/g2.log", 1, 11, 200, 300), ("/redo/g3.log", 1, 12, 300, 2**64 - 1)]
    assert plan_logs(archived, online, 150) == [
        LogFile("/arch/1_10.arc", 1, 10, 100, 200),
        LogFile("/arch/1_11.arc", 1, 11, 200, 300),
        LogFile("/redo/g3.log", 1, 12, 300, 2**64 - 1),
    ]


def test_a_purged_log_is_an_error_naming_the_scn_and_the_fix() -> None:
    online = [("/redo/g3.log", 1, 12, 300, 2**64 - 1)]
    with pytest.raises(MissingLogError) as caught:
        plan_logs([], online, 150)
    message = str(caught.value)
    assert "SCN 150" in message and "RESTORE ARCHIVELOG SEQUENCE 11 THREAD 1" in message
    assert caught.value.context | {"thread": 1, "sequence": 11} == caught.value.context
    assert "re-snapshot" in message
    with pytest.raises(MissingLogError, match="sequence 11 is neither online nor archived"):
        plan_logs([("/arch/1_10.arc", 1, 10, 100, 200)], online, 150)
    with pytest.raises(MissingLogError, match="no online or archived log"):
        plan_logs([], [], 150)


def test_windows_advance_in_bounded_steps_up_to_the_current_scn() -> None:
    assert next_window(100, 99, 50) is None  # nothing new yet
    assert next_window(100, 100, 50) == 100
    assert next_window(100, 1000, 50) == 149
    assert next_window(150, 160, 50) == 160


def test_the_session_reads_values_in_the_formats_the_parser_expects() -> None:
    from connectors.oracle.logminer import redo_values

    assert f"NLS_DATE_FORMAT = '{redo_values.DATE_FORMAT}'" in lm.SESSION_SETUP
    assert f"NLS_TIMESTAMP_FORMAT = '{redo_values.TIMESTAMP_FORMAT}'" in lm.SESSION_SETUP
    assert f"NLS_TIMESTAMP_TZ_FORMAT = '{redo_values.TIMESTAMP_TZ_FORMAT}'" in lm.SESSION_SETUP
    assert "TIME_ZONE = '+00:00'" in lm.SESSION_SETUP
    create, seed, update = lm.flush_statements("flush")
    assert seed == 'INSERT INTO "FLUSH" (LAST_SCN) VALUES (0)'
    assert create == 'CREATE TABLE "FLUSH" (LAST_SCN NUMBER(19,0))'
    assert update == 'UPDATE "FLUSH" SET LAST_SCN = :scn'
