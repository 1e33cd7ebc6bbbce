"""SQLite as a source: declared types decide logical types; stored values are converted."""

from __future__ import annotations

import datetime as dt
import decimal
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from cdc_core.errors import TerminalError
from connectors.model import POSITION_COLUMN, Partition
from connectors.registry import connector_for
from connectors.sqlite.connector import SQLiteConnector
from merkle import types as lt


@pytest.fixture
def database(tmp_path: Path) -> str:
    path = tmp_path / "src.db"
    with closing(sqlite3.connect(path)) as connection:
        connection.execute(
            "CREATE TABLE t (id INTEGER PRIMARY KEY, amount DECIMAL(10,2), at DATETIME,"
            " day DATE, ok BOOLEAN, doc JSON, ratio REAL, name VARCHAR(10), raw BLOB, odd NUMERIC)"
        )
        connection.executemany(
            "INSERT INTO t VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    i,
                    i / 10,
                    f"2024-01-01 00:00:0{i % 10}.250000",
                    "1969-12-31",
                    i % 2,
                    '{"a": 1}',
                    0.1,
                    f"n{i}",
                    b"\x00\x01",
                    5,
                )
                for i in range(1, 21)
            ],
        )
        connection.commit()
    return f"sqlite:///{path}"


def test_declared_types_map_to_logical_types(database: str) -> None:
    schema = connector_for(database).reflect("t")
    assert schema.primary_key == ("id",)
    assert {c.name: c.ltype for c in schema.columns} == {
        "id": lt.IntegerType(),
        "amount": lt.DecimalType(10, 2),
        "at": lt.TimestampType(6),
        "day": lt.DateType(),
        "ok": lt.BooleanType(),
        "doc": lt.JsonType(),
        "ratio": lt.FloatType(64),
        "name": lt.StringType(),
        "raw": lt.BytesType(),
        "odd": None,
    }


def test_values_are_converted_to_their_declared_meaning(database: str) -> None:
    connector = connector_for(database)
    schema = connector.reflect("t")
    columns = ["id", "amount", "at", "day", "ok", "doc", "raw"]
    rows = [
        r
        for b in connector.read_partition(schema, columns, Partition(0, "id", 3, 5))
        for r in b.to_pylist()
    ]
    assert [r["id"] for r in rows] == [3, 4]
    assert rows[0]["amount"] == decimal.Decimal("0.30")  # stored as REAL 0.3
    assert rows[0]["at"] == dt.datetime(2024, 1, 1, 0, 0, 3, 250000)
    assert rows[0]["day"] == dt.date(1969, 12, 31)
    assert rows[0]["ok"] is True and rows[1]["ok"] is False
    assert rows[0]["raw"] == b"\x00\x01"


def test_missing_table_and_unreadable_column(database: str) -> None:
    connector = connector_for(database)
    with pytest.raises(TerminalError, match="table 'nope' not found"):
        connector.reflect("nope")
    with pytest.raises(TerminalError, match="column odd"):
        connector.arrow_schema(connector.reflect("t"), ["odd"])


def test_the_base_arrow_schema_is_each_columns_arrow_type_then_the_position(
    tmp_path: Path,
) -> None:
    """``Connector.arrow_schema`` (one for every product): the columns asked for, in that
    order, each as the product's ``arrow_type`` reads it, then the position column."""
    import pyarrow as pa

    database = tmp_path / "s.db"
    with sqlite3.connect(database) as connection:
        connection.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, amount REAL)")
    connector = SQLiteConnector(f"sqlite:///{database}")
    table = connector.reflect("t")

    schema = connector.arrow_schema(table, ["name", "id"])

    assert schema.names == ["name", "id", POSITION_COLUMN]
    assert schema.field("name").type == connector.arrow_type(table, "name")
    assert schema.field("id").type == connector.arrow_type(table, "id")
    assert schema.field(POSITION_COLUMN).type == pa.int64()
