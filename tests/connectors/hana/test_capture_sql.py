"""The SQL of HANA trigger capture, checked for its structure without a server: the
catalog-guarded anonymous blocks, the logging table's column declarations for every type
the connector maps, the three row triggers and their row images, odd identifiers, a
composite key, and the reads (SAP HANA SQL Reference: CREATE TRIGGER, CREATE SEQUENCE,
LOCK TABLE; SQLScript Reference: anonymous blocks, EXEC)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from cdc_core.errors import ConfigError
from connectors.hana import sql
from connectors.hana import trigger_sql as tsql
from connectors.hana.connector import HanaConnector
from connectors.hana.trigger_dialect import HanaTriggerDialect
from connectors.registry import capture_dialect_for, captures_by_trigger, connector_for
from tests.connectors.hana.recorded_session import RecordedHanaConnector, Recording

URL = "hana+hdbcli://repl@hana.example:30015/?currentSchema=SHOP"
SCHEMA, TABLE = "Shop Data", 'Bob\'s "Lines"'  # a blank, a single and a double quote
LOG = f"LOG_{SCHEMA}.{TABLE}"
# (name, DATA_TYPE_NAME, LENGTH, SCALE, IS_NULLABLE) -> the declaration its copy needs
COLUMNS: list[tuple[tuple[Any, ...], str]] = [
    (("ORDER_ID", "BIGINT", 19, 0, "FALSE"), "BIGINT"),
    (("line no", "INTEGER", 10, 0, "FALSE"), "INTEGER"),
    (("T", "TINYINT", 3, 0, "TRUE"), "TINYINT"),
    (("S", "SMALLINT", 5, 0, "TRUE"), "SMALLINT"),
    (("AMOUNT", "DECIMAL", 12, 2, "TRUE"), "DECIMAL(12,2)"),
    (("FLOATING", "DECIMAL", 34, None, "TRUE"), "DECIMAL"),
    (("SD", "SMALLDECIMAL", 16, None, "TRUE"), "SMALLDECIMAL"),
    (("R", "REAL", 24, None, "TRUE"), "REAL"),
    (("D", "DOUBLE", 53, None, "TRUE"), "DOUBLE"),
    (("F", "FLOAT", 20, None, "TRUE"), "FLOAT(20)"),
    (("V", "VARCHAR", 30, None, "TRUE"), "VARCHAR(30)"),
    (("NOTE", "NVARCHAR", 40, None, "TRUE"), "NVARCHAR(40)"),
    (("A", "ALPHANUM", 10, None, "TRUE"), "ALPHANUM(10)"),
    (("ST", "SHORTTEXT", 50, None, "TRUE"), "NVARCHAR(50)"),
    (("C", "CHAR", 5, None, "TRUE"), "CHAR(5)"),
    (("NC", "NCHAR", 3, None, "TRUE"), "NCHAR(3)"),
    (("CL", "CLOB", None, None, "TRUE"), "CLOB"),
    (("NCL", "NCLOB", None, None, "TRUE"), "NCLOB"),
    (("TX", "TEXT", None, None, "TRUE"), "NCLOB"),
    (("VB", "VARBINARY", 16, None, "TRUE"), "VARBINARY(16)"),
    (("B", "BINARY", 8, None, "TRUE"), "BINARY(8)"),
    (("BL", "BLOB", None, None, "TRUE"), "BLOB"),
    (("OK", "BOOLEAN", 1, None, "TRUE"), "BOOLEAN"),
    (("BORN", "DATE", 10, None, "TRUE"), "DATE"),
    (("AT_TIME", "TIME", 8, None, "TRUE"), "TIME"),
    (("SEEN", "SECONDDATE", 19, None, "TRUE"), "SECONDDATE"),
    (("PLACED", "TIMESTAMP", 27, 7, "TRUE"), "TIMESTAMP"),
]
KEY = ("ORDER_ID", "line no")


def _catalog(*, log_columns: list[str] | None = None, **extra: Any) -> list[dict[str, Any]]:
    rows = [list(row) for row, _ in COLUMNS]
    exchanges = [
        {"sql": sql.COLUMNS, "params": [SCHEMA, TABLE], "rows": rows},
        {"sql": sql.PRIMARY_KEY, "params": [SCHEMA, TABLE], "rows": [[k] for k in KEY]},
        {
            "sql": sql.COLUMNS,
            "params": [tsql.SCHEMA, LOG],
            "rows": [[name, "X", None, None, "TRUE"] for name in log_columns or []],
        },
    ]
    return exchanges + list(extra.get("more", []))


def _dialect(exchanges: list[dict[str, Any]]) -> tuple[HanaTriggerDialect, Recording]:
    recording = Recording(Path("catalog.json"), exchanges)
    table = f'"{SCHEMA}"."{TABLE.replace(chr(34), chr(34) * 2)}"'
    return HanaTriggerDialect(RecordedHanaConnector(URL, recording), [table]), recording


def _executed(block: str) -> list[str]:
    """The statements an anonymous block runs with EXEC, as HANA reads the literals."""
    return [m.replace("''", "'") for m in re.findall(r"EXEC '((?:[^']|'')*)'", block)]


def test_install_creates_schema_sequence_logging_table_and_three_row_triggers() -> None:
    dialect, recording = _dialect(_catalog())
    table = dialect.tables[0]
    statements = dialect.install_statements([table])
    assert recording.unanswered() == []
    schema, sequence, log, *rest = statements
    assert "SYS.SCHEMAS WHERE SCHEMA_NAME = 'REPLCHECK_CAPTURE'" in schema
    assert ":OBJECT_COUNT = 0" in schema and _executed(schema) == [
        'CREATE SCHEMA "REPLCHECK_CAPTURE"'
    ]
    create, first = _executed(sequence)
    assert create.startswith('CREATE SEQUENCE "REPLCHECK_CAPTURE"."CAPTURE_SEQ" START WITH 1')
    assert "NO CACHE" in create  # values are given out in the order they are asked for
    assert first == 'SELECT "REPLCHECK_CAPTURE"."CAPTURE_SEQ".NEXTVAL FROM DUMMY'
    assert f"TABLE_NAME = '{LOG.replace(chr(39), chr(39) * 2)}'" in log  # the check's literal
    (created,) = _executed(log)
    quoted_log = '"LOG_Shop Data.Bob\'s ""Lines"""'
    assert created.startswith(f'CREATE COLUMN TABLE "REPLCHECK_CAPTURE".{quoted_log} (')
    declarations = created[created.index("(") + 1 : -1].split(", ")
    assert declarations[:4] == [
        '"_RC_SEQ" BIGINT NOT NULL',
        '"_RC_TXID" BIGINT NOT NULL',
        '"_RC_OP" VARCHAR(1) NOT NULL',
        '"_RC_AT" TIMESTAMP NOT NULL',
    ]
    # Every column copied with a type holding all its values, nullable: a delete's old row
    # and an insert's new row alike fit.
    expected = [f'"{row[0]}" {declaration}' for row, declaration in COLUMNS]
    assert ", ".join(declarations[4:]) == ", ".join(expected)
    drops, triggers = rest[:3], rest[3:]
    names = tsql.trigger_names(tsql.Located(SCHEMA, TABLE))
    for drop, name in zip(drops, names, strict=True):
        assert f"TRIGGER_NAME = '{name.replace(chr(39), chr(39) * 2)}'" in drop
        assert ":OBJECT_COUNT > 0" in drop
    assert len(triggers) == 3


