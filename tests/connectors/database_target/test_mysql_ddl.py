"""The tables a database target creates on MySQL 8 itself, as generated SQL (no MySQL server
runs here): the statements are MariaDB's but for JSON. MySQL's JSON type rewrites a document
(keys reordered, duplicate keys dropped, numbers beyond a double rounded), so a JSON column
is LONGTEXT checked by ``json_valid``, which is what MariaDB's JSON is; the validator reads
both as JSON (``MariaDBConnector._json_columns``)."""

from __future__ import annotations

from sqlalchemy.dialects import mysql
from sqlalchemy.schema import CreateTable

from connectors.database_target.types import column_type, json_texts, target_table
from connectors.model import SourceColumn
from merkle import types as lt

COLUMNS = [
    SourceColumn("id", "int", lt.IntegerType(), False),
    SourceColumn("doc", "longtext", lt.JsonType()),
    SourceColumn("name", "varchar(20)", lt.StringType()),
]


def _ddl(product: str) -> str:
    types = {c.name: column_type(c, "shop.t", product, c.name == "id") for c in COLUMNS}
    table = target_table("t", "shop", ("id",), types, json_texts(COLUMNS, product))
    dialect = mysql.dialect()
    dialect.is_mariadb = product == "mariadb"  # type: ignore[misc]
    return " ".join(str(CreateTable(table).compile(dialect=dialect)).split())


def test_json_on_mysql_is_text_checked_by_json_valid() -> None:
    ddl = _ddl("mysql")
    assert "doc LONGTEXT" in ddl and "CHECK (json_valid(`doc`))" in ddl, ddl
    assert "name LONGTEXT" in ddl and ddl.count("CHECK") == 1, ddl


def test_mariadb_keeps_its_json_type() -> None:
    ddl = _ddl("mariadb")
    assert "doc JSON" in ddl and "CHECK" not in ddl, ddl
