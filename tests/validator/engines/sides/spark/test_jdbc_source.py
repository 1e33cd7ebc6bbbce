"""Sources read over JDBC give the same digests as the Python drivers, and their positions.

The type matrix's MariaDB and PostgreSQL tables (every case JDBC carries, edges and NULLs
included; ``Case.over_jdbc``) are read both ways, in two key-range partitions, and hashed
with the hash contract: the leaf digests must be equal, so a comparison cannot depend on
which path read its source. A case JDBC does not carry makes a read fall back to the Python
driver, which the test checks too.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from connectors.base import Connector
from connectors.jdbc import JdbcDriver
from connectors.registry import connector_for
from merkle.layout import RowLayout
from merkle.options import ComparisonOptions
from merkle.spark import leaf_digests
from tests.private_servers import MariaDBServer, PostgresServer
from tests.validator.type_matrix.test_type_matrix import (
    fill_mariadb,
    fill_postgres,
    matrix_database,
)
from tests.validator.type_matrix.type_matrix import CASES
from validator.engines.sides.spark.jdbc_source import jdbc_available
from validator.engines.sides.spark.sources import plan_partitions, source_frame
from validator.positions import read_positions

pytestmark = [pytest.mark.integration, pytest.mark.mariadb, pytest.mark.postgres, pytest.mark.spark]


@pytest.fixture(scope="module")
def matrix_urls(mariadb_full: MariaDBServer, postgres: PostgresServer) -> Iterator[dict[str, str]]:
    with matrix_database(mariadb_full, postgres) as database:
        fill_mariadb(mariadb_full, database)
        fill_postgres(postgres, database)
        yield {"mariadb": mariadb_full.url(database), "postgres": postgres.url(database)}


# The matrix columns the sources' JDBC reads carry.
OVER_JDBC = {"id", *(c.name for c in CASES if c.over_jdbc)}


def digests_both_ways(spark: Any, connector: Connector) -> tuple[Any, Any]:
    schema = connector.reflect("matrix")
    compared = [c for c in schema.columns if c.ltype is not None and c.name in OVER_JDBC]
    layout = RowLayout.of(
        [(c.name, c.ltype) for c in compared], ["id"], ComparisonOptions(timestamp_rounding="round")
    )
    partitions = plan_partitions(connector, schema, ["id"], 2)
    assert len(partitions) == 2
    found = []
    for jdbc in (True, False):
        with connector.shared_snapshot() as snapshot:
            frame = source_frame(spark, connector, schema, layout.names, partitions, snapshot, jdbc)
            found.append(leaf_digests(frame, layout, 4))
    return found[0], found[1]


@pytest.mark.parametrize("product", ["mariadb", "postgres"])
def test_jdbc_and_python_reads_hash_every_type_alike(
    spark: Any, matrix_urls: dict[str, str], product: str
) -> None:
    connector = connector_for(matrix_urls[product])
    schema = connector.reflect("matrix")
    read = connector.jdbc_read(
        schema, [c.name for c in schema.columns if c.name in OVER_JDBC], "id"
    )
    assert read is not None and jdbc_available(spark, read.driver)
    others = [c.name for c in schema.columns if c.name not in OVER_JDBC]
    assert all(connector.jdbc_read(schema, ["id", name]) is None for name in others)
    over_jdbc, through_python = digests_both_ways(spark, connector)
    assert sum(d.count for d in over_jdbc.values()) > 0
    assert over_jdbc == through_python


def test_each_mariadb_partition_reads_in_its_own_snapshot_at_its_position(
    spark: Any, matrix_urls: dict[str, str]
) -> None:
    connector = connector_for(matrix_urls["mariadb"])
    schema = connector.reflect("matrix")
    partitions = plan_partitions(connector, schema, ["id"], 2)
    frame = source_frame(spark, connector, schema, ["id"], partitions)
    positions = read_positions(frame, partitions)
    assert positions is not None and len(positions.partitions) == 2
    with contextlib.closing(connector.connect()) as connection:
        after = connector.begin_snapshot(connection)
    assert after is not None and all(0 < p.position <= after for p in positions.partitions)


def test_a_driver_missing_from_the_classpath_is_not_used(spark: Any) -> None:
    assert not jdbc_available(spark, JdbcDriver("com.example.Driver", "no-such-driver.jar"))


def test_a_numeric_too_precise_for_its_decimal_fails_both_reads_naming_the_column(
    spark: Any, postgres: PostgresServer, postgres_database: Any
) -> None:
    """An unconstrained numeric is read as decimal(38,18): a value with more fractional
    digits would be rounded, so both readers refuse it, naming the column; a timetz is
    left to the Python reader."""
    database = postgres_database(postgres)
    with contextlib.closing(postgres.connect(database)) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, n numeric, tz timetz)")
        conn.execute("INSERT INTO t VALUES (1, 1.5, '12:00+02'), (2, 0.1234567890123456789, NULL)")
    connector = connector_for(postgres.url(database))
    schema = connector.reflect("t")
    assert connector.jdbc_read(schema, ["id", "tz"], "id") is None
    partitions = plan_partitions(connector, schema, ["id"], 1)
    for jdbc in (True, False):
        frame = source_frame(spark, connector, schema, ["id", "n"], partitions, None, jdbc)
        with pytest.raises(Exception, match=r"column '?n'? ") as raised:
            frame.collect()
        assert "0.1234567890123456789" not in str(raised.value)  # never a value