def test_the_triggers_record_the_new_row_the_old_row_and_a_key_move_as_delete_and_insert() -> None:
    dialect, _ = _dialect(_catalog())
    insert, update, delete = dialect.install_statements(dialect.tables)[-3:]
    on = '"Shop Data"."Bob\'s ""Lines"""'
    head = f'CREATE TRIGGER "Shop Data"."REPLCHECK_Bob\'s ""Lines""_INS" AFTER INSERT ON {on}'
    assert insert.startswith(f"{head} REFERENCING NEW ROW NEWROW FOR EACH ROW\nBEGIN")
    assert "AFTER UPDATE" in update and "REFERENCING NEW ROW NEWROW, OLD ROW OLDROW" in update
    assert "AFTER DELETE" in delete and "REFERENCING OLD ROW OLDROW FOR EACH ROW" in delete
    assert _recorded(insert) == [("c", "NEWROW")]
    assert _recorded(delete) == [("d", "OLDROW")]
    assert _recorded(update) == [("u", "NEWROW"), ("d", "OLDROW"), ("c", "NEWROW")]
    condition = update[update.index("IF ") + 3 : update.index(" THEN")]
    assert condition == (
        ':OLDROW."ORDER_ID" = :NEWROW."ORDER_ID" AND :OLDROW."line no" = :NEWROW."line no"'
    )
    for trigger in (insert, update, delete):
        for listed, values in re.findall(r"\(([^()]*)\) VALUES \((.*?)\);", trigger):
            copied = [c.strip() for c in listed.split(", ")][4:]
            assert copied == [f'"{row[0]}"' for row, _ in COLUMNS]
            parts = values.split(", ")
            assert parts[:2] == [
                '"REPLCHECK_CAPTURE"."CAPTURE_SEQ".NEXTVAL',
                "CURRENT_UPDATE_TRANSACTION()",
            ]
            assert parts[3] == "CURRENT_UTCTIMESTAMP"
            row = parts[4].split(".")[0]  # :NEWROW or :OLDROW
            assert parts[4:] == [f'{row}."{r[0]}"' for r, _ in COLUMNS]


def _recorded(trigger: str) -> list[tuple[str, str]]:
    """(op, transition row) of each logging INSERT, in order."""
    pattern = r"CURRENT_UPDATE_TRANSACTION\(\), '(\w)', CURRENT_UTCTIMESTAMP, :(\w+)\."
    return re.findall(pattern, trigger)


