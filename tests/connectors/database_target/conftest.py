"""A MariaDB source database and a PostgreSQL target database, fresh for each test."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from tests.private_servers import MariaDBServer, PostgresServer


@dataclass(frozen=True)
class Databases:
    """The servers and the test's own database on each."""

    mariadb: MariaDBServer
    postgres: PostgresServer
    source: str  # on MariaDB
    target: str  # on PostgreSQL


@pytest.fixture
def mariadb_to_postgres(
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    postgres: PostgresServer,
    postgres_database: Callable[[PostgresServer], str],
) -> Databases:
    """A MariaDB source database and a PostgreSQL target database."""
    return Databases(
        mariadb_full, postgres, mariadb_database(mariadb_full), postgres_database(postgres)
    )
