"""The MariaDB log reader: exact raw-change sequences for DML, transactions and DDL, on the
FULL and the MINIMAL row-image server."""

from __future__ import annotations

import pytest

from cdc_core.capture.events import ABSENT, Begin, Commit, RowChange
from tests.connectors.mariadb.binlog_helpers import (
    BinlogCase,
    check_order,
    image,
    read_until_end,
    shown,
)

pytestmark = [pytest.mark.integration, pytest.mark.mariadb]

TABLE = "CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(20), qty INT DEFAULT 5, note TEXT)"


def _row(id_: int, name: str | None, qty: int | None, note: str | None) -> dict[str, object]:
    return {"id": id_, "name": name, "qty": qty, "note": note}


def test_inserts_updates_deletes_with_full_or_minimal_images(case: BinlogCase) -> None:
    case.sql(TABLE)
    reader = case.reader("t")
    start = reader.end_position()
    case.sql(
        "INSERT INTO t VALUES (1, 'a', 1, 'x')",
        "INSERT INTO t (id, name) VALUES (2, 'b')",
        "INSERT INTO t VALUES (3, 'c', 3, NULL), (4, 'd', 4, 'y')",
        "UPDATE t SET qty = 9 WHERE id = 1",
        "DELETE FROM t WHERE id = 2",
        "UPDATE t SET id = 10 WHERE id = 3",
    )
    changes = read_until_end(reader, start)
    check_order(changes)
    minimal = case.minimal
    key = ["id"] if minimal else None
    assert shown(changes) == [
        ("B",),
        ("c", "t", (1,), _row(1, "a", 1, "x"), None),
        ("C",),
        ("B",),
        # MINIMAL leaves out the columns the INSERT did not name (their defaults).
        ("c", "t", (2,), image(_row(2, "b", 5, None), ["id", "name"] if minimal else None), None),
        ("C",),
        ("B",),
        ("c", "t", (3,), _row(3, "c", 3, None), None),
        ("c", "t", (4,), _row(4, "d", 4, "y"), None),
        ("C",),
        ("B",),
        (
            "u",
            "t",
            (1,),
            image(_row(1, "a", 9, "x"), ["qty"] if minimal else None),
            image(_row(1, "a", 1, "x"), key),
        ),
        ("C",),
        ("B",),
        ("d", "t", (2,), None, image(_row(2, "b", 5, None), key)),
        ("C",),
        ("B",),
        (
            "u",
            "t",
            (3,),
            image(_row(10, "c", 3, None), key),
            image(_row(3, "c", 3, None), key),
        ),
        ("C",),
    ]


def test_one_transaction_per_commit_with_its_gtid_and_commit_position(case: BinlogCase) -> None:
    case.sql(TABLE)
    reader = case.reader("t")
    start = reader.end_position()
    case.sql("BEGIN", "INSERT INTO t VALUES (1, 'a', 1, 'x')", "DELETE FROM t", "COMMIT")
    after_commit = reader.end_position()
    changes = read_until_end(reader, start)
    begin, insert, delete, commit = changes
    assert isinstance(begin, Begin) and isinstance(commit, Commit)
    assert isinstance(insert, RowChange) and isinstance(delete, RowChange)
    domain, server, sequence = begin.txid.split("-")
    assert (domain, server) == ("0", "1") and int(sequence) > 0
    assert {change.txid for change in changes} == {begin.txid}
    # commit_pos is where binlog_snapshot_position would stand right after the commit.
    assert commit.position == after_commit
    assert begin.position < insert.position < delete.position < commit.position
    assert commit.commit_ts.tzinfo is not None


def test_savepoints_rollbacks_xa_and_non_transactional_tables(case: BinlogCase) -> None:
    case.sql(TABLE, "CREATE TABLE m (id INT PRIMARY KEY, x INT) ENGINE=MyISAM")
    case.sql("CREATE TABLE a (id INT PRIMARY KEY, x INT) ENGINE=Aria")
    reader = case.reader("t", "m", "a")
    start = reader.end_position()
    case.sql(
        "BEGIN",
        "INSERT INTO t VALUES (20, 'kept', 1, NULL)",
        "SAVEPOINT s",
        "INSERT INTO t VALUES (21, 'undone', 1, NULL)",
        "ROLLBACK TO SAVEPOINT s",
        "COMMIT",
        "BEGIN",
        "INSERT INTO t VALUES (22, 'gone', 1, NULL)",
        "ROLLBACK",
    )
    case.sql("XA START 'x1'", "INSERT INTO t VALUES (30, 'xa', 1, NULL)", "XA END 'x1'")
    case.sql("XA PREPARE 'x1'", "XA COMMIT 'x1'")
    case.sql("XA START 'x2', 'b', 7", "INSERT INTO t VALUES (31, 'xa', 1, NULL)")
    case.sql("XA END 'x2', 'b', 7", "XA PREPARE 'x2', 'b', 7", "XA ROLLBACK 'x2', 'b', 7")
    case.sql("INSERT INTO m VALUES (1, 1), (2, 2)", "INSERT INTO a VALUES (1, 1)")
    changes = read_until_end(reader, start)
    check_order(changes)
    txids = [change.txid for change in changes]
    assert txids[3:6] == ["xa-1-7831-"] * 3
    assert txids[6:9] == ["xa-7-7832-62"] * 3
    assert shown(changes) == [
        ("B",),
        ("c", "t", (20,), _row(20, "kept", 1, None), None),
        ("C",),
        ("B",),
        ("c", "t", (30,), _row(30, "xa", 1, None), None),
        ("C",),
        ("B",),
        ("c", "t", (31,), _row(31, "xa", 1, None), None),
        ("R",),  # XA ROLLBACK after XA PREPARE: the prepared rows are in the log, undone
        ("B",),
        ("c", "m", (1,), {"id": 1, "x": 1}, None),
        ("c", "m", (2,), {"id": 2, "x": 2}, None),
        ("C",),
        ("B",),
        ("c", "a", (1,), {"id": 1, "x": 1}, None),
        ("C",),
    ]


