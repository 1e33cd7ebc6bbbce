"""Every data type each private server offers is in the type matrix or refused with a reason.

The servers' lists come from the servers (``tests/validator/type_matrix/type_catalog.py`` says how).
A type counts as covered only when a column of the type matrix's own tables has it (the
tables ``tests/validator/type_matrix/test_type_matrix.py`` compares in every pair and engine, filled
here the same way) and its case is stored in another product too, so that two readers
hash it against each other; never by its spelling in a list. Each refusal's ``carried`` flag is
checked against the connector's reflection of a column of that type, a refusal of a type
the server does not offer is stale, and each case the matrix keeps out of the databases'
digest SQL must really be refused by that SQL.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pytest

from connectors.base import Connector
from connectors.postgres.types import quote
from connectors.pushdown import DigestColumn, NotPushable
from connectors.registry import connector_for
from merkle import types as lt
from merkle.options import ComparisonOptions
from tests.private_servers import MariaDBServer, PostgresServer
from tests.validator.type_matrix.test_type_matrix import (
    fill_mariadb,
    fill_postgres,
    matrix_database,
)
from tests.validator.type_matrix.type_catalog import (
    MARIADB_REFUSED,
    POSTGRES_ARRAYS_NOT_MATRIXED,
    POSTGRES_BASE_REFUSED,
    POSTGRES_USER_TYPES,
    Refusal,
    mariadb_catalog,
    mariadb_key,
    postgres_catalog,
    postgres_key,
    postgres_refusal,
    postgres_types,
)
from tests.validator.type_matrix.type_matrix import CASES

pytestmark = [pytest.mark.integration, pytest.mark.mariadb, pytest.mark.postgres]


@dataclass(frozen=True, slots=True)
class Coverage:
    """One server's types: offered (key -> a spelling), stored in the matrix, refused, listed
    as refused, and whether the connector carries each offered type."""

    offered: Mapping[str, str]
    matrixed: frozenset[str]
    refused: Mapping[str, Refusal]
    listed: frozenset[str]
    carried: Mapping[str, bool]

    def uncovered(self) -> list[str]:
        return sorted(set(self.offered) - self.matrixed - set(self.refused))

    def message(self, server: str) -> str:
        """The failure message naming every uncovered type."""
        lines = [
            f"{server} types neither in the type matrix nor refused in"
            " tests/validator/type_matrix/type_catalog.py (add a case to"
            " tests/validator/type_matrix/type_matrix_catalog_cases.py,"
            " or a refusal with its reason):"
        ]
        for key in self.uncovered():
            carried = "carried by the connector" if self.carried[key] else "no logical type"
            lines.append(f"  {key} ({carried}; column type {self.offered[key]})")
        return "\n".join(lines)

    def wrong_flags(self) -> list[str]:
        """Refusals whose ``carried`` flag the connector contradicts."""
        return [
            f"{key}: the connector {'carries' if self.carried[key] else 'has no type for'} it"
            for key, refusal in sorted(self.refused.items())
            if self.carried[key] != refusal.carried
        ]


# Cases stored in two products or more: compared across readers.
ACROSS_PRODUCTS = {
    case.name
    for case in CASES
    if sum(case.stored_in(p) for p in ("mariadb", "postgres", "duckdb", "lake")) >= 2
}


def _carried(connector: Connector, table: str) -> dict[str, bool]:
    """Whether the connector gives each column of ``table`` a logical type."""
    return {c.name: c.ltype is not None for c in connector.reflect(table).columns}


def mariadb_coverage(server: MariaDBServer, database: str) -> Coverage:
    """MariaDB's types (the matrix table is filled in ``database`` first)."""
    with contextlib.closing(server.connect(database)) as conn, conn.cursor() as cursor:
        offered = mariadb_catalog(cursor)
        columns = ", ".join(f"`{key}` {spelling}" for key, spelling in sorted(offered.items()))
        cursor.execute(f"CREATE TABLE type_probe ({columns})")
    connector = connector_for(server.url(database))
    matrix = [c for c in connector.reflect("matrix").columns if c.name in ACROSS_PRODUCTS]
    matrixed = {mariadb_key(c.native_type, isinstance(c.ltype, lt.JsonType)) for c in matrix}
    refused = {key: MARIADB_REFUSED[key] for key in offered if key in MARIADB_REFUSED}
    listed = frozenset(MARIADB_REFUSED)
    return Coverage(
        offered, frozenset(matrixed), refused, listed, _carried(connector, "type_probe")
    )


