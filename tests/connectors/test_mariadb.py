"""MariaDB as a source: types, partitions, and snapshots that know their binlog position."""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
from collections.abc import Callable

import pytest

from cdc_core.errors import TerminalError, TransientError
from connectors.mariadb.position import split_position, to_position
from connectors.model import POSITION_COLUMN, Partition
from connectors.registry import connector_for
from merkle import types as lt
from tests.private_servers import MariaDBServer

pytestmark = [pytest.mark.integration, pytest.mark.mariadb]

DDL = """CREATE TABLE t (
  id INT PRIMARY KEY, tiny TINYINT, ubig BIGINT UNSIGNED, amount DECIMAL(12,3),
  f FLOAT, d DOUBLE, c CHAR(4), v VARCHAR(20), txt TEXT, b BLOB, bit1 BIT(1), bit8 BIT(8),
  dt6 DATETIME(6), ts3 TIMESTAMP(3) NULL, day DATE, tm TIME(6), yr YEAR, doc JSON,
  e ENUM('red','green'), s SET('a','b'), geom POINT NULL
) CHARSET utf8mb4"""


@pytest.fixture
def database(mariadb_full: MariaDBServer, mariadb_database: Callable[[MariaDBServer], str]) -> str:
    name = mariadb_database(mariadb_full)
    with contextlib.closing(mariadb_full.connect(name)) as connection, connection.cursor() as cur:
        cur.execute(DDL)
        cur.execute("SET time_zone = '+00:00'")
        for i in range(1, 51):
            cur.execute(
                "INSERT INTO t VALUES (%s, -5, 18446744073709551615, 1.125, 0.1, 0.1, 'ab',"
                " 'Zoë 😀', 'long', x'00ff', b'1', b'10000001', '2024-02-29 12:00:00.123456',"
                " '2024-01-01 00:00:00.5', '1999-12-31', '-01:02:03.5', 2024,"
                " '{\"a\": [1, 2]}', 'green', 'a,b', NULL)",
                (i,),
            )
    return mariadb_full.url(name)


def test_reflection_maps_native_types(database: str) -> None:
    schema = connector_for(database).reflect("t")
    assert schema.primary_key == ("id",)
    types = {c.name: c.ltype for c in schema.columns}
    assert types == {
        "id": lt.IntegerType(),
        "tiny": lt.IntegerType(),
        "ubig": lt.IntegerType(),
        "amount": lt.DecimalType(12, 3),
        "f": lt.FloatType(32),
        "d": lt.FloatType(64),
        "c": lt.StringType(padded=True),
        "v": lt.StringType(),
        "txt": lt.StringType(),
        "b": lt.BytesType(),
        "bit1": lt.BooleanType(),
        "bit8": lt.IntegerType(),
        "dt6": lt.TimestampType(6),
        "ts3": lt.TimestampTzType(3),
        "day": lt.DateType(),
        "tm": lt.TimeType(6),
        "yr": lt.IntegerType(),
        "doc": lt.JsonType(),
        "e": lt.StringType(),
        "s": lt.StringType(),
        "geom": None,
    }


def test_a_partition_reads_its_range_with_exact_values(database: str) -> None:
    connector = connector_for(database)
    schema = connector.reflect("t")
    columns = [c.name for c in schema.columns if c.ltype is not None]
    batches = list(connector.read_partition(schema, columns, Partition(0, "id", 10, 13)))
    rows = [row for batch in batches for row in batch.to_pylist()]
    assert [r["id"] for r in rows] == [10, 11, 12]
    row = rows[0]
    assert row["ubig"] == decimal.Decimal(2**64 - 1)
    assert row["amount"] == decimal.Decimal("1.125")
    assert row["v"] == "Zoë 😀" and row["c"] == "ab" and row["b"] == b"\x00\xff"
    assert row["bit1"] is True and row["bit8"] == 129
    assert row["dt6"] == dt.datetime(2024, 2, 29, 12, 0, 0, 123456)
    assert row["ts3"] == dt.datetime(2024, 1, 1, 0, 0, 0, 500000, tzinfo=dt.UTC)
    assert row["tm"] == -(3723 * 1_000_000 + 500_000)
    assert row["yr"] == 2024 and row["e"] == "green" and row["s"] == "a,b"
    assert row["doc"] == '{"a": [1, 2]}'
    assert row[POSITION_COLUMN] is not None


