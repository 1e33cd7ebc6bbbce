"""A table with a column of each type the test encoder writes beyond the integers, DOUBLE
and VARCHAR, and one row of it (``test_binlog_encoder``, ``test_binlog_stream``)."""

from __future__ import annotations

import datetime as dt
import decimal

from tests.connectors.mysql.binlog_encoder import Column, Table

TYPED = Table(
    109,
    "shop",
    "typed",
    (
        Column("id", "int", nullable=False),
        Column("price", "decimal", precision=12, scale=3),
        Column("born", "date"),
        Column("seen", "datetime", fsp=6),
        Column("stamp", "timestamp", fsp=3),
        Column("doc", "json"),
        Column("size", "enum", values=("s", "m", "l")),
        Column("tags", "set", values=("a", "b", "c")),
        Column("data", "blob"),
        Column("note", "varchar", max_length=40),
    ),
    ("id",),
)
TYPED_ROW = {
    "id": 1,
    "price": decimal.Decimal("-123456789.125"),
    "born": dt.date(1999, 12, 31),
    "seen": dt.datetime(2024, 2, 29, 23, 59, 58, 123456),
    "stamp": dt.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=dt.UTC),
    "doc": '{"a": [1, true, null], "name": "é", "n": 70000}',
    "size": "m",
    "tags": "a,c",
    "data": b"\x00\xffbytes",
    "note": "plain",
}
