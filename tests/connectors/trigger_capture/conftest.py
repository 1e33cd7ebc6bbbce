"""Fixtures of the trigger capture tests: a fresh database on the private PostgreSQL server."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import pytest

from tests.connectors.postgres.helpers import PgCase
from tests.private_servers import PostgresServer


@pytest.fixture
def pg(
    postgres: PostgresServer, postgres_database: Callable[[PostgresServer], str]
) -> Iterator[PgCase]:
    """A fresh database with table ``public.t`` (its capture not installed yet)."""
    with contextlib.closing(PgCase(postgres, postgres_database(postgres))) as case:
        case.sql(
            "CREATE TABLE t (id integer PRIMARY KEY, name text, amount numeric(10, 2),"
            " at timestamptz)"
        )
        yield case
