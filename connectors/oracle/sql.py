"""The SQL the Oracle snapshot reader sends, as pure functions (tested without a server).

Reads are flashback queries, ``SELECT ... FROM owner.table AS OF SCN :scn``, so every
partition sees the database exactly as of one SCN, shared by all of them without holding a
transaction open (Oracle Database Development Guide, "Using Oracle Flashback Query").
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from cdc_core import names
from cdc_core.capture.source import LOCATOR_COLUMN
from cdc_core.errors import ContractError
from connectors.model import TableSchema
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


def typed(schema: TableSchema, columns: Sequence[str]) -> list[tuple[str, lt.LogicalType | None]]:
    """``columns`` of ``schema`` with their logical types (the locator column has none)."""
    return [(c, None if c == LOCATOR_COLUMN else schema.column(c).ltype) for c in columns]


def flashback_select(
    owner: str, name: str, columns: Sequence[tuple[str, lt.LogicalType | None]], where: str
) -> str:
    """``SELECT cols FROM owner.table AS OF SCN :scn [WHERE ...]``."""
    select = ", ".join(select_expression(c, t) for c, t in columns)
    return f"SELECT {select} FROM {quote(owner)}.{quote(name)} AS OF SCN :scn{where}"


BINARY_ORDER = ("ALTER SESSION SET NLS_SORT = BINARY NLS_COMP = BINARY",)
"""Session settings of a chunked read. ORDER BY sorts text by NLS_SORT and WHERE compares it
by NLS_COMP, which a database may set to a linguistic collation, and not both alike
(Oracle Database Globalization Support Guide, "NLS_SORT", "NLS_COMP"): with both binary,
"the rows after the last key" are exactly the rows after it in the chunks' order."""


def chunk_select(
    owner: str,
    name: str,
    columns: Sequence[tuple[str, lt.LogicalType | None]],
    key: Sequence[str],
    after: Sequence[object] | None,
    limit: int,
) -> tuple[str, dict[str, object]]:
    """The flashback query of one key-ordered chunk: the first ``limit`` rows whose ``key``
    is above ``after`` (``None``: from the start), and its binds (``:scn`` is bound by the
    reader). ``FETCH FIRST`` needs Oracle 12c or later."""
    if limit < 1:
        raise ContractError(f"a chunk holds at least one row, not {limit}")
    where, binds = after_key(key, after)
    order = ", ".join(quote(column) for column in key)
    text = flashback_select(owner, name, columns, where)
    return f"{text} ORDER BY {order} FETCH FIRST :limit ROWS ONLY", binds | {"limit": limit}


def after_key(key: Sequence[str], after: Sequence[object] | None) -> tuple[str, dict[str, object]]:
    """``WHERE`` rows whose ``key`` sorts after ``after``, expanded term by term: Oracle has
    no ordering comparison of value lists (``(a, b) > (:1, :2)`` is ORA-01796), so
    ``a >= :k1 AND (a > :k1 OR (a = :k1 AND b > :k2))``; the leading ``a >= :k1`` lets the
    key's index range-scan from the last key."""
    if after is None:
        return "", {}
    if len(after) != len(key) or not key:
        raise ContractError(f"a key after which to read has {len(key)} values, not {len(after)}")
    columns = [quote(column) for column in key]
    terms = []
    for index, column in enumerate(columns):
        equal = [f"{columns[i]} = :k{i + 1}" for i in range(index)]
        terms.append(" AND ".join([*equal, f"{column} > :k{index + 1}"]))
    expanded = terms[0] if len(terms) == 1 else " OR ".join(f"({term})" for term in terms)
    where = expanded if len(terms) == 1 else f"{columns[0]} >= :k1 AND ({expanded})"
    return f" WHERE {where}", {f"k{i}": value for i, value in enumerate(after, start=1)}


BY_ROWID = " WHERE ROWID = CHARTOROWID(:rid)"
"""The where-clause reading one row by the ROWID LogMiner's ``ROW_ID`` shows."""


def numbered_binds(where: str, params: Sequence[object]) -> tuple[str, dict[str, object]]:
    """Turn ``%s`` placeholders into Oracle's named binds ``:p1, :p2, ...``."""
    counter = iter(range(1, len(params) + 1))
    text = re.sub(r"%s", lambda _: f":p{next(counter)}", where)
    return text, {f"p{i}": value for i, value in enumerate(params, start=1)}
