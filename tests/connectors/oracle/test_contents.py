"""V$LOGMNR_CONTENTS rows the shop recording does not show: truncates, dictionary mismatches,
missing logs, LOB operations, broken continuations, and the errors' wording."""

from __future__ import annotations

import datetime as dt

import pytest

from cdc_core.capture.events import Begin, Commit, RawChange, RowChange
from cdc_core.capture.source import TableChanged
from connectors.oracle.errors import (
    DictionaryMismatchError,
    LogMinerPrivilegeError,
    MissingLogError,
    NotArchiveLogError,
    RedoParseError,
    SupplementalLoggingError,
    UnsupportedRedoError,
    from_driver_error,
)
from connectors.oracle.log_reader import LogMinerConfig
from connectors.oracle.logminer.contents import ChangeAssembler, ContentsRow
from tests.connectors.oracle.harness import DATA
from tests.connectors.oracle.replay import load_tables

SECRET = "s3cret-row-value"
STAMP = dt.datetime(2026, 1, 15, 12, 0, 0)  # winter: Europe/Berlin is +01:00
XID = "0A001F00E7030000"


def assembler() -> ChangeAssembler:
    from zoneinfo import ZoneInfo

    return ChangeAssembler(load_tables(DATA / "shop_tables.json"), ZoneInfo("Europe/Berlin"))


def row(scn: int, code: int, sql: str | None = None, **fields: object) -> ContentsRow:
    table = {"seg_owner": "SHOP", "table_name": "ORDERS", "row_id": "AAAR3sAAEAAAACXAAA"}
    return ContentsRow(scn, STAMP, XID, code, sql_redo=sql, **(table | fields))  # type: ignore[arg-type]


def feed(rows: list[ContentsRow]) -> list[RawChange | TableChanged]:
    target = assembler()
    return [change for item in rows for change in target.feed(item)] + target.flush()


def test_truncate_is_a_t_change_and_other_ddl_is_ignored() -> None:
    changes = feed([
        row(10, 6), row(11, 5, 'truncate table "SHOP"."ORDERS"'), row(12, 7),
        row(13, 5, 'create index "SHOP"."IX" on "SHOP"."ORDERS"("CUSTOMER")'),
        row(14, 5, 'alter table "SHOP"."ORDERS" add constraint "CK" check ("ID" > 0)'),
    ])  # fmt: skip
    assert [type(c).__name__ for c in changes] == ["Begin", "RowChange", "Commit"]
    truncate = changes[1]
    assert isinstance(truncate, RowChange) and truncate.op == "t" and truncate.locator is None
    commit = changes[2]
    assert isinstance(commit, Commit)
    assert commit.commit_ts == dt.datetime(2026, 1, 15, 11, 0, tzinfo=dt.UTC)


def test_status_2_rows_explain_themselves() -> None:
    mismatch = row(30, 1, "Dictionary Version Mismatch", status=2, info="Dictionary Mismatch")
    with pytest.raises(DictionaryMismatchError, match="SCN 30"):
        feed([mismatch])
    other = row(31, 3, "Unsupported", status=2, info="Object is not supported")
    with pytest.raises(UnsupportedRedoError, match="INFO: Object is not supported"):
        feed([other])


def test_missing_scn_and_lob_operations_and_iot_rows_are_errors() -> None:
    with pytest.raises(MissingLogError, match="SCN 40"):
        feed([row(40, 34)])
    with pytest.raises(UnsupportedRedoError, match="LOB_WRITE at SCN 41"):
        feed([row(41, 10, "DECLARE ... dbms_lob.write(...)", operation="LOB_WRITE")])
    with pytest.raises(UnsupportedRedoError, match="without ROWID"):
        feed([row(42, 2, 'delete from "SHOP"."ORDERS";', row_id="AAAAAAAAAAAAAAAAAA")])


def test_a_broken_csf_continuation_is_an_error() -> None:
    first = row(50, 1, "insert into ", csf=1, rs_id=" 0x1 ", ssn=0)
    other = row(51, 1, "insert into ", rs_id=" 0x2 ", ssn=0)
    with pytest.raises(UnsupportedRedoError, match="CSF continuation of SCN 50"):
        feed([first, other])


def test_a_delete_followed_by_an_unrelated_insert_stays_two_changes() -> None:
    delete = row(60, 2, 'delete from "SHOP"."ORDERS" where "ID" = \'1\';', rs_id=" 0x1 ")
    insert = row(
        60, 1,
        'insert into "SHOP"."ORDERS"("ID") values (\'1\');',
        rs_id=" 0x2 ", row_id="AAAR3sAAEAAAACXAAB",
    )  # fmt: skip
    changes = feed([delete, insert])
    assert [(c.op, c.locator, c.new_locator) for c in changes if isinstance(c, RowChange)] == [
        ("d", "AAAR3sAAEAAAACXAAA", None),
        ("c", "AAAR3sAAEAAAACXAAB", None),
    ]


def test_rows_of_other_tables_and_internal_rows_give_nothing() -> None:
    changes = feed([row(70, 6), row(71, 1, "junk", table_name="OTHER"), row(72, 0)])
    assert changes == [Begin(XID, changes[0].position)]


def test_parse_errors_never_show_row_values() -> None:
    bad = row(80, 1, f'insert into "SHOP"."ORDERS"("ID","AMOUNT") values (\'1\',\'{SECRET}\');')
    with pytest.raises(RedoParseError) as caught:
        feed([bad])
    assert SECRET not in str(caught.value)
    assert "AMOUNT" in str(caught.value) and "SCN 80" in str(caught.value)
    cut = row(81, 1, f'insert into "SHOP"."ORDERS"("ID") values (\'{SECRET}')
    with pytest.raises(RedoParseError) as caught:
        feed([cut])
    assert SECRET not in str(caught.value)


def test_setup_errors_say_what_to_run() -> None:
    assert "ALTER DATABASE ARCHIVELOG" in str(NotArchiveLogError("NOARCHIVELOG"))
    assert "ALTER DATABASE ADD SUPPLEMENTAL LOG DATA" in str(SupplementalLoggingError())
    denied = from_driver_error(1031, "insufficient privileges", "start LogMiner", {"scn": 7})
    assert isinstance(denied, LogMinerPrivilegeError)
    assert "GRANT" in str(denied) and "LOGMINING" in str(denied) and "DBMS_LOGMNR" in str(denied)
    missing = from_driver_error(1291, "missing logfile", "start LogMiner", {"scn": 7})
    assert isinstance(missing, MissingLogError) and "SCN 7" in str(missing)
    other = from_driver_error(3113, "end-of-file on communication channel", "query", None)
    assert type(other).__name__ == "TransientError"


def test_config_is_checked() -> None:
    from cdc_core.errors import ConfigError

    with pytest.raises(ConfigError, match="window_scns"):
        LogMinerConfig(window_scns=0)
