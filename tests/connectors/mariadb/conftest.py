"""Fixtures of the binlog connector tests: a database on the FULL or MINIMAL server, a
reader of it, and a helper that reads the log up to its current end."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import pytest

from tests.connectors.mariadb.binlog_helpers import BinlogCase
from tests.private_servers import MariaDBServer


@pytest.fixture(params=["mariadb_full", "mariadb_minimal"])
def case(
    request: pytest.FixtureRequest, mariadb_database: Callable[[MariaDBServer], str]
) -> Iterator[BinlogCase]:
    """A fresh database on the FULL and on the MINIMAL row-image server."""
    server: MariaDBServer = request.getfixturevalue(request.param)
    with contextlib.closing(BinlogCase(server, mariadb_database(server))) as binlog_case:
        yield binlog_case


@pytest.fixture
def full_case(
    mariadb_full: MariaDBServer, mariadb_database: Callable[[MariaDBServer], str]
) -> Iterator[BinlogCase]:
    """A fresh database on the FULL row-image server only."""
    with contextlib.closing(BinlogCase(mariadb_full, mariadb_database(mariadb_full))) as c:
        yield c
