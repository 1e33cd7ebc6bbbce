"""Oracle snapshot reads: type mapping and the SQL sent (no server here), plus live tests
that run only when REPLCHECK_ORACLE_URL is set."""

from __future__ import annotations

import os

import pytest

from cdc_core.capture.source import LOCATOR_COLUMN
from cdc_core.errors import ConfigError
from connectors.model import Partition, Snapshot
from connectors.oracle import sql
from connectors.oracle.types import OracleColumn, logical_type
from connectors.registry import connector_for
from merkle import types as lt


@pytest.mark.parametrize(
    ("data_type", "precision", "scale", "expected"),
    [
        ("NUMBER", 10, 0, lt.IntegerType()),
        ("NUMBER", 18, 0, lt.IntegerType()),
        ("NUMBER", 19, 0, lt.DecimalType(19, 0)),
        ("NUMBER", 12, 2, lt.DecimalType(12, 2)),
        ("NUMBER", None, None, lt.DecimalType()),
        ("FLOAT", 126, None, lt.DecimalType()),
        ("BINARY_FLOAT", None, None, lt.FloatType(32)),
        ("BINARY_DOUBLE", None, None, lt.FloatType(64)),
        ("VARCHAR2", None, None, lt.StringType()),
        ("NCLOB", None, None, lt.StringType()),
        ("CHAR", None, None, lt.StringType(padded=True)),
        ("RAW", None, None, lt.BytesType()),
        ("DATE", None, None, lt.TimestampType(0)),
        ("TIMESTAMP(3)", None, 3, lt.TimestampType(3)),
        ("TIMESTAMP(9)", None, 9, lt.TimestampType(6)),
        ("TIMESTAMP(6) WITH TIME ZONE", None, 6, lt.TimestampTzType(6)),
        ("TIMESTAMP(0) WITH LOCAL TIME ZONE", None, 0, lt.TimestampTzType(0)),
        ("INTERVAL DAY(2) TO SECOND(6)", None, None, lt.IntervalType()),
        ("XMLTYPE", None, None, None),
    ],
)
def test_dictionary_types_map_to_logical_types(
    data_type: str, precision: int | None, scale: int | None, expected: object
) -> None:
    assert logical_type(OracleColumn("C", data_type, precision, scale)) == expected


def test_flashback_select_reads_one_scn_with_named_binds() -> None:
    where, params = Partition(1, "ID", 100, 200).predicate(sql.quote, "%s")
    where, binds = sql.numbered_binds(where, params)
    text = sql.flashback_select(
        "SHOP", "ORDERS", [("ID", lt.IntegerType()), ("PLACED", lt.TimestampTzType(6))], where
    )
    assert text == (
        'SELECT "ID", SYS_EXTRACT_UTC("PLACED") AS "PLACED" FROM "SHOP"."ORDERS"'
        ' AS OF SCN :scn WHERE "ID" >= :p1 AND "ID" < :p2'
    )
    assert binds == {"p1": 100, "p2": 200}


def test_the_partition_open_below_also_reads_null_keys() -> None:
    first, last = Partition(0, "ID", None, 100), Partition(1, "ID", 100, None)

    assert first.predicate(sql.quote, "%s") == (' WHERE ("ID" < %s OR "ID" IS NULL)', [100])
    assert last.predicate(sql.quote, "%s") == (' WHERE "ID" >= %s', [100])


def test_snapshot_rows_carry_the_rowid_logminer_locates_them_by() -> None:
    text = sql.flashback_select(
        "SHOP", "ORDERS", [("ID", lt.IntegerType()), (LOCATOR_COLUMN, None)], ""
    )

    assert text == (
        'SELECT "ID", ROWIDTOCHAR(ROWID) AS "_locator" FROM "SHOP"."ORDERS" AS OF SCN :scn'
    )


def test_key_sets_and_identifiers() -> None:
    where, params = Partition(-1, key_columns=("A", 'B"X'), keys=((1, "x"), (2, "y"))).predicate(
        sql.quote, "%s"
    )
    where, binds = sql.numbered_binds(where, params)
    assert where == ' WHERE ("A", "B""X") IN ((:p1, :p2), (:p3, :p4))'
    assert binds == {"p1": 1, "p2": "x", "p3": 2, "p4": "y"}
    assert sql.split_table("shop.orders", "APP") == ("SHOP", "ORDERS")
    assert sql.split_table("orders", "app") == ("APP", "ORDERS")


def test_a_url_without_service_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="service_name"):
        connector_for("oracle+oracledb://scott@db.example").reflect("t")


@pytest.mark.oracle
def test_live_reflection_and_flashback_read() -> None:
    url = os.environ["REPLCHECK_ORACLE_URL"]
    connector = connector_for(url, os.environ.get("REPLCHECK_ORACLE_PASSWORD"))
    table = os.environ.get("REPLCHECK_ORACLE_TABLE", "DUAL")
    schema = connector.reflect(table)
    with connector.shared_snapshot() as snapshot:
        assert isinstance(snapshot, Snapshot) and snapshot.position
        columns = [c.name for c in schema.columns if c.ltype is not None]
        batches = list(connector.read_partition(schema, columns, Partition(0), snapshot))
    assert all(b.num_columns == len(columns) + 1 for b in batches)
