"""The data types each server offers, and the ones the type matrix does not cover, with why.

``test_type_catalog.py`` fails on a server type that is neither stored in a
column of the type matrix (``type_matrix.py``: its values hashed equal by
every reader, a one-unit change found) nor refused here with a reason. This module is the
one place that lists refused types.

How each server's list is obtained:

- **MariaDB** (10.11 has no catalog table of types): every topic name of the server's help
  tables (``mysql.help_topic``) in the categories ``Data Types`` and ``Geographic
  Features``, split at commas and ``and``, without a trailing ``Data Type(s)``/``Types``
  (``YEAR Data Type`` -> ``YEAR``), plus the data type plugins of
  ``information_schema.PLUGINS`` (``inet4``, ``inet6``, ``uuid``). Each name is tried as a
  column type, bare, then with a length ``(10)``, then with members ``('a','b')``, in the
  default ``sql_mode`` and in ``ORACLE`` mode (``NUMBER``, ``VARCHAR2``, ``RAW``, ``CLOB``);
  a name the server refuses is no column type (functions, ``ROW``, ``TYPE OF``, overview
  pages). An accepted name is keyed by the type the server stores (the first word of
  ``COLUMN_TYPE``: ``INT4`` and ``INTEGER`` are ``int``, ``LONG`` is ``mediumtext``,
  ``BOOL`` is ``tinyint``), ``json`` for a ``LONGTEXT`` with a ``json_valid`` check (as the
  connector reads it), and each numeric type also with `` unsigned`` where the server
  accepts ``UNSIGNED``, since that changes its range.
- **PostgreSQL**: ``pg_type`` rows of kind base, composite, domain, enum, range and
  multirange (``typtype`` b, c, d, e, r, m; pseudo types, ``p``, are no column types).
  Excluded by rule: a composite that is a relation's row type (``pg_class.relkind`` other
  than ``c``: every system catalog's and ``information_schema`` view's row type, and any
  table's) and arrays of those. A type of ``pg_catalog`` or ``information_schema`` is keyed
  by ``format_type`` (``integer``, ``"char"``, ``information_schema.cardinal_number``);
  user-defined types by their kind (``enum (user-defined)``), the test creating one of each
  kind. An array (``typcategory`` A whose element's ``typarray`` is itself) is keyed by its
  element's key and ``[]``; ``int2vector`` and ``oidvector`` are base types.

A refused type says whether the connector carries it (its type map gives it a logical type,
and replcheck reads, hashes and replicates it, only the matrix does not prove it yet) or
not (no logical type: the validator reports such a column as a schema difference, and the
pipeline refuses its table by name unless ``ignore_columns`` lists it). The test checks that
flag against the connector's own reflection of a column of each type.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a server type is not in the type matrix.

    Attributes:
        reason: What stands in the way, and where it would be fixed.
        carried: Whether the connector gives the type a logical type (carries it).
    """

    reason: str
    carried: bool = False

    def __post_init__(self) -> None:
        if not self.reason.strip():
            raise ValueError("a refused type needs its reason")


# --- MariaDB ------------------------------------------------------------------------------

MARIADB_HELP_CATEGORIES = ("Data Types", "Geographic Features")
MARIADB_SQL_MODES = ("DEFAULT", "'ORACLE'")
_ARGUMENTS = ("", "(10)", "('a','b')")

_SPATIAL = Refusal(
    "spatial: the hash contract has no geometry encoding; no logical type"
    " (connectors/mariadb/types.py)"
)
_INET = Refusal(
    "no logical type: connectors/mariadb/types.py lists inet4/inet6 as text, but its name"
    " pattern ([a-z]+) reads 'inet6' as 'inet', so the mapping never applies; the binlog"
    " carries the 4/16 stored bytes, so the log decoder must turn them into text before the"
    " mapping is enabled (else the pipeline writes bytes into a text column), as it does for"
    " UUID (connectors/mariadb/binlog/values.py: uuid_text)"
)
MARIADB_REFUSED: dict[str, Refusal] = {
    **{
        name: _SPATIAL
        for name in (
            "geometry",
            "point",
            "linestring",
            "polygon",
            "multipoint",
            "multilinestring",
            "multipolygon",
            "geometrycollection",
        )
    },
    "inet4": _INET,
    "inet6": _INET,
}


def mariadb_candidates(topics: Iterable[str], plugins: Iterable[str]) -> set[str]:
    """Type names to try, from help topic names and data type plugin names."""
    names = {plugin.upper() for plugin in plugins}
    for topic in topics:
        title = re.sub(r" (Data Types?|Types)$", "", topic.replace("\\_", "_"))
        for part in re.split(r",| and ", title):
            if re.fullmatch(r"[A-Za-z][A-Za-z0-9 ]*", part.strip()):
                names.add(part.strip().upper())
    return names


