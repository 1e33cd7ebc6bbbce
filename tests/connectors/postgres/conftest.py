"""Fixtures of the Postgres log reader tests: a fresh database on the private cluster."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import pytest

from tests.connectors.postgres.helpers import PgCase
from tests.private_servers import PostgresServer


@pytest.fixture
def case(
    postgres: PostgresServer, postgres_database: Callable[[PostgresServer], str]
) -> Iterator[PgCase]:
    """A fresh database (its slots and publications go with it)."""
    with contextlib.closing(PgCase(postgres, postgres_database(postgres))) as pg_case:
        yield pg_case
