"""The SQL the HANA snapshot reader sends, as pure functions (tested without a server).

A partition reads in its own transaction at isolation level REPEATABLE READ, which gives
the whole transaction one MVCC snapshot (SAP HANA SQL Reference, "SET TRANSACTION"); the
snapshot's commit ID (``CURRENT_MVCC_SNAPSHOT_TIMESTAMP()``) is the partition's position.
HANA cannot share a snapshot between sessions, so each partition reports its own.
Parameters use hdbcli's ``qmark`` style.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from cdc_core import names
from connectors.model import Partition

BEGIN_SNAPSHOT = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"
SNAPSHOT_POSITION = "SELECT CURRENT_MVCC_SNAPSHOT_TIMESTAMP() FROM DUMMY"
CURRENT_SCHEMA = "SELECT CURRENT_SCHEMA FROM DUMMY"
COLUMNS = (
    "SELECT COLUMN_NAME, DATA_TYPE_NAME, LENGTH, SCALE, IS_NULLABLE FROM SYS.TABLE_COLUMNS"
    " WHERE SCHEMA_NAME = ? AND TABLE_NAME = ? ORDER BY POSITION"
)
PRIMARY_KEY = (
    "SELECT COLUMN_NAME FROM SYS.CONSTRAINTS"
    " WHERE SCHEMA_NAME = ? AND TABLE_NAME = ? AND IS_PRIMARY_KEY = 'TRUE' ORDER BY POSITION"
)


def quote(identifier: str) -> str:
    """A quoted identifier (exact case), as the catalog stores it."""
    return '"' + identifier.replace('"', '""') + '"'


# What HANA accepts as an undelimited identifier, which it stores in upper case (SAP HANA
# SQL Reference, "Identifiers").
_UNDELIMITED = re.compile(r"[A-Za-z_][A-Za-z0-9_#$]*")


def split_table(table: str, default_schema: str) -> tuple[str, str]:
    """Canonical ``schema.table`` (``cdc_core.names``) -> the catalog's (schema, table).

    A part HANA would take undelimited is upper-cased, as HANA does; any other part is
    taken exactly.
    """
    schema, name = names.split_table(table, default_schema)
    return _catalog_case(schema), _catalog_case(name)


def _catalog_case(part: str) -> str:
    return part.upper() if _UNDELIMITED.fullmatch(part) else part


def snapshot_select(schema: str, table: str, columns: Sequence[str], where: str) -> str:
    """``SELECT cols FROM "SCHEMA"."TABLE" [WHERE ...]``, run inside the snapshot."""
    select = ", ".join(quote(name) for name in columns)
    return f"SELECT {select} FROM {quote(schema)}.{quote(table)}{where}"


def key_range(schema: str, table: str, column: str) -> str:
    """Min and max of an integer key column."""
    quoted = quote(column)
    return f"SELECT MIN({quoted}), MAX({quoted}) FROM {quote(schema)}.{quote(table)}"


def partition_select(
    schema: str, table: str, columns: Sequence[str], partition: Partition
) -> tuple[str, list[object]]:
    """The SELECT of one partition and its ``?`` parameters."""
    where, params = partition.predicate(quote, "?")
    return snapshot_select(schema, table, columns, where), params