def mariadb_key(column_type: str, is_json: bool = False) -> str:
    """The catalog key of a column: ``bigint(20) unsigned`` -> ``bigint unsigned``."""
    if is_json:
        return "json"
    words = column_type.lower().split()
    base = words[0].split("(")[0]
    return f"{base} unsigned" if "unsigned" in words[1:] else base


def mariadb_catalog(cursor: Any) -> dict[str, str]:
    """Every type the server offers: catalog key -> a column type spelling that makes it."""
    cursor.execute(
        "SELECT t.name FROM mysql.help_topic t JOIN mysql.help_category c"
        " USING (help_category_id) WHERE c.name IN (%s, %s)",
        MARIADB_HELP_CATEGORIES,
    )
    topics = [str(name) for (name,) in cursor.fetchall()]
    if not topics:
        raise AssertionError("the server's help tables are empty: no list of data types")
    cursor.execute(
        "SELECT PLUGIN_NAME FROM information_schema.PLUGINS WHERE PLUGIN_TYPE = 'DATA TYPE'"
    )
    plugins = [str(name) for (name,) in cursor.fetchall()]
    found: dict[str, str] = {}
    try:
        for mode in MARIADB_SQL_MODES:
            cursor.execute(f"SET SESSION sql_mode = {mode}")
            for name in sorted(mariadb_candidates(topics, plugins)):
                found.update(_probe(cursor, name))
    finally:
        cursor.execute("SET SESSION sql_mode = DEFAULT")
    return found


def _probe(cursor: Any, name: str) -> dict[str, str]:
    """The keys ``name`` makes (itself, and with ``UNSIGNED`` where that is another key),
    each with a column type spelling of the default ``sql_mode`` (the key and the arguments
    it took)."""
    for arguments in _ARGUMENTS:
        key = _key_of(cursor, f"{name}{arguments}")
        if key is None:
            continue
        found = {key: "JSON" if key == "json" else f"{key.upper()}{arguments}"}
        unsigned = _key_of(cursor, f"{name}{arguments} UNSIGNED")
        if unsigned is not None and unsigned != key:  # YEAR takes UNSIGNED and ignores it
            found[unsigned] = f"{found[key]} UNSIGNED"
        return found
    return {}


def _key_of(cursor: Any, spelling: str) -> str | None:
    """The key of a column of type ``spelling`` (None: the server refuses it)."""
    import pymysql

    try:
        cursor.execute(f"CREATE TEMPORARY TABLE type_probe (c {spelling})")
    except pymysql.err.MySQLError:
        return None
    return _temporary_key(cursor)


def _temporary_key(cursor: Any) -> str:
    """The key of ``type_probe``'s column (dropping the table)."""
    cursor.execute("SHOW CREATE TABLE type_probe")
    definition = str(cursor.fetchone()[1])
    cursor.execute("SHOW COLUMNS FROM type_probe")
    column_type = str(cursor.fetchone()[1])
    cursor.execute("DROP TEMPORARY TABLE type_probe")
    return mariadb_key(column_type, "json_valid(" in definition)


# --- PostgreSQL ---------------------------------------------------------------------------

POSTGRES_KINDS = {
    "b": "base",
    "c": "composite",
    "d": "domain",
    "e": "enum",
    "r": "range",
    "m": "multirange",
}
BUILTIN_SCHEMAS = ("pg_catalog", "information_schema")
# One user-defined type of each kind (ranges bring their multirange): their kinds must be
# covered or refused like the builtin types.
POSTGRES_USER_TYPES = (
    "CREATE TYPE probe_enum AS ENUM ('x', 'y')",
    "CREATE TYPE probe_composite AS (a integer, b text)",
    "CREATE DOMAIN probe_domain AS integer",
    "CREATE TYPE probe_range AS RANGE (subtype = float8)",
)
POSTGRES_TYPES_SQL = """
SELECT t.oid, format_type(t.oid, NULL), t.typtype, n.nspname IN ('pg_catalog',
       'information_schema'), coalesce(c.relkind, 'c'),
       CASE WHEN t.typcategory = 'A' AND e.typarray = t.oid THEN e.oid END
  FROM pg_type t
  JOIN pg_namespace n ON n.oid = t.typnamespace
  LEFT JOIN pg_class c ON c.oid = t.typrelid
  LEFT JOIN pg_type e ON e.oid = t.typelem
 WHERE t.typtype IN ('b', 'c', 'd', 'e', 'r', 'm')
"""


@dataclass(frozen=True, slots=True)
class PgType:
    """One ``pg_type`` row, as ``POSTGRES_TYPES_SQL`` reads it."""

    name: str
    kind: str
    builtin: bool
    relkind: str
    element: int | None


