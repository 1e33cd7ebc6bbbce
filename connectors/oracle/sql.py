"""The SQL the Oracle snapshot reader sends, as pure functions (tested without a server).

Reads are flashback queries, ``SELECT ... FROM owner.table AS OF SCN :scn``, so every
partition sees the database exactly as of one SCN, shared by all of them without holding a
transaction open (Oracle Database Development Guide, "Using Oracle Flashback Query").
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from cdc_core import names
from cdc_core.source import LOCATOR_COLUMN
from merkle import types as lt

CURRENT_SCN = "SELECT CURRENT_SCN FROM V$DATABASE"
COLUMNS = (
    "SELECT column_name, data_type, data_precision, data_scale, nullable"
    " FROM all_tab_columns WHERE owner = :owner AND table_name = :name ORDER BY column_id"
)
PRIMARY_KEY = (
    "SELECT cols.column_name FROM all_constraints cons"
    " JOIN all_cons_columns cols ON cols.owner = cons.owner"
    " AND cols.constraint_name = cons.constraint_name"
    " WHERE cons.constraint_type = 'P' AND cons.owner = :owner AND cons.table_name = :name"
    " ORDER BY cols.position"
)


def quote(identifier: str) -> str:
    """A quoted identifier (exact case), as the dictionary stores it."""
    return '"' + identifier.replace('"', '""') + '"'


# What Oracle accepts as a nonquoted identifier, which it stores in upper case
# (https://docs.oracle.com/en/database/oracle/oracle-database/19/sqlrf/Database-Object-Names-and-Qualifiers.html).
_NONQUOTED = re.compile(r"[A-Za-z][A-Za-z0-9_$#]*")


def split_table(table: str, default_owner: str) -> tuple[str, str]:
    """Canonical ``owner.table`` (``cdc_core.names``) -> the dictionary's (owner, table).

    A part Oracle would take unquoted is upper-cased, as Oracle does (``shop.orders`` is
    ``SHOP.ORDERS``); any other part (``my table``, ``données``) is taken exactly.
    """
    owner, name = names.split_table(table, default_owner)
    return _dictionary_case(owner), _dictionary_case(name)


def _dictionary_case(part: str) -> str:
    return part.upper() if _NONQUOTED.fullmatch(part) else part


def select_expression(name: str, ltype: lt.LogicalType | None) -> str:
    """How one column is selected so the driver returns what its Arrow type takes."""
    quoted = quote(name)
    if name == LOCATOR_COLUMN:
        # The ROWID as LogMiner's ROW_ID shows it, so snapshot rows and log rows share locators.
        return f"ROWIDTOCHAR(ROWID) AS {quoted}"
    if isinstance(ltype, lt.TimestampTzType):
        # The instant, as UTC wall clock: the driver then needs no zone handling.
        return f"SYS_EXTRACT_UTC({quoted}) AS {quoted}"
    return quoted


def flashback_select(
    owner: str, name: str, columns: Sequence[tuple[str, lt.LogicalType | None]], where: str
) -> str:
    """``SELECT cols FROM owner.table AS OF SCN :scn [WHERE ...]``."""
    select = ", ".join(select_expression(c, t) for c, t in columns)
    return f"SELECT {select} FROM {quote(owner)}.{quote(name)} AS OF SCN :scn{where}"


def numbered_binds(where: str, params: Sequence[object]) -> tuple[str, dict[str, object]]:
    """Turn ``%s`` placeholders into Oracle's named binds ``:p1, :p2, ...``."""
    counter = iter(range(1, len(params) + 1))
    text = re.sub(r"%s", lambda _: f":p{next(counter)}", where)
    return text, {f"p{i}": value for i, value in enumerate(params, start=1)}
