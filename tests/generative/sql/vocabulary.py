"""The catalog vocabulary (issue 36, "Method"): column kinds taken from the type matrix.

In ``vocabulary="catalog"`` the generator's column kinds are the type matrix's cases
(``tests/validator/type_matrix/type_matrix.py``: per type, each product's column spelling and values
known to be storable and exact), so every type a server's catalog offers and the pipeline
carries can appear in a generated table. The matrix's cases come from the servers' catalogs
(``tests/validator/type_matrix/type_catalog.py``); ``test_vocabulary_coverage.py`` checks that every
catalog type is generated here or refused with its reason.

``left_out`` says which cases the tester does not generate, and why (``LEFT_OUT`` and one
rule); a catalog type not in the matrix is refused, with its reason, in
``tests/validator/type_matrix/type_catalog.py``, and so not generated either.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa

from connectors.postgres.types import GEOMETRIC
from tests.validator.type_matrix.type_matrix import CASES
from tests.validator.type_matrix.type_matrix_values import POSTGRES_TYPES, Case

VOCABULARIES = ("default", "catalog")

# Case name -> why the generator leaves it out (none so far). A case without an Arrow type
# (interval, interval[]) is left out by rule (``left_out``): the lake cannot hold it.
LEFT_OUT: Mapping[str, str] = {}
NO_LAKE_TYPE = (
    "the lake cannot store it (deltalake refuses Arrow's duration: 'Invalid data type for"
    " Delta Lake'), so the pipeline cannot carry it; tests/validator/type_matrix/type_catalog.py"
)


def left_out(case: Case) -> str | None:
    """Why ``case`` is not generated (None: it is)."""
    if case.arrow is None:
        return NO_LAKE_TYPE
    return LEFT_OUT.get(case.name)


def catalog_cases(product: str) -> dict[str, Case]:
    """The cases generated for ``product`` (mariadb, postgres), by name: its column kinds."""
    return {case.name: case for case in CASES if case.stored_in(product) and left_out(case) is None}


CATALOG_KINDS: Mapping[str, Mapping[str, Case]] = {
    product: catalog_cases(product) for product in ("mariadb", "postgres")
}


def locating_kinds(product: str) -> tuple[str, ...]:
    """The kinds of a table without a key: those that locate its rows. Arrays and ``timetz``
    (lists and a struct in the lake) never do, nor do PostgreSQL's geometric types (no
    equality: ``connectors.postgres.types.GEOMETRIC``; docs/cdc-postgres.md), so two rows
    equal but for one would share their locator, which the pipeline refuses by name ("Give
    the table a primary key, or configure a key"); the generator does not write such a
    table."""
    return tuple(
        name
        for name, case in CATALOG_KINDS[product].items()
        if not (pa.types.is_list(case.arrow) or pa.types.is_struct(case.arrow))
        and not (product == "postgres" and native_type(name, product) in GEOMETRIC)
    )


def native_type(kind: str, product: str) -> str:
    """The column type of catalog kind ``kind`` in ``product``."""
    case = CATALOG_KINDS[product][kind]
    spelling = case.mariadb if product == "mariadb" else case.postgres
    assert spelling is not None
    return spelling


def setup_types(product: str) -> tuple[str, ...]:
    """Statements creating the user-defined types the cases use (PostgreSQL's enum and
    domain), before any table."""
    return POSTGRES_TYPES if product == "postgres" else ()
