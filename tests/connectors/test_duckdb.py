"""DuckDB as a source: reflection to logical types, key ranges, partitioned Arrow reads."""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path

import duckdb
import pytest

from cdc_core.errors import ConfigError, TerminalError
from connectors.model import Partition
from connectors.registry import connector_for
from merkle import types as lt


@pytest.fixture
def database(tmp_path: Path) -> str:
    path = tmp_path / "src.duckdb"
    with duckdb.connect(str(path)) as connection:
        connection.execute(
            'CREATE TABLE t (id INTEGER PRIMARY KEY, amount DECIMAL(10,2), "at" TIMESTAMP,'
            " zoned TIMESTAMPTZ, ratio REAL, doc JSON, ref UUID, big UBIGINT, t TIME,"
            " span INTERVAL, ms TIMESTAMP_MS)"
        )
        connection.execute("SET TimeZone = 'UTC'")
        connection.execute(
            "INSERT INTO t SELECT i, i / 100, TIMESTAMP '2024-01-01' + INTERVAL (i) SECOND,"
            " TIMESTAMPTZ '2024-01-01 00:00:00+02', 0.1, '{\"a\": 1}',"
            " 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 18446744073709551615, TIME '12:00:00.5',"
            " INTERVAL 1 DAY, TIMESTAMP '2024-01-01 00:00:00.123' FROM range(1, 101) r(i)"
        )
    return f"duckdb:///{path}"


def test_reflection_maps_native_types(database: str) -> None:
    schema = connector_for(database).reflect("t")
    types = {c.name: c.ltype for c in schema.columns}
    assert schema.primary_key == ("id",)
    assert types == {
        "id": lt.IntegerType(),
        "amount": lt.DecimalType(10, 2),
        "at": lt.TimestampType(6),
        "zoned": lt.TimestampTzType(6),
        "ratio": lt.FloatType(32),
        "doc": lt.JsonType(),
        "ref": lt.UuidType(),
        "big": lt.IntegerType(),
        "t": lt.TimeType(6),
        "span": None,
        "ms": lt.TimestampType(3),
    }


def test_partitions_read_exactly_their_range(database: str) -> None:
    connector = connector_for(database)
    schema = connector.reflect("t")
    assert connector.key_range("t", "id") == (1, 100)
    columns = ["id", "amount", "zoned", "big", "t", "ref"]
    rows = [
        row
        for batch in connector.read_partition(schema, columns, Partition(0, "id", 10, 20))
        for row in batch.to_pylist()
    ]
    assert [r["id"] for r in rows] == list(range(10, 20))
    first = rows[0]
    assert first["amount"] == decimal.Decimal("0.10")
    assert first["zoned"] == dt.datetime(2023, 12, 31, 22, 0, tzinfo=dt.UTC)
    assert first["big"] == decimal.Decimal(2**64 - 1)
    assert first["t"] == 43_200_500_000  # microseconds since midnight
    assert first["ref"] == "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"


def test_missing_table_and_bad_url_are_clear(database: str, tmp_path: Path) -> None:
    with pytest.raises(TerminalError, match="table 'nope' not found"):
        connector_for(database).reflect("nope")
    with pytest.raises(ConfigError, match="no connector for URL scheme 'oracle9'"):
        connector_for("oracle9://x")
    with pytest.raises(TerminalError, match="cannot open DuckDB file"):
        connector_for(f"duckdb:///{tmp_path}/missing/dir/x.duckdb").reflect("t")
