"""HANA against a real server: runs only when REPLCHECK_HANA_URL is set (a SQLAlchemy URL,
``hana+hdbcli://user@host:port/?currentSchema=...``; the password in
REPLCHECK_HANA_PASSWORD or the URL). Creates one table in the current schema and drops it."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import uuid
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest

from cdc_core.errors import TerminalError
from connectors.hana.connector import HanaConnector
from connectors.model import POSITION_COLUMN, Partition
from merkle import types as lt

pytestmark = [pytest.mark.hana, pytest.mark.integration]

ROWS = [
    (1, Decimal("12.50"), "Grüße", True, dt.date(1969, 12, 31), dt.time(23, 59, 59),
     dt.datetime(2025, 3, 1, 12, 0, 0, 123456), b"\x00\xff"),
    (2, Decimal("-0.01"), "", False, dt.date(2000, 2, 29), dt.time(0, 0, 0),
     dt.datetime(1970, 1, 1), b""),
    (3, None, None, None, None, None, None, None),
]  # fmt: skip
COLUMNS = ("ID", "AMOUNT", "NAME", "ACTIVE", "BORN", "AT_TIME", "PLACED", "RAW")
DDL = (
    "ID BIGINT PRIMARY KEY, AMOUNT DECIMAL(12,2), NAME NVARCHAR(40), ACTIVE BOOLEAN,"
    " BORN DATE, AT_TIME TIME, PLACED TIMESTAMP, RAW VARBINARY(16)"
)


@pytest.fixture(scope="module")
def connector() -> HanaConnector:
    return HanaConnector(
        os.environ["REPLCHECK_HANA_URL"], os.environ.get("REPLCHECK_HANA_PASSWORD")
    )


@pytest.fixture(scope="module")
def table(connector: HanaConnector) -> Iterator[str]:
    from hdbcli import dbapi

    name = f"REPLCHECK_{uuid.uuid4().hex[:10].upper()}"
    with contextlib.closing(dbapi.connect(**connector.connect_args())) as conn:
        cursor = conn.cursor()
        cursor.execute(f'CREATE COLUMN TABLE "{name}" ({DDL})')
        cursor.executemany(f'INSERT INTO "{name}" VALUES ({", ".join("?" * len(COLUMNS))})', ROWS)
        conn.commit()
        try:
            yield name
        finally:
            cursor.execute(f'DROP TABLE "{name}"')
            conn.commit()


def test_reflection_finds_types_and_primary_key(connector: HanaConnector, table: str) -> None:
    schema = connector.reflect(table)
    assert schema.primary_key == ("ID",)
    assert [c.ltype for c in schema.columns] == [
        lt.IntegerType(),
        lt.DecimalType(12, 2),
        lt.StringType(),
        lt.BooleanType(),
        lt.DateType(),
        lt.TimeType(0),
        lt.TimestampType(6),
        lt.BytesType(),
    ]
    assert connector.key_range(table, "ID") == (1, 3)


def _read(connector: HanaConnector, table: str, partition: Partition) -> list[dict[str, Any]]:
    schema = connector.reflect(table)
    batches = list(connector.read_partition(schema, COLUMNS, partition))
    return [row for batch in batches for row in batch.to_pylist()]


def test_a_partition_reads_exact_values_at_one_commit_id(
    connector: HanaConnector, table: str
) -> None:
    rows = sorted(_read(connector, table, Partition(0, "ID", 1, 3)), key=lambda r: r["ID"])
    assert [r["ID"] for r in rows] == [1, 2]
    first = rows[0]
    assert (first["AMOUNT"], first["NAME"], first["ACTIVE"]) == (Decimal("12.50"), "Grüße", True)
    assert first["AT_TIME"] == 86_399_000_000  # microseconds since midnight
    assert first["PLACED"] == dt.datetime(2025, 3, 1, 12, 0, 0, 123456)
    assert first["RAW"] == b"\x00\xff"
    positions = {r[POSITION_COLUMN] for r in rows}
    assert len(positions) == 1 and positions.pop() > 0


def test_a_key_set_reads_only_its_keys(connector: HanaConnector, table: str) -> None:
    rows = _read(connector, table, Partition(-1, key_columns=("ID",), keys=((3,), (9,))))
    assert [(r["ID"], r["NAME"]) for r in rows] == [(3, None)]


def test_a_missing_table_is_named(connector: HanaConnector) -> None:
    with pytest.raises(TerminalError, match="table 'REPLCHECK_NO_SUCH_TABLE' not found"):
        connector.reflect("REPLCHECK_NO_SUCH_TABLE")
