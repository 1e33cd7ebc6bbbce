"""Every common MariaDB type read from the binlog equals the same row read by the snapshot
reader, value for value (the server's zone is Europe/Berlin, so TIMESTAMP must be UTC)."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest

from cdc_core.capture.events import RowChange
from connectors.mariadb.snapshot import MariaDBSnapshotReader
from connectors.mariadb.source_config import MariaDBSourceConfig
from tests.connectors.mariadb.binlog_helpers import BinlogCase, read_until_end

pytestmark = [pytest.mark.integration, pytest.mark.mariadb]

TYPES = """CREATE TABLE ty (
  id INT PRIMARY KEY, i8 TINYINT, u8 TINYINT UNSIGNED, i16 SMALLINT, u16 SMALLINT UNSIGNED,
  i24 MEDIUMINT, u24 MEDIUMINT UNSIGNED, i32 INT, u32 INT UNSIGNED, i64 BIGINT,
  u64 BIGINT UNSIGNED, d1 DECIMAL(12,3), d2 DECIMAL(30,10), d3 DECIMAL(5,0), f FLOAT,
  g DOUBLE, day DATE, t0 TIME, t2 TIME(2), t4 TIME(4), t6 TIME(6), dt0 DATETIME,
  dt3 DATETIME(3), dt6 DATETIME(6), ts0 TIMESTAMP NULL, ts6 TIMESTAMP(6) NULL, yr YEAR,
  c CHAR(4), v VARCHAR(300), txt TEXT, bn BINARY(4), vb VARBINARY(10), bl BLOB, doc JSON,
  e ENUM('red', 'green'), s SET('a', 'b', 'c'), bit1 BIT(1), bit12 BIT(12), geo POINT NULL
) CHARSET utf8mb4"""

ROWS = [
    "(1, -128, 255, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295,"
    " -9223372036854775808, 18446744073709551615, -123456789.125, 12345678901234567890.0123456789,"
    " -99999, 3.4028234e38, -1.7976931348623157e308, '1000-01-01', '-838:59:59', '-00:00:00.25',"
    " '-01:02:03.5', '-00:00:01.000001', '1000-01-01 00:00:00', '2024-02-29 23:59:59.999',"
    " '9999-12-31 23:59:59.999999', '2024-03-31 01:30:00', '2024-10-27 02:30:00.123456', 1901,"
    " 'ab ', REPEAT('é', 300), 'long text 😀', 'x', x'00ff00', x'000102ff', '{\"a\": [1, 2.5]}',"
    " 'green', 'c,a', b'1', b'100000000001', ST_GeomFromText('POINT(1 2)'))",
    "(2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, '2024-01-01', '838:59:59', '00:00:00.99',"
    " '12:00:00.0001', '00:00:00.000001', '2024-06-01 12:00:00', '2024-06-01 12:00:00.5',"
    " '2024-06-01 12:00:00.000001', '1970-01-01 01:00:01', '2038-01-19 04:14:07.999999', 0, '',"
    " '', '', '', '', '', '[]', 'red', '', b'0', b'0', NULL)",
    "(3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,"
    " NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,"
    " NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
]


def _snapshot_rows(case: BinlogCase) -> list[dict[str, object]]:
    config = MariaDBSourceConfig(url=case.server.url(case.database), tables=("ty",))
    with MariaDBSnapshotReader(config).snapshot(["ty"]) as (_, tables):
        return [row for table in tables for batch in table.batches for row in batch.to_pylist()]


def test_binlog_images_equal_snapshot_rows_for_every_type(case: BinlogCase) -> None:
    case.sql(TYPES)
    reader = case.reader("ty")
    start = reader.end_position()
    case.sql(*(f"INSERT INTO ty VALUES {row}" for row in ROWS))
    inserts = [c.after for c in read_until_end(reader, start) if isinstance(c, RowChange)]
    snapshot = _snapshot_rows(case)
    assert inserts == snapshot  # both leave out the spatial column
    first = inserts[0]
    assert first is not None
    assert first["u64"] == decimal.Decimal(2**64 - 1) and first["i64"] == -(2**63)
    assert first["d2"] == decimal.Decimal("12345678901234567890.0123456789")
    assert first["t2"] == -250_000 and first["t4"] == -3_723_500_000
    assert first["t0"] == -(838 * 3600 + 59 * 60 + 59) * 1_000_000
    assert first["ts0"] == dt.datetime(2024, 3, 31, 0, 30, tzinfo=dt.UTC)  # Berlin: CET, UTC+1
    assert first["ts6"] == dt.datetime(2024, 10, 27, 0, 30, 0, 123456, tzinfo=dt.UTC)
    assert first["c"] == "ab" and first["bn"] == b"x\x00\x00\x00" and first["s"] == "a,c"
    assert first["bit1"] is True and first["bit12"] == 2049 and "geo" not in first
    assert inserts[1] is not None and inserts[1]["yr"] == 0 and inserts[1]["s"] == ""
    assert set(inserts[2].values()) == {None, 3} if inserts[2] else False


def test_describe_gives_the_arrow_schema_and_key(case: BinlogCase) -> None:
    case.sql(TYPES)
    description = case.reader("ty").describe("ty")
    assert description.key == ("id",)
    assert "geo" not in description.schema.names
    assert str(description.schema.field("u64").type) == "decimal128(20, 0)"
    assert str(description.schema.field("ts6").type) == "timestamp[us, tz=UTC]"
