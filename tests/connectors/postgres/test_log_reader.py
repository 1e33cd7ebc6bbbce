"""The Postgres log reader on a private cluster: exact raw change sequences of every kind of
row change, replica identity, TOAST, truncate and schema change, and the full-width
committed transactions the core (buffer + rebuild) makes of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc_core.capture.events import ABSENT, Commit
from cdc_core.capture.position import Position
from connectors.postgres.log_reader import PostgresLogReader
from tests.connectors.postgres.helpers import (
    PgCase,
    check_order,
    committed,
    read_until_end,
    shown,
    txids,
)

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

BIG = "(SELECT string_agg(md5(i::text), '') FROM generate_series(1, 300) AS i)"  # 9600 chars


def _started(case: PgCase, *tables: str, **options: object) -> tuple[PostgresLogReader, Position]:
    """A reader whose slot exists, and the position to read the next changes from."""
    reader = case.reader(*tables, **options)
    assert read_until_end(reader, None) == []  # creates the publication and the slot
    return reader, reader.end_position()


def test_insert_update_delete_with_default_identity(case: PgCase) -> None:
    case.sql("CREATE TABLE t (id int PRIMARY KEY, v text, n int)")
    reader, start = _started(case, "t")
    case.sql(
        "INSERT INTO t VALUES (1, 'a', 10), (2, 'b', NULL)",
        "UPDATE t SET v = 'c' WHERE id = 1",
        "UPDATE t SET id = 3 WHERE id = 2",
        "DELETE FROM t WHERE id = 1",
    )
    changes = read_until_end(reader, start)
    check_order(changes)
    x1, x2, x3, x4 = txids(changes)
    row1, row2 = {"id": 1, "v": "a", "n": 10}, {"id": 2, "v": "b", "n": None}
    key_only = {"v": ABSENT, "n": ABSENT}  # not logged: never NULL
    assert shown(changes) == [
        ("B", x1),
        ("c", x1, "t", (1,), row1, None),
        ("c", x1, "t", (2,), row2, None),
        ("C", x1),
        ("B", x2),
        ("u", x2, "t", (1,), {"id": 1, "v": "c", "n": 10}, None),
        ("C", x2),
        ("B", x3),
        ("u", x3, "t", (2,), {"id": 3, "v": "b", "n": None}, {"id": 2, **key_only}),
        ("C", x3),
        ("B", x4),
        ("d", x4, "t", (1,), None, {"id": 1, **key_only}),
        ("C", x4),
    ]


def test_core_rebuilds_full_images_of_key_only_deletes(case: PgCase, tmp_path: Path) -> None:
    case.sql("CREATE TABLE t (id int PRIMARY KEY, v text, n int)")
    reader, start = _started(case, "t")
    case.sql(
        "INSERT INTO t VALUES (1, 'a', 10)",
        "UPDATE t SET id = 2 WHERE id = 1",
        "DELETE FROM t WHERE id = 2",
    )
    out = committed(read_until_end(reader, start), tmp_path, {"public.t": ("id",)})
    row = {"id": 1, "v": "a", "n": 10}
    moved = {"id": 2, "v": "a", "n": 10}
    assert [changes for _, changes in out] == [
        [("c", "t", (1,), row, None)],
        [("u", "t", (2,), moved, row)],
        [("d", "t", (2,), None, moved)],
    ]


def test_replica_identity_full_logs_whole_rows(case: PgCase) -> None:
    case.sql(
        "CREATE TABLE t (id int PRIMARY KEY, v text)",
        "ALTER TABLE t REPLICA IDENTITY FULL",
        "INSERT INTO t VALUES (1, 'a')",
    )
    reader, start = _started(case, "t")
    case.sql("UPDATE t SET v = 'b' WHERE id = 1", "DELETE FROM t")
    changes = read_until_end(reader, start)
    x1, x2 = txids(changes)
    assert shown(changes) == [
        ("B", x1),
        ("u", x1, "t", (1,), {"id": 1, "v": "b"}, {"id": 1, "v": "a"}),
        ("C", x1),
        ("B", x2),
        ("d", x2, "t", (1,), None, {"id": 1, "v": "b"}),
        ("C", x2),
    ]


def test_keyless_table_with_identity_full_is_located_by_all_columns(case: PgCase) -> None:
    case.sql("CREATE TABLE t (a int, b text)", "ALTER TABLE t REPLICA IDENTITY FULL")
    reader, start = _started(case, "t")
    assert reader.describe("public.t").key == ("a", "b")
    case.sql("INSERT INTO t VALUES (1, 'x')", "DELETE FROM t")
    changes = read_until_end(reader, start)
    x1, x2 = txids(changes)
    assert shown(changes) == [
        ("B", x1),
        ("c", x1, "t", (1, "x"), {"a": 1, "b": "x"}, None),
        ("C", x1),
        ("B", x2),
        ("d", x2, "t", (1, "x"), None, {"a": 1, "b": "x"}),
        ("C", x2),
    ]


def test_replica_identity_using_index_locates_rows_by_the_index(case: PgCase) -> None:
    case.sql(
        "CREATE TABLE t (id int PRIMARY KEY, code text NOT NULL, v int)",
        "CREATE UNIQUE INDEX t_code ON t (code)",
        "ALTER TABLE t REPLICA IDENTITY USING INDEX t_code",
        "INSERT INTO t VALUES (1, 'k1', 5)",
    )
    reader, start = _started(case, "t")
    assert reader.describe("public.t").key == ("code",)
    case.sql("UPDATE t SET code = 'k2' WHERE id = 1", "DELETE FROM t WHERE id = 1")
    changes = read_until_end(reader, start)
    x1, x2 = txids(changes)
    old = {"id": ABSENT, "code": "k1", "v": ABSENT}
    assert shown(changes) == [
        ("B", x1),
        ("u", x1, "t", ("k1",), {"id": 1, "code": "k2", "v": 5}, old),
        ("C", x1),
        ("B", x2),
        ("d", x2, "t", ("k2",), None, {"id": ABSENT, "code": "k2", "v": ABSENT}),
        ("C", x2),
    ]


def test_unchanged_toasted_value_is_absent_and_completed_by_the_core(
    case: PgCase, tmp_path: Path
) -> None:
    case.sql("CREATE TABLE t (id int PRIMARY KEY, big text, n int)")
    big = case.connection.execute(f"SELECT {BIG}").fetchone()[0]  # type: ignore[index]
    reader, start = _started(case, "t")
    case.sql(f"INSERT INTO t VALUES (1, {BIG}, 0)", "UPDATE t SET n = 1 WHERE id = 1")
    changes = read_until_end(reader, start)
    x1, x2 = txids(changes)
    assert shown(changes) == [
        ("B", x1),
        ("c", x1, "t", (1,), {"id": 1, "big": big, "n": 0}, None),
        ("C", x1),
        ("B", x2),
        ("u", x2, "t", (1,), {"id": 1, "big": ABSENT, "n": 1}, None),  # TOASTed, unchanged
        ("C", x2),
    ]
    out = committed(changes, tmp_path, {"public.t": ("id",)})
    before, after = {"id": 1, "big": big, "n": 0}, {"id": 1, "big": big, "n": 1}
    assert out[1][1] == [("u", "t", (1,), after, before)]


def test_truncate_of_captured_tables_only(case: PgCase) -> None:
    case.sql(
        "CREATE TABLE a (id int PRIMARY KEY)",
        "CREATE TABLE b (id int PRIMARY KEY)",
        "CREATE TABLE other (id int PRIMARY KEY)",
        "CREATE PUBLICATION replcheck FOR ALL TABLES",
        "INSERT INTO a VALUES (1)",
    )
    reader, start = _started(case, "a", "b")
    case.sql("INSERT INTO other VALUES (1)", "TRUNCATE a, b, other", "INSERT INTO b VALUES (2)")
    changes = read_until_end(reader, start)
    check_order(changes)
    x_other, x_truncate, x_insert = txids(changes)
    assert shown(changes) == [
        ("C", x_other),  # a transaction of an uncaptured table only: an empty commit
        ("B", x_truncate),
        ("t", x_truncate, "a", None, None, None),
        ("t", x_truncate, "b", None, None, None),
        ("C", x_truncate),
        ("B", x_insert),
        ("c", x_insert, "b", (2,), {"id": 2}, None),
        ("C", x_insert),
    ]


def test_schema_changes_between_transactions(case: PgCase) -> None:
    case.sql("CREATE TABLE t (id int PRIMARY KEY, v text)")
    reader, start = _started(case, "t")
    case.sql(
        "INSERT INTO t VALUES (1, 'a')",
        "ALTER TABLE t ADD COLUMN n numeric(5,2) DEFAULT 1.5",
        "INSERT INTO t VALUES (2, 'b', 2.25)",
        "ALTER TABLE t DROP COLUMN v",
        "UPDATE t SET n = 3 WHERE id = 1",
    )
    changes = read_until_end(reader, start)
    x1, x2, x3 = txids(changes)
    assert shown(changes) == [
        ("B", x1),
        ("c", x1, "t", (1,), {"id": 1, "v": "a"}, None),
        ("C", x1),
        ("DDL", "t", "refresh"),  # the new shape shows with the next change's Relation
        ("B", x2),
        ("c", x2, "t", (2,), {"id": 2, "v": "b", "n": pytest.approx(2.25)}, None),
        ("C", x2),
        ("DDL", "t", "refresh"),
        ("B", x3),
        ("u", x3, "t", (1,), {"id": 1, "n": pytest.approx(3)}, None),
        ("C", x3),
    ]
    assert str(shown(changes)[5][4]["n"]) == "2.25"  # numeric(5,2): its scale kept
    assert str(shown(changes)[9][4]["n"]) == "3.00"


def test_commit_positions_are_commit_end_lsns_and_idle_reaches_the_end(case: PgCase) -> None:
    case.sql("CREATE TABLE t (id int PRIMARY KEY)")
    reader, start = _started(case, "t")
    case.sql("INSERT INTO t VALUES (1)")
    lsn = case.connection.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
    changes = read_until_end(reader, start)
    (commit,) = [change for change in changes if isinstance(change, Commit)]
    assert lsn is not None and commit.position.text == lsn[0]  # nothing written since
    assert all(change.position > start for change in changes)