def test_a_second_install_adds_only_the_columns_added_since() -> None:
    present = [row[0] for row, _ in COLUMNS if row[0] not in ("NOTE", "PLACED")]
    dialect, _ = _dialect(_catalog(log_columns=["_RC_SEQ", *present]))
    statements = dialect.install_statements(dialect.tables)
    added = [s for s in statements if s.startswith("ALTER TABLE")]
    log = '"REPLCHECK_CAPTURE"."LOG_Shop Data.Bob\'s ""Lines"""'
    assert added == [
        f'ALTER TABLE {log} ADD ("NOTE" NVARCHAR(40))',
        f'ALTER TABLE {log} ADD ("PLACED" TIMESTAMP)',
    ]


def test_removal_drops_triggers_and_logging_table_and_the_schema_with_the_last_table() -> None:
    more = [{"sql": tsql.LOG_TABLES, "params": [tsql.SCHEMA], "rows": [[LOG]]}]
    dialect, _ = _dialect(more)
    statements = dialect.removal_statements(dialect.tables)
    assert [_executed(s)[0].split(" ")[:2] for s in statements] == [
        ["DROP", "TRIGGER"], ["DROP", "TRIGGER"], ["DROP", "TRIGGER"],
        ["DROP", "TABLE"], ["DROP", "SCHEMA"],
    ]  # fmt: skip
    assert _executed(statements[-1]) == ['DROP SCHEMA "REPLCHECK_CAPTURE" CASCADE']
    others = [{"sql": tsql.LOG_TABLES, "params": [tsql.SCHEMA], "rows": [[LOG], ["LOG_SHOP.X"]]}]
    kept, _ = _dialect(others)
    assert "DROP SCHEMA" not in " ".join(kept.removal_statements(kept.tables))


def test_a_table_without_key_or_with_an_unreadable_column_is_refused_naming_it() -> None:
    rows = [["ID", "BIGINT", 19, 0, "FALSE"], ["SHAPE", "ST_GEOMETRY", None, None, "TRUE"]]
    catalog: list[dict[str, Any]] = [
        {"sql": sql.COLUMNS, "params": ["SHOP", "MAP"], "rows": rows},
        {"sql": sql.PRIMARY_KEY, "params": ["SHOP", "MAP"], "rows": [["ID"]]},
    ]
    dialect = HanaTriggerDialect(RecordedHanaConnector(URL, Recording(Path("c"), catalog)), ["MAP"])
    with pytest.raises(ConfigError, match=r"SHAPE \(ST_GEOMETRY\)"):
        dialect.install_statements(["MAP"])
    keyless = [{**catalog[0], "rows": rows[:1]}, {**catalog[1], "rows": []}]
    plain = HanaTriggerDialect(RecordedHanaConnector(URL, Recording(Path("c"), keyless)), ["MAP"])
    with pytest.raises(ConfigError, match=r"primary key on table SHOP\.MAP"):
        plain.install_statements(["MAP"])
    with pytest.raises(ConfigError, match="too long"):
        tsql.log_table(tsql.Located("S", "T" * 124))


def test_the_reads_cover_every_logging_table_and_bind_each_bound() -> None:
    logs = [tsql.Located(tsql.SCHEMA, "LOG_SHOP.A"), tsql.Located(tsql.SCHEMA, "LOG_SHOP.B")]
    visible = tsql.visible_values(logs)
    assert visible.count("UNION ALL") == 1 and visible.count("?") == 2
    assert visible.endswith("ORDER BY 1")
    committed = tsql.committed_transactions(logs)
    assert committed.count("?") == 3 and 'HAVING MAX("_RC_SEQ") <= ?' in committed
    purge = tsql.purgeable_transactions(logs, 500)
    assert purge.endswith("LIMIT 500") and purge.count("?") == 3
    rows = tsql.transaction_rows(logs[0], ["ID"], 3)
    assert rows.endswith('WHERE "_RC_SEQ" <= ? AND "_RC_TXID" IN (?, ?, ?) ORDER BY "_RC_SEQ"')
    assert tsql.delete_transactions(logs[0], 2).endswith('"_RC_TXID" IN (?, ?)')
    assert tsql.lock_exclusive(tsql.Located("SHOP", "T")) == (
        'LOCK TABLE "SHOP"."T" IN EXCLUSIVE MODE NOWAIT'
    )
    assert [len(c) for c in tsql.chunks(list(range(2500)))] == [1000, 1000, 500]


def test_hana_urls_capture_by_trigger_and_still_read_snapshots() -> None:
    assert captures_by_trigger(URL)  # no capture parameter needed: HANA's only capture
    dialect = capture_dialect_for(URL + "&capture=trigger", None, ["ORDERS"])
    assert isinstance(dialect, HanaTriggerDialect) and dialect.tables == ("SHOP.ORDERS",)
    assert "capture" not in dialect.connector.connect_args()  # hdbcli never sees it
    assert isinstance(connector_for(URL), HanaConnector)
    with pytest.raises(ConfigError, match="listed by name"):
        capture_dialect_for(URL, None, ["SHOP.*"])


def test_unqualified_names_are_in_the_current_schema_or_the_users_own() -> None:
    no_schema = HanaConnector("hana+hdbcli://repl@hana.example:30015")
    assert no_schema.default_schema() == "REPL"
    assert HanaConnector(URL).default_schema() == "SHOP"