def postgres_types(connection: Any) -> dict[int, PgType]:
    """Every type that could be a column's, by oid."""
    rows = connection.execute(POSTGRES_TYPES_SQL).fetchall()
    return {int(oid): PgType(str(name), *rest) for oid, name, *rest in rows}


def postgres_key(oid: int, types: Mapping[int, PgType]) -> str | None:
    """The catalog key of a type (None: excluded by rule, or a pseudo type)."""
    row = types.get(oid)
    if row is None or row.relkind != "c":
        return None  # a pseudo type; a relation's row type
    if row.element is not None:
        element = postgres_key(row.element, types)
        return None if element is None else f"{element}[]"
    return row.name if row.builtin else f"{POSTGRES_KINDS[row.kind]} (user-defined)"


def postgres_catalog(types: Mapping[int, PgType]) -> dict[str, int]:
    """Every type the server offers: catalog key -> the oid of one type of it."""
    keys = {oid: postgres_key(oid, types) for oid in sorted(types)}
    return {key: oid for oid, key in keys.items() if key is not None}


_NOT_DATA = "object identifiers: this cluster's catalog numbers, no value another copy shares"
_INTERNAL = "system internal (statistics, transaction or planner state): no logical type"
_RANGE = "a user-defined range: no logical type (its subtype's text has no fixed form)"
_TEXT_SEARCH = "text search: no logical type"

POSTGRES_BASE_REFUSED: dict[str, Refusal] = {
    **{name: Refusal(_TEXT_SEARCH) for name in ("tsvector", "tsquery", "gtsvector")},
    **{
        name: Refusal(_NOT_DATA)
        for name in (
            "oid",
            "regclass",
            "regcollation",
            "regconfig",
            "regdictionary",
            "regnamespace",
            "regoper",
            "regoperator",
            "regproc",
            "regprocedure",
            "regrole",
            "regtype",
        )
    },
    **{
        name: Refusal(_INTERNAL)
        for name in (
            "aclitem",
            "cid",
            "tid",
            "xid",
            "xid8",
            "pg_lsn",
            "pg_snapshot",
            "txid_snapshot",
            "refcursor",
            "int2vector",
            "oidvector",
            "pg_node_tree",
            "pg_ndistinct",
            "pg_dependencies",
            "pg_mcv_list",
            "pg_brin_bloom_summary",
            "pg_brin_minmax_multi_summary",
        )
    },
    '"char"': Refusal('"char" (one byte, used by the catalogs): no logical type'),
    "name": Refusal("name (a 63-byte identifier): no logical type"),
    "information_schema.sql_identifier": Refusal("a domain over name, which has no logical type"),
    "money[]": Refusal(
        "an array of money: the snapshot would read it through money's numeric cast, which"
        " lc_monetary sets (money itself is read from cash_send)"
    ),
    "bit": Refusal("bit strings: no logical type (MariaDB's BIT is a number, this is text)"),
    "bit varying": Refusal("bit strings: no logical type"),
    "xml": Refusal("xml: no logical type"),
    "jsonpath": Refusal("jsonpath: no logical type"),
    "composite (user-defined)": Refusal("composite: no logical record type"),
    "range (user-defined)": Refusal(_RANGE),
    "multirange (user-defined)": Refusal(_RANGE),
}

_ARRAY_LATER = (
    "an array of a carried type: read and hashed as array<element> by every reader, but not"
    " in the matrix yet"
)
# Carried as their elements' text (issue 36); only point[] is in the matrix so far.
POSTGRES_ARRAYS_NOT_MATRIXED: frozenset[str] = frozenset(
    f"{name}[]"
    for name in (
        *("box", "circle", "line", "lseg", "path", "polygon"),
        *("cidr", "inet", "macaddr", "macaddr8"),
        *(
            f"{kind}{r}"
            for kind in ("int4", "int8", "num", "ts", "tstz", "date")
            for r in ("range", "multirange")
        ),
    )
)


def postgres_refusal(key: str) -> Refusal | None:
    """Why ``key`` is not in the matrix (None: it must be). An array of a refused type is
    refused for its element's reason; an array of a carried type only where listed in
    ``POSTGRES_ARRAYS_NOT_MATRIXED``."""
    if key in POSTGRES_BASE_REFUSED:
        return POSTGRES_BASE_REFUSED[key]
    if key.endswith("[]"):
        element = postgres_refusal(key[:-2])
        if element is not None:
            return Refusal(f"an array of {key[:-2]}: {element.reason}", element.carried)
        if key in POSTGRES_ARRAYS_NOT_MATRIXED:
            return Refusal(_ARRAY_LATER, carried=True)
    return None
