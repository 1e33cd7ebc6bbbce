"""DDL of captured tables: each statement's action and the columns after it, and recorded
contents with DDL between row changes (TableChanged at the DDL's SCN, later SQL_REDO parsed
with the new columns, a restart past the DDL)."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import pytest

from cdc_core.capture.events import ABSENT, RowChange
from cdc_core.capture.position import Position
from cdc_core.capture.source import Idle, TableChanged
from connectors.model import SourceColumn
from connectors.oracle.ddl import classify_ddl
from connectors.oracle.errors import DictionaryMismatchError
from connectors.oracle.logminer.contents import ContentsRow
from merkle import types as lt
from tests.connectors.oracle.harness import DATA
from tests.connectors.oracle.replay import ReplayConfig, ReplayLogReader, load_tables

ORD = "SHOP.ORDERS"
SHOP = load_tables(DATA / "shop_tables.json")
COLUMNS = ["ID", "CUSTOMER", "AMOUNT", "STATUS", "PLACED", "NOTE"]


def columns_after(text: str) -> list[str]:
    return [column.name for column in classify_ddl(text, SHOP[ORD]).schema.columns]


@pytest.mark.parametrize(
    ("text", "action", "why"),
    [
        # value-preserving
        ('alter table "SHOP"."ORDERS" add ("RATING" NUMBER(2))', "schema", "nullable column"),
        ("ALTER TABLE orders ADD rating NUMBER(2) DEFAULT NULL", "schema", "RATING added"),
        ("alter table orders modify (note varchar2(4000))", "schema", "length changed"),
        ("alter table orders modify note varchar2(20 char) not null", "schema", "length"),
        ("alter table orders modify (note default 'n/a')", "schema", "default, nullability"),
        ("alter table orders modify (note constraint nn not null)", "schema", "nullability"),
        # stored values may have changed
        ("ALTER TABLE shop.orders ADD rating NUMBER(2) DEFAULT 0", "refresh", "without redo"),
        ("alter table orders add (flag char(1) default 'N' not null)", "refresh", "DEFAULT"),
        ("alter table orders add (flag char(1) not null)", "refresh", "added NOT NULL"),
        ("alter table orders add (total as (amount * 2) virtual)", "refresh", "virtual"),
        ("alter table orders add (seq number generated always as identity)", "refresh", "identity"),
        ("alter table orders modify (amount number(14,4))", "refresh", "from NUMBER(12,2)"),
        ("alter table orders modify (status char(20))", "refresh", "changed type from CHAR"),
        ("alter table orders modify (note clob)", "refresh", "changed type from VARCHAR2"),
        ("alter table orders drop column note", "refresh", "['NOTE'] dropped"),
        ('alter table orders drop ("NOTE", status) cascade constraints', "refresh", "dropped"),
        ("alter table orders set unused column note", "refresh", "set unused"),
        ("alter table orders set unused (note)", "refresh", "set unused"),
        ('alter table orders rename column "NOTE" to remark', "refresh", "NOTE renamed to REMARK"),
        ("alter table orders drop partition p2024", "refresh", "removed without row events"),
        ("alter table orders truncate partition p1", "refresh", "removed without row events"),
        ("alter table orders exchange partition p1 with table t", "refresh", "swapped"),
        ("alter table orders move", "refresh", "ROWIDs changed"),
        ("alter table orders split partition p into (partition a, partition b)", "refresh", "ROW"),
        ("alter table orders shrink space cascade", "refresh", "ROWIDs changed"),
        ("alter table orders frobnicate", "refresh", "unknown ALTER TABLE clause FROBNICATE"),
        ("create table orders (id number)", "refresh", "created again"),
        ("flashback table orders to scn 123", "refresh", "without row events"),
        # the pipeline cannot follow it
        ('drop table "SHOP"."ORDERS" purge', "stop", "remove it from the pipeline's tables"),
        ("alter table orders rename to orders_old", "stop", "capture the new name"),
        ("rename orders to orders_old", "stop", "capture the new name"),
        # no stored value changes
        ('alter table "SHOP"."ORDERS" add constraint "CK" check ("ID" > 0)', None, ""),
        ("alter table orders add primary key (id)", None, ""),
        ("alter table orders add (constraint u unique (customer))", None, ""),
        ("alter table orders modify constraint ck disable", None, ""),
        ("alter table orders drop constraint ck", None, ""),
        ("alter table orders drop unused columns", None, ""),
        ("alter table orders add partition p2027 values less than (2028)", None, ""),
        ("alter table orders add supplemental log data (all) columns", None, ""),
        ("alter table orders enable row movement", None, ""),
        ("alter table orders nologging", None, ""),
        ("alter table orders rename constraint a to b", None, ""),
        ('create index "SHOP"."IX" on "SHOP"."ORDERS"("CUSTOMER")', None, ""),
        ("grant select on orders to bob", None, ""),
        ("comment on column orders.note is 'x'", None, ""),
    ],
)  # fmt: skip
def test_each_statement_gets_its_action(text: str, action: str | None, why: str) -> None:
    outcome = classify_ddl(text, SHOP[ORD])
    assert (outcome.action, outcome.truncate) == (action, False)
    assert why in outcome.reason


@pytest.mark.parametrize(
    ("text", "columns"),
    [
        ('alter table "SHOP"."ORDERS" add ("RATING" NUMBER(2))', [*COLUMNS, "RATING"]),
        ("alter table orders add (a varchar2(1), b date)", [*COLUMNS, "A", "B"]),
        ("alter table orders drop (note, status)", ["ID", "CUSTOMER", "AMOUNT", "PLACED"]),
        ("alter table orders set unused column note", COLUMNS[:-1]),
        ('alter table orders rename column note to "Remark"', [*COLUMNS[:-1], "Remark"]),
        ("alter table orders drop column gone", COLUMNS),  # re-read: it is gone already
        ("alter table orders add (note varchar2(9))", COLUMNS),  # re-read: it is there already
        ("alter table orders add constraint ck check (id > 0)", COLUMNS),
    ],
)
def test_the_dictionary_follows_the_statement(text: str, columns: list[str]) -> None:
    assert columns_after(text) == columns


def test_declared_types_become_the_dictionary_types_reflection_gives() -> None:
    text = (
        "alter table orders add (r number(2), d number(12, 3), n number, i integer,"
        " f float(63), s varchar2(20 char), c nchar(3), t timestamp(3) with time zone,"
        " l timestamp with local time zone, ym interval year to month,"
        " ds interval day(3) to second(2), raw_ raw(16), dp double precision)"
    )
    added = classify_ddl(text, SHOP[ORD]).schema.columns[len(COLUMNS) :]
    assert [(c.name, c.native_type, c.ltype) for c in added] == [
        ("R", "NUMBER(2,0)", lt.IntegerType()),
        ("D", "NUMBER(12,3)", lt.DecimalType(12, 3)),
        ("N", "NUMBER", lt.DecimalType()),
        ("I", "NUMBER", lt.DecimalType()),  # ALL_TAB_COLUMNS: precision NULL, scale 0
        ("F", "FLOAT", lt.DecimalType()),
        ("S", "VARCHAR2", lt.StringType()),
        ("C", "NCHAR", lt.StringType(padded=True)),
        ("T", "TIMESTAMP(3) WITH TIME ZONE", lt.TimestampTzType(3)),
        ("L", "TIMESTAMP(6) WITH LOCAL TIME ZONE", lt.TimestampTzType(6)),
        ("YM", "INTERVAL YEAR(2) TO MONTH", lt.IntervalType()),
        ("DS", "INTERVAL DAY(3) TO SECOND(2)", lt.IntervalType()),
        ("RAW_", "RAW", lt.BytesType()),
        ("DP", "FLOAT", lt.DecimalType()),
    ]
    assert all(c.nullable for c in added)


def test_a_modified_type_and_a_dropped_key_column_reach_the_dictionary() -> None:
    retyped = classify_ddl("alter table orders modify (amount number(14,4))", SHOP[ORD]).schema
    assert retyped.column("AMOUNT") == SourceColumn(
        "AMOUNT", "NUMBER(14,4)", lt.DecimalType(14, 4), True
    )
    assert classify_ddl("alter table orders drop column id", SHOP[ORD]).schema.primary_key == ()


def test_truncate_is_a_truncate() -> None:
    outcome = classify_ddl('truncate table "SHOP"."ORDERS" drop storage', SHOP[ORD])
    assert (outcome.truncate, outcome.action, outcome.schema) == (True, None, SHOP[ORD])


# -- recorded contents with DDL -----------------------------------------------------------

STAMP = dt.datetime(2026, 5, 1, 12, 0, 0)
R1, R2, R3 = "AAAR3sAAEAAAACXAAA", "AAAR3sAAEAAAACXAAB", "AAAR3sAAEAAAACXAAC"
INSERT = (
    'insert into "SHOP"."ORDERS"("ID","CUSTOMER","AMOUNT","STATUS","PLACED","NOTE") values'
    " ('{key}','c','1','NEW       ',TO_DATE('2026-05-01 09:59:00', 'YYYY-MM-DD HH24:MI:SS'),NULL);"
)


RETITLE = 'update "SHOP"."ORDERS" set "REMARK" = \'x\' where "REMARK" IS NULL;'


def _rows() -> list[ContentsRow]:
    """Insert; ADD RATING (nullable); insert with RATING; ADD FLAG DEFAULT; RENAME NOTE;
    update of the renamed column; DROP COLUMN FLAG; update naming FLAG (a mismatch)."""
    table = {"seg_owner": "SHOP", "table_name": "ORDERS"}

    def dml(scn: int, xid: str, code: int, rowid: str, sql: str) -> ContentsRow:
        return ContentsRow(scn, STAMP, xid, code, row_id=rowid, sql_redo=sql, **table)  # type: ignore[arg-type]

    def ddl(scn: int, xid: str, sql: str) -> list[ContentsRow]:
        return [ContentsRow(scn, STAMP, xid, 6), ContentsRow(scn, STAMP, xid, 5, sql_redo=sql,
                **table), ContentsRow(scn, STAMP, xid, 7)]  # type: ignore[arg-type]  # fmt: skip

    rating = INSERT.replace('"NOTE")', '"NOTE","RATING")').replace("NULL);", "NULL,'5');")
    return [
        ContentsRow(10, STAMP, "A1", 6), dml(11, "A1", 1, R1, INSERT.format(key=1)),
        ContentsRow(12, STAMP, "A1", 7),
        *ddl(20, "D1", 'alter table "SHOP"."ORDERS" add ("RATING" NUMBER(2))'),
        ContentsRow(30, STAMP, "A2", 6), dml(31, "A2", 1, R2, rating.format(key=2)),
        ContentsRow(32, STAMP, "A2", 7),
        *ddl(40, "D2", "ALTER TABLE shop.orders ADD flag CHAR(1) DEFAULT 'N' NOT NULL"),
        *ddl(50, "D3", "alter table shop.orders rename column note to remark"),
        ContentsRow(60, STAMP, "A3", 6),
        dml(61, "A3", 3, R1, RETITLE),
        ContentsRow(62, STAMP, "A3", 7),
        *ddl(70, "D4", "alter table shop.orders drop column flag"),
        ContentsRow(80, STAMP, "A4", 6),
        dml(81, "A4", 3, R3, "update \"SHOP\".\"ORDERS\" set \"FLAG\" = 'Y' where \"FLAG\" = 'N';"),
        ContentsRow(82, STAMP, "A4", 7),
    ]  # fmt: skip


@pytest.fixture
def recorded(tmp_path: Path) -> ReplayLogReader:
    contents = tmp_path / "ddl.jsonl"
    lines = [json.dumps(row.to_record()) for row in _rows()]
    contents.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return ReplayLogReader(ReplayConfig(contents, DATA / "shop_tables.json"))


def _until(reader: ReplayLogReader, start: int | None, scn: int) -> list[object]:
    """What the reader yields from ``start`` up to (excluding) the rows at ``scn``."""
    found: list[object] = []
    for item in reader.iter_changes(None if start is None else Position(start, str(start))):
        if isinstance(item, Idle) or item.position.value >= scn:
            return found
        found.append(item)
    return found


def test_ddl_is_yielded_at_its_scn_and_later_redo_parses_with_the_new_columns(
    recorded: ReplayLogReader,
) -> None:
    items = _until(recorded, None, 80)
    ddl = [item for item in items if isinstance(item, TableChanged)]
    assert [(d.position.value, d.table, d.action) for d in ddl] == [
        (20, ORD, "schema"), (40, ORD, "refresh"), (50, ORD, "refresh"), (70, ORD, "refresh"),
    ]  # fmt: skip
    assert ddl[1].statement == "ALTER TABLE shop.orders ADD flag CHAR(1) DEFAULT 'N' NOT NULL"
    changes = [item for item in items if isinstance(item, RowChange)]
    assert changes[1].after is not None and changes[1].after["RATING"] == 5
    assert changes[0].after is not None and "RATING" not in changes[0].after
    renamed = changes[2]
    assert renamed.after is not None and renamed.after["REMARK"] == "x"
    assert renamed.after["RATING"] is ABSENT and "NOTE" not in renamed.after
    assert [c.name for c in recorded.tables[ORD].columns] == [*COLUMNS[:-1], "REMARK", "RATING"]
    assert recorded.describe(ORD).schema.names == [*COLUMNS[:-1], "REMARK", "RATING"]


def test_redo_naming_a_dropped_column_still_names_the_mismatch(recorded: ReplayLogReader) -> None:
    with pytest.raises(DictionaryMismatchError, match="FLAG"):
        _until(recorded, None, 1000)


def test_a_restart_past_the_ddl_starts_with_its_columns(recorded: ReplayLogReader) -> None:
    list(_until(recorded, None, 80))
    items = _until(recorded, 30, 80)  # the first ADD is before the restart position
    first = next(item for item in items if isinstance(item, RowChange))
    assert first.after is not None and first.after["RATING"] == 5
    assert first.after["AMOUNT"] == Decimal("1")
    assert [item.position.value for item in items if isinstance(item, TableChanged)] == [40, 50, 70]
