"""Awkward names where connectors read SQL text: MariaDB DDL in the binlog, Oracle SQL_REDO,
and each product's mapping of canonical names (cdc_core.names) to its own."""

from __future__ import annotations

import pytest

from connectors.hana.sql import split_table as hana_split
from connectors.mariadb.binlog.schema_tracker import DdlChange, parse_ddl, qualify
from connectors.oracle.logminer.redo_parser import Text, parse_redo
from connectors.oracle.sql import split_table as oracle_split


@pytest.mark.parametrize(
    ("sql", "table"),
    [
        ("`order-lines`", "db.order-lines"),
        ("`my table`", "db.my table"),
        ("`a``b`", "db.a`b"),
        ('`a"b`', 'db."a""b"'),
        ("`v1.2`", 'db."v1.2"'),
        ("`select`", "db.select"),
        ("données", "db.données"),
        ("`$x#y`", "db.$x#y"),
        ("`other db` . `t`", "other db.t"),
        ("`s.x`.`t.y`", '"s.x"."t.y"'),
        ("1abc", "db.1abc"),
    ],
)
def test_mariadb_sql_names_become_canonical(sql: str, table: str) -> None:
    assert qualify(sql, "db") == table
    assert parse_ddl(f"TRUNCATE TABLE {sql}", "db") == DdlChange("truncate", (table,))


def test_mariadb_ddl_keeps_comment_markers_inside_names() -> None:
    change = parse_ddl("ALTER TABLE /* x */ `a#b -- c` ADD COLUMN `d#e` INT # trailing", "db")
    assert change == DdlChange("alter", ("db.a#b -- c",), specification=" ADD COLUMN `d#e` INT")
    renamed = parse_ddl("RENAME TABLE `a.b` TO `x``y`, `p q` TO db2.`r s`", "db")
    assert renamed == DdlChange("rename", ('db."a.b"', "db.p q"), ("db.x`y", "db2.r s"))
    dropped = parse_ddl("DROP TABLE IF EXISTS `select`, `my table`", "db")
    assert dropped == DdlChange("drop", ("db.select", "db.my table"))


def test_mariadb_index_statements_are_alters_of_their_table() -> None:
    """A UNIQUE key of NOT NULL columns can become the key a table without a primary key is
    located by, so index statements reach the table's DDL handling."""
    created = parse_ddl("CREATE UNIQUE INDEX `u x` USING BTREE ON `a b` (k)", "db")
    assert created == DdlChange("alter", ("db.a b",), specification="ADD UNIQUE INDEX")
    plain = parse_ddl("CREATE INDEX IF NOT EXISTS ix ON db2.t (k)", "db")
    assert plain == DdlChange("alter", ("db2.t",), specification="ADD INDEX")
    dropped = parse_ddl("DROP INDEX IF EXISTS `u x` ON `a b`", "db")
    assert dropped == DdlChange("alter", ("db.a b",), specification="DROP INDEX `u x`")


def test_oracle_redo_keeps_quoted_lower_case_and_awkward_names() -> None:
    sql = (
        'insert into "SHOP"."order lines"("id","my col","a.b","données")'
        " values ('1','x','y','z');"
    )
    statement = parse_redo(sql)
    assert (statement.owner, statement.table) == ("SHOP", "order lines")
    assert [name for name, _ in statement.values] == ["id", "my col", "a.b", "données"]
    assert statement.values[0][1] == Text("1")


@pytest.mark.parametrize(
    ("canonical", "oracle"),
    [
        ("shop.orders", ("SHOP", "ORDERS")),
        ("shop.my table", ("SHOP", "my table")),
        ('shop."v1.2"', ("SHOP", "v1.2")),
        ("shop.données", ("SHOP", "données")),
        ("orders", ("OWNER", "ORDERS")),
    ],
)
def test_oracle_and_hana_fold_only_names_they_would_take_unquoted(
    canonical: str, oracle: tuple[str, str]
) -> None:
    assert oracle_split(canonical, "owner") == oracle
    assert hana_split(canonical, "owner") == oracle
