"""The SQL the HANA connector sends and the connection it asks for (no server needed)."""

from __future__ import annotations

import pytest

from cdc_core.errors import ConfigError
from connectors.hana import sql
from connectors.hana.connector import HanaConnector
from connectors.model import Partition
from connectors.registry import connector_for


def test_the_connector_is_registered_for_hana_urls() -> None:
    assert isinstance(connector_for("hana+hdbcli://app@db.example:30015"), HanaConnector)


def test_reflection_reads_the_catalog_with_qmark_parameters() -> None:
    assert sql.COLUMNS == (
        "SELECT COLUMN_NAME, DATA_TYPE_NAME, LENGTH, SCALE, IS_NULLABLE FROM SYS.TABLE_COLUMNS"
        " WHERE SCHEMA_NAME = ? AND TABLE_NAME = ? ORDER BY POSITION"
    )
    assert sql.PRIMARY_KEY == (
        "SELECT COLUMN_NAME FROM SYS.CONSTRAINTS WHERE SCHEMA_NAME = ? AND TABLE_NAME = ?"
        " AND IS_PRIMARY_KEY = 'TRUE' ORDER BY POSITION"
    )


def test_a_snapshot_is_a_repeatable_read_transaction_at_its_commit_id() -> None:
    assert sql.BEGIN_SNAPSHOT == "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"
    assert sql.SNAPSHOT_POSITION == "SELECT CURRENT_MVCC_SNAPSHOT_TIMESTAMP() FROM DUMMY"


def test_a_range_partition_reads_its_key_range() -> None:
    text, params = sql.partition_select(
        "SHOP", "ORDERS", ["ID", "PLACED"], Partition(1, "ID", 100, 200)
    )
    assert text == ('SELECT "ID", "PLACED" FROM "SHOP"."ORDERS" WHERE "ID" >= ? AND "ID" < ?')
    assert params == [100, 200]


def test_open_ended_and_whole_table_partitions() -> None:
    text, params = sql.partition_select("SHOP", "ORDERS", ["ID"], Partition(0, "ID", None, 100))
    assert (text, params) == (
        'SELECT "ID" FROM "SHOP"."ORDERS" WHERE ("ID" < ? OR "ID" IS NULL)',
        [100],
    )
    text, params = sql.partition_select("SHOP", "ORDERS", ["ID"], Partition(0))
    assert (text, params) == ('SELECT "ID" FROM "SHOP"."ORDERS"', [])


def test_a_key_set_partition_reads_exactly_those_keys() -> None:
    partition = Partition(-1, key_columns=("A", 'B"X'), keys=((1, "x"), (2, "y")))
    text, params = sql.partition_select("SHOP", "T", ["A", 'B"X'], partition)
    assert text == 'SELECT "A", "B""X" FROM "SHOP"."T" WHERE ("A", "B""X") IN ((?, ?), (?, ?))'
    assert params == [1, "x", 2, "y"]


def test_identifiers_and_key_range() -> None:
    assert sql.split_table("shop.orders", "APP") == ("SHOP", "ORDERS")
    assert sql.split_table("orders", "app") == ("APP", "ORDERS")
    assert (
        sql.key_range("SHOP", "ORDERS", "ID") == 'SELECT MIN("ID"), MAX("ID") FROM "SHOP"."ORDERS"'
    )


@pytest.mark.parametrize(
    ("url", "password", "expected"),
    [
        (
            "hana+hdbcli://app@db.example",
            "secret",
            {"address": "db.example", "port": 30015, "user": "app", "password": "secret"},
        ),
        (
            "hana+hdbcli://app:inurl@db.example:39041/H01?currentSchema=SHOP&encrypt=true",
            None,
            {
                "address": "db.example",
                "port": 39041,
                "user": "app",
                "password": "inurl",
                "databaseName": "H01",
                "currentSchema": "SHOP",
                "encrypt": "true",
            },
        ),
        (
            "hana://app@db.example/H01",
            "secret",
            {
                "address": "db.example",
                "port": 30013,
                "user": "app",
                "password": "secret",
                "databaseName": "H01",
            },
        ),
    ],
)
def test_the_url_becomes_hdbcli_connect_arguments(
    url: str, password: str | None, expected: dict[str, object]
) -> None:
    assert HanaConnector(url, password).connect_args() == expected


def test_a_url_without_host_is_a_config_error_that_shows_the_form() -> None:
    with pytest.raises(ConfigError, match=r"hana\+hdbcli://user@host:30015"):
        HanaConnector("hana+hdbcli://app@/H01", "secret").reflect("T")


def test_messages_name_the_server_but_never_the_password() -> None:
    connector = HanaConnector("hana+hdbcli://app:topsecret@db.example:30015")
    assert connector.where == "HANA db.example:30015"