def _master_position(server: MariaDBServer) -> int:
    with contextlib.closing(server.connect(None)) as connection, connection.cursor() as cursor:
        cursor.execute("SHOW MASTER STATUS")
        log_file, offset = cursor.fetchone()[:2]
    return to_position(log_file, int(offset))


def test_a_partition_snapshot_and_its_position_agree(
    database: str, mariadb_full: MariaDBServer
) -> None:
    connector = connector_for(database)
    schema = connector.reflect("t")
    before = _master_position(mariadb_full)
    reader = connector.read_partition(schema, ["id"], Partition(0))
    first = next(reader)  # the snapshot is taken now
    other = mariadb_full.connect(database.rsplit("/", 1)[1])
    with contextlib.closing(other), other.cursor() as cursor:
        cursor.execute("INSERT INTO t (id) VALUES (1000)")
    after = _master_position(mariadb_full)
    ids = [r["id"] for b in [first, *reader] for r in b.to_pylist()]
    position = first.to_pylist()[0][POSITION_COLUMN]
    assert 1000 not in ids and len(ids) == 50
    assert position == before < after  # the snapshot sees exactly what was committed before
    assert split_position(position, "mariadb-bin")[0].startswith("mariadb-bin.")


def test_a_user_with_only_select_reads_the_binlogs_end(
    database: str, mariadb_full: MariaDBServer
) -> None:
    # A validator waits for the lake to reach the source's log end before reading the lake's
    # columns; its user has no BINLOG MONITOR, which SHOW MASTER STATUS needs.
    name = database.rsplit("/", 1)[1]
    with contextlib.closing(mariadb_full.connect(name)) as connection, connection.cursor() as cur:
        cur.execute("CREATE USER IF NOT EXISTS 'reader_only'@'%' IDENTIFIED BY 'pw'")
        cur.execute(f"GRANT SELECT ON `{name}`.* TO 'reader_only'@'%'")
        cur.execute("INSERT INTO t (id) VALUES (2000)")
    reader = connector_for(database.replace("root@", "reader_only@"), "pw")
    assert reader.log_position() == _master_position(mariadb_full)


def test_errors_name_the_problem(database: str, mariadb_full: MariaDBServer) -> None:
    with pytest.raises(TerminalError, match="table 'absent' not found"):
        connector_for(database).reflect("absent")
    wrong = database.replace("root@", "nobody_here@")
    with pytest.raises(TransientError, match="access denied"):
        connector_for(wrong).reflect("t")
    assert "secret" not in str(TransientError("x"))


def test_binlog_positions_order_across_files() -> None:
    assert to_position("mariadb-bin.000002", 4) > to_position("mariadb-bin.000001", 999_999)
    assert split_position(to_position("mariadb-bin.000007", 1234), "mariadb-bin") == (
        "mariadb-bin.000007",
        1234,
    )
    with pytest.raises(TerminalError):
        to_position("no-number", 4)


def test_value_beyond_spark_decimals_is_a_clear_error(
    mariadb_full: MariaDBServer, mariadb_database: Callable[[MariaDBServer], str]
) -> None:
    name = mariadb_database(mariadb_full)
    with contextlib.closing(mariadb_full.connect(name)) as connection, connection.cursor() as cur:
        cur.execute("CREATE TABLE wide (id INT PRIMARY KEY, x DECIMAL(60,10))")
    connector = connector_for(mariadb_full.url(name))
    schema = connector.reflect("wide")
    with pytest.raises(TerminalError, match="more than 38 digits"):
        connector.arrow_schema(schema, ["id", "x"])
