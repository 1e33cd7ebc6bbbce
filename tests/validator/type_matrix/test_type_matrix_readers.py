"""The databases' digest SQL hashes every matrix value as the Python reader's value hashes.

A comparison that hashes one side in its database's SQL (the database, local and hybrid
engines) names changed columns by the values the connector's Python reader reads back; a
value the SQL writes other bytes for than ``merkle.canonical`` writes for the value read
back makes a changed row whose columns phase names nothing (MariaDB's YEAR 0000: the SQL
read the text ``'0000'``, the readers the number 0). So, value by value, over the type
matrix's MariaDB and PostgreSQL tables: the field (``<length>:<payload>`` or ``N``) the SQL
frames for each stored value must equal the canonical field of the value the connector
reads, and a failure names the column and the row.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from connectors.base import Connector
from connectors.model import Partition, SourceColumn
from connectors.pushdown import DigestColumn, DigestDialect
from connectors.registry import connector_for
from merkle.canonical import payload_encoder, to_field
from merkle.options import ComparisonOptions
from tests.private_servers import MariaDBServer, PostgresServer
from tests.validator.type_matrix.test_type_matrix import (
    fill_mariadb,
    fill_postgres,
    matrix_database,
)
from tests.validator.type_matrix.type_matrix import CASES

pytestmark = [pytest.mark.integration, pytest.mark.mariadb, pytest.mark.postgres]

OPTIONS = ComparisonOptions()
IN_SQL = {case.name for case in CASES if not case.not_in_sql}
Fields = dict[tuple[int, str], bytes]


@pytest.fixture(scope="module")
def servers(mariadb_full: MariaDBServer, postgres: PostgresServer) -> Iterator[dict[str, Any]]:
    """Each product's server, with the matrix tables in one fresh database."""
    with matrix_database(mariadb_full, postgres) as database:
        fill_mariadb(mariadb_full, database)
        fill_postgres(postgres, database)
        yield {"mariadb": (mariadb_full, database), "postgres": (postgres, database)}


def _sql_fields(
    connector: Connector, dialect: DigestDialect, columns: Sequence[SourceColumn]
) -> Fields:
    """Each (row id, column)'s framed field as the dialect's SQL hashes it: the bytes a row
    hash reads (a bare payload would come back through the driver, which reads a YEAR as a
    number whatever the SQL's text of it), in a session of the connector, as digests run
    (its settings fix the text of a tstzrange, for one)."""
    selected = []
    for column in columns:
        assert column.ltype is not None
        payload = dialect.payload(DigestColumn(column, column.ltype), OPTIONS)
        field = dialect.field(payload.sql, payload)
        selected.append(dialect.key_bytes([(field, payload.binary)]))
    sql = f"SELECT id, {', '.join(selected)} FROM matrix"
    with contextlib.closing(connector.connect()) as connection:
        cursor = connection.cursor()
        cursor.execute(sql)
        rows = cursor.fetchall()
    return {
        (int(row[0]), column.name): _bytes(value)
        for row in rows
        for column, value in zip(columns, row[1:], strict=True)
    }


def _bytes(value: Any) -> bytes:
    return (
        bytes(value) if isinstance(value, bytes | bytearray | memoryview) else str(value).encode()
    )


def _reader_fields(connector: Connector, columns: Sequence[SourceColumn]) -> Fields:
    """Each (row id, column)'s canonical field of the value the connector reads."""
    schema = connector.reflect("matrix")
    names = ["id", *(c.name for c in columns)]
    encoders = {c.name: payload_encoder(c.ltype, OPTIONS) for c in columns if c.ltype is not None}
    found: Fields = {}
    for batch in connector.read_partition(schema, names, Partition(0)):
        for row in batch.to_pylist():
            for name, encode in encoders.items():
                value = row[name]
                found[(int(row["id"]), name)] = to_field(None if value is None else encode(value))
    return found


@pytest.mark.parametrize("product", ["mariadb", "postgres"])
def test_the_digest_sql_hashes_each_value_as_the_reader_reads_it(
    servers: dict[str, Any], product: str
) -> None:
    server, database = servers[product]
    connector = connector_for(server.url(database))
    dialect = connector.digest_dialect()
    assert dialect is not None
    columns = [c for c in connector.reflect("matrix").columns if c.name in IN_SQL]
    assert len(columns) > 20
    in_sql = _sql_fields(connector, dialect, columns)
    read = _reader_fields(connector, columns)
    disagree = sorted(
        f"{name} row {row}: SQL {_shown(in_sql[(row, name)])}, reader {_shown(read[(row, name)])}"
        for row, name in read
        if in_sql[(row, name)] != read[(row, name)]
    )
    assert disagree == []


def _shown(field: bytes) -> str:
    text = repr(field)
    return text if len(text) <= 80 else f"{text[:60]}... ({len(field)} bytes)"
