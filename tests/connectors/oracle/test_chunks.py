"""Chunked flashback reads for the table refresh (``read_chunk``): the SQL and binds sent,
and chunks assembled from a recorded session -- each at its own SCN, in key order, resuming
after the last key, and a table without a key read whole."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from cdc_core.capture.position import Position
from cdc_core.capture.source import LOCATOR_COLUMN, ReadsChunks
from cdc_core.errors import ContractError
from connectors.oracle import sql
from connectors.oracle.connector import OracleConnector
from connectors.oracle.snapshot import OracleSnapshotReader
from merkle import types as lt
from tests.connectors.oracle.recorded_session import Exchange, RecordedSession

PLACED = dt.datetime(2026, 5, 1, 9, 59)
ORDERS = [
    ("ID", "NUMBER", 10, 0, "N"), ("CUSTOMER", "VARCHAR2", None, None, "Y"),
    ("AMOUNT", "NUMBER", 12, 2, "Y"), ("PLACED", "DATE", None, None, "Y"),
]  # fmt: skip
SELECT = 'SELECT "ID", "CUSTOMER", "AMOUNT", "PLACED", ROWIDTOCHAR(ROWID) AS "_locator"'
OWNER: dict[str, object] = {"owner": "SHOP", "name": "ORDERS"}


def test_one_key_column_reads_above_the_last_key_in_key_order() -> None:
    columns = [("ID", lt.IntegerType()), ("AT", lt.TimestampTzType(6))]
    text, binds = sql.chunk_select("SHOP", "ORDERS", columns, ("ID",), (41,), 500)
    assert text == (
        'SELECT "ID", SYS_EXTRACT_UTC("AT") AS "AT" FROM "SHOP"."ORDERS" AS OF SCN :scn'
        ' WHERE "ID" > :k1 ORDER BY "ID" FETCH FIRST :limit ROWS ONLY'
    )
    assert binds == {"k1": 41, "limit": 500}


def test_a_composite_key_is_expanded_since_oracle_cannot_compare_value_lists() -> None:
    after = ("EU", dt.datetime(2026, 1, 1), 7)
    text, binds = sql.chunk_select("S", "T", [("A", None)], ("R", "D", "N"), after, 10)
    assert text == (
        'SELECT "A" FROM "S"."T" AS OF SCN :scn WHERE "R" >= :k1 AND (("R" > :k1)'
        ' OR ("R" = :k1 AND "D" > :k2) OR ("R" = :k1 AND "D" = :k2 AND "N" > :k3))'
        ' ORDER BY "R", "D", "N" FETCH FIRST :limit ROWS ONLY'
    )
    assert binds == {"k1": "EU", "k2": dt.datetime(2026, 1, 1), "k3": 7, "limit": 10}


def test_the_first_chunk_has_no_lower_bound_and_bad_requests_are_refused() -> None:
    text, binds = sql.chunk_select("S", "T", [("A", None)], ("A",), None, 1)
    assert (
        text == 'SELECT "A" FROM "S"."T" AS OF SCN :scn ORDER BY "A" FETCH FIRST :limit ROWS ONLY'
    )
    assert binds == {"limit": 1}
    with pytest.raises(ContractError, match="at least one row"):
        sql.chunk_select("S", "T", [("A", None)], ("A",), None, 0)
    with pytest.raises(ContractError, match="has 2 values, not 1"):
        sql.after_key(("A", "B"), (1,))


class RecordedOracle(OracleConnector):
    """An Oracle connector whose connections are one recorded session."""

    def __init__(self, session: RecordedSession) -> None:
        super().__init__("oracle+oracledb://shop@db.example:1521/?service_name=ORCL")
        self.session = session

    def connect(self) -> RecordedSession:
        return self.session


def _reflect(key: list[tuple[str]]) -> list[Exchange]:
    return [Exchange(sql.COLUMNS, OWNER, ORDERS), Exchange(sql.PRIMARY_KEY, OWNER, key)]


def _order(key: int, rowid: str) -> tuple[object, ...]:
    return (Decimal(key), f"c{key}", Decimal(f"{key}.50"), PLACED, rowid)


def _row(key: int, rowid: str) -> dict[str, object]:
    return {"ID": key, "CUSTOMER": f"c{key}", "AMOUNT": Decimal(f"{key}.50"), "PLACED": PLACED,
            LOCATOR_COLUMN: rowid}  # fmt: skip


def _chunk_read(
    scn: int, limit: int, after: int | None, rows: list[tuple[object, ...]]
) -> list[Exchange]:
    """The exchanges of one chunk: reflection, the SCN, binary order, the chunk query."""
    binds: dict[str, object] = {} if after is None else {"k1": after}
    where = "" if after is None else ' WHERE "ID" > :k1'
    query = f'{SELECT} FROM "SHOP"."ORDERS" AS OF SCN :scn{where}'
    query += ' ORDER BY "ID" FETCH FIRST :limit ROWS ONLY'
    return [
        *_reflect([("ID",)]),
        Exchange(sql.CURRENT_SCN, {}, [(scn,)]),
        Exchange(sql.BINARY_ORDER[0]),
        Exchange(query, binds | {"limit": limit, "scn": scn}, rows),
    ]


def test_chunks_resume_after_the_last_key_each_at_its_own_scn() -> None:
    session = RecordedSession([
        *_chunk_read(5000, 2, None, [_order(1, "AAAA"), _order(2, "AAAB")]),
        *_chunk_read(5007, 2, 2, [_order(3, "AAAC")]),
    ])  # fmt: skip
    reader = OracleSnapshotReader(RecordedOracle(session))
    assert isinstance(reader, ReadsChunks)

    first = reader.read_chunk("SHOP.ORDERS", None, 2)
    second = reader.read_chunk("SHOP.ORDERS", first.last_key, 2)

    assert session.sent == session.expected()
    assert (first.position, first.last_key) == (Position(5000, "5000"), (2,))
    assert (second.position, second.last_key) == (Position(5007, "5007"), None)
    rows = [row for batch in first.snapshot.batches for row in batch.to_pylist()]
    assert rows == [_row(1, "AAAA"), _row(2, "AAAB")]
    assert first.snapshot.description.key == ("ID",)
    assert first.snapshot.description.schema.names == ["ID", "CUSTOMER", "AMOUNT", "PLACED"]
    assert [r["ID"] for b in second.snapshot.batches for r in b.to_pylist()] == [3]


def test_a_full_chunk_at_the_tables_end_is_followed_by_an_empty_one() -> None:
    session = RecordedSession([
        *_chunk_read(10, 1, None, [_order(1, "AAAA")]),
        *_chunk_read(11, 1, 1, []),
    ])  # fmt: skip
    reader = OracleSnapshotReader(RecordedOracle(session))
    first = reader.read_chunk("SHOP.ORDERS", None, 1)
    last = reader.read_chunk("SHOP.ORDERS", first.last_key, 1)
    assert session.sent == session.expected()
    assert (first.last_key, last.last_key) == ((1,), None)
    assert list(last.snapshot.batches) == []


def test_a_table_without_a_key_is_one_chunk_read_whole_at_one_scn() -> None:
    whole = f'{SELECT} FROM "SHOP"."ORDERS" AS OF SCN :scn'
    session = RecordedSession([
        *_reflect([]),
        Exchange(sql.CURRENT_SCN, {}, [(900,)]),
        Exchange(whole, {"scn": 900}, [_order(1, "AAAA"), _order(1, "AAAB")]),
    ])  # fmt: skip
    reader = OracleSnapshotReader(RecordedOracle(session))
    chunk = reader.read_chunk("SHOP.ORDERS", None, 1)
    rows = [row for batch in chunk.snapshot.batches for row in batch.to_pylist()]
    assert session.sent == session.expected()
    assert (chunk.position, chunk.last_key, chunk.snapshot.description.key) == (
        Position(900, "900"), None, (),
    )  # fmt: skip
    assert [row[LOCATOR_COLUMN] for row in rows] == ["AAAA", "AAAB"]  # duplicates, by ROWID
    with pytest.raises(ContractError, match="no key to read after"):
        OracleSnapshotReader(RecordedOracle(RecordedSession(_reflect([])))).read_chunk(
            "SHOP.ORDERS", ("AAAB",), 1
        )