def postgres_coverage(server: PostgresServer, database: str) -> Coverage:
    """PostgreSQL's types (the matrix tables are filled in ``database`` first)."""
    with contextlib.closing(server.connect(database)) as conn:
        for statement in POSTGRES_USER_TYPES:
            conn.execute(statement)
        types = postgres_types(conn)
        oids = postgres_catalog(types)
        offered = {key: types[oid].name for key, oid in oids.items()}
        columns = ", ".join(f"{quote(key)} {name}" for key, name in sorted(offered.items()))
        conn.execute(f"CREATE TABLE type_probe ({columns})")
        stored = conn.execute(
            "SELECT attname, atttypid FROM pg_attribute WHERE attrelid = 'matrix'::regclass"
            " AND attnum > 0 AND NOT attisdropped"
        ).fetchall()
    matrixed = {postgres_key(int(oid), types) for name, oid in stored if name in ACROSS_PRODUCTS}
    refused = {key: r for key in offered if (r := postgres_refusal(key)) is not None}
    listed = frozenset(POSTGRES_BASE_REFUSED) | POSTGRES_ARRAYS_NOT_MATRIXED
    connector = connector_for(server.url(database))
    return Coverage(
        offered,
        frozenset(k for k in matrixed if k is not None),
        refused,
        listed,
        _carried(connector, "type_probe"),
    )


@dataclass(frozen=True, slots=True)
class Catalogs:
    """Each product's coverage, and the URL of the database holding its matrix tables."""

    coverage: Mapping[str, Coverage]
    urls: Mapping[str, str]


@pytest.fixture(scope="module")
def catalogs(mariadb_full: MariaDBServer, postgres: PostgresServer) -> Iterator[Catalogs]:
    """Both servers' coverage, over a database holding the matrix tables."""
    with matrix_database(mariadb_full, postgres) as database:
        fill_mariadb(mariadb_full, database)
        fill_postgres(postgres, database)
        yield Catalogs(
            {
                "mariadb": mariadb_coverage(mariadb_full, database),
                "postgres": postgres_coverage(postgres, database),
            },
            {"mariadb": mariadb_full.url(database), "postgres": postgres.url(database)},
        )


PRODUCTS = ("mariadb", "postgres")


@pytest.mark.parametrize("product", PRODUCTS)
def test_every_type_the_server_offers_is_in_the_matrix_or_refused(
    catalogs: Catalogs, product: str
) -> None:
    found = catalogs.coverage[product]
    assert len(found.offered) > 30  # the lists came from the server
    assert not found.uncovered(), found.message(product)


@pytest.mark.parametrize("product", PRODUCTS)
def test_no_type_is_both_in_the_matrix_and_refused(catalogs: Catalogs, product: str) -> None:
    found = catalogs.coverage[product]
    assert sorted(found.matrixed & set(found.refused)) == []


@pytest.mark.parametrize("product", PRODUCTS)
def test_refusals_name_offered_types_and_say_truly_whether_they_are_carried(
    catalogs: Catalogs, product: str
) -> None:
    found = catalogs.coverage[product]
    assert sorted(found.listed - set(found.offered)) == []  # stale entries
    assert found.wrong_flags() == []


@pytest.mark.parametrize("product", PRODUCTS)
def test_every_matrix_column_has_a_logical_type(catalogs: Catalogs, product: str) -> None:
    """A column without one would be a schema difference, never a compared value."""
    connector = connector_for(catalogs.urls[product])
    untyped = [c.name for c in connector.reflect("matrix").columns if c.ltype is None]
    assert untyped == []


@pytest.mark.parametrize("product", PRODUCTS)
def test_the_cases_kept_out_of_the_digest_sql_are_refused_by_it(
    catalogs: Catalogs, product: str
) -> None:
    connector = connector_for(catalogs.urls[product])
    dialect = connector.digest_dialect()
    assert dialect is not None
    kept_out = {c.name for c in CASES if c.not_in_sql and c.stored_in(product)}
    assert kept_out  # JSON at least
    columns = [c for c in connector.reflect("matrix").columns if c.name in kept_out]
    assert {c.name for c in columns} == kept_out
    for column in columns:
        assert column.ltype is not None
        with pytest.raises(NotPushable):
            dialect.payload(DigestColumn(column, column.ltype), ComparisonOptions())