def test_rows_are_decoded_by_table_id_when_a_trigger_interleaves_tables(
    case: BinlogCase,
) -> None:
    case.sql(
        "CREATE TABLE orders (id INT PRIMARY KEY, total DECIMAL(8,2))",
        "CREATE TABLE audit (n INT AUTO_INCREMENT PRIMARY KEY, order_id INT, what VARCHAR(8))",
        "CREATE TRIGGER orders_in AFTER INSERT ON orders FOR EACH ROW"
        " INSERT INTO audit (order_id, what) VALUES (NEW.id, 'insert')",
    )
    reader = case.reader("orders", "audit")
    start = reader.end_position()
    case.sql("INSERT INTO orders VALUES (1, 1.50), (2, 2.25)")
    changes = read_until_end(reader, start)
    assert [(c[0], c[1], c[2]) for c in shown(changes)[1:-1]] == [
        ("c", "orders", (1,)),
        ("c", "audit", (1,)),
        ("c", "orders", (2,)),
        ("c", "audit", (2,)),
    ]
    rows = [change.after for change in changes if isinstance(change, RowChange)]
    from decimal import Decimal

    assert rows[0] == {"id": 1, "total": Decimal("1.50")}
    assert rows[1] == {"n": 1, "order_id": 1, "what": "insert"}


def test_rows_are_decoded_with_the_schema_in_force_at_their_position(case: BinlogCase) -> None:
    case.sql("CREATE TABLE s (id INT PRIMARY KEY, a INT, b VARCHAR(5))")
    reader = case.reader("s", "s2", "copy")
    start = reader.end_position()
    case.sql(
        "INSERT INTO s VALUES (1, 10, '1')",
        "ALTER TABLE s ADD COLUMN c INT DEFAULT 7, DROP COLUMN a",
        "INSERT INTO s (id, b) VALUES (2, '2')",
        "ALTER TABLE s MODIFY b BIGINT",
        "UPDATE s SET b = 12345678901 WHERE id = 2",
        "RENAME TABLE s TO s2",
        "INSERT INTO s2 VALUES (3, 4, 5)",
        "CREATE TABLE copy (PRIMARY KEY (id)) SELECT id, c FROM s2",
        "TRUNCATE TABLE s2",
    )
    changes = read_until_end(reader, start)  # read after all the DDL ran
    check_order(changes)
    minimal = case.minimal
    assert shown(changes) == [
        ("B",),
        ("c", "s", (1,), {"id": 1, "a": 10, "b": "1"}, None),
        ("C",),
        ("B",),
        (
            "c",
            "s",
            (2,),
            image({"id": 2, "b": "2", "c": 7}, ["id", "b"] if minimal else None),
            None,
        ),
        ("C",),
        ("B",),
        (
            "u",
            "s",
            (2,),
            image({"id": 2, "b": 12345678901, "c": 7}, ["b"] if minimal else None),
            image({"id": 2, "b": 2, "c": 7}, ["id"] if minimal else None),
        ),
        ("C",),
        ("B",),
        ("c", "s2", (3,), {"id": 3, "b": 4, "c": 5}, None),
        ("C",),
        ("B",),
        ("c", "copy", (1,), {"id": 1, "c": 7}, None),
        ("c", "copy", (2,), {"id": 2, "c": 7}, None),
        ("c", "copy", (3,), {"id": 3, "c": 5}, None),
        ("C",),
        ("B",),
        ("t", "s2", None, None, None),
        ("C",),
    ]


def test_a_table_without_primary_key_is_located_by_all_columns_or_the_configured_key(
    case: BinlogCase, caplog: pytest.LogCaptureFixture
) -> None:
    case.sql("CREATE TABLE nk (a INT, b VARCHAR(5))", "CREATE TABLE ck (a INT, b VARCHAR(5))")
    reader = case.reader("nk", "ck", keys={"ck": ("a",)})
    start = reader.end_position()
    case.sql("INSERT INTO nk VALUES (1, 'x')", "UPDATE nk SET b = 'y'", "DELETE FROM nk")
    case.sql("INSERT INTO ck VALUES (2, 'z')", "DELETE FROM ck")
    with caplog.at_level("WARNING"):
        changes = read_until_end(reader, start)
    locators = [(c[0], c[1], c[2]) for c in shown(changes) if c[0] in "cud"]
    assert locators == [
        ("c", "nk", (1, "x")),
        ("u", "nk", (1, "x")),
        ("d", "nk", (1, "y")),
        ("c", "ck", (2,)),
        ("d", "ck", (2,)),
    ]
    assert "no primary key and no configured key" in caplog.text
    assert "configured key ['a']" in caplog.text
    assert reader.describe("nk").key == ("a", "b")
    assert reader.describe("ck").key == ("a",)


def test_only_captured_tables_are_read(case: BinlogCase) -> None:
    case.sql(TABLE, "CREATE TABLE other (id INT PRIMARY KEY)")
    reader = case.reader("t")
    start = reader.end_position()
    case.sql("INSERT INTO other VALUES (1)", "INSERT INTO t (id) VALUES (1)")
    changes = read_until_end(reader, start)
    assert [c[:3] for c in shown(changes)] == [("B",), ("c", "t", (1,)), ("C",)]
    assert all(
        change.after is None or change.after.get("id") == 1
        for change in changes
        if isinstance(change, RowChange)
    )
    assert ABSENT is not None
