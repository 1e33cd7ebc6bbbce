"""Every common type decoded from the stream exactly as a snapshot reads it (server zone
Europe/Berlin), and the binary decoder against the server's own send functions."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import pytest

from cdc_core.capture.events import RowChange
from cdc_core.errors import TerminalError
from connectors.postgres.errors import ValueContext
from connectors.postgres.pgoutput.binary_values import TypeInfo, ValueDecoder
from connectors.postgres.snapshot import PostgresSnapshotReader
from tests.connectors.postgres.helpers import PgCase, read_until_end

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

D = decimal.Decimal
WHERE = ValueContext("public.t", "c")

_EVERY_TYPE = """
CREATE TYPE mood AS ENUM ('sad', 'happy');
CREATE DOMAIN positive AS integer CHECK (VALUE > 0);
CREATE TABLE every_type (
    id integer PRIMARY KEY, small smallint NOT NULL, big bigint, amount numeric(10,2),
    wide numeric(30,0), free numeric, neg numeric(5,-2), r real, d double precision,
    txt text, vc varchar(10), ch char(5), bp bpchar, raw bytea, flag boolean, day date,
    t time(3), tz timetz, ts timestamp(3), tstz timestamptz, doc json, docb jsonb, ref uuid,
    span interval, feeling mood, tags text[], pos positive
);
"""
_ROWS = """
INSERT INTO every_type
SELECT i, 7, 9223372036854775807, i / 100.0, 1e29, -12345.6789012345678, 12345, 0.1, 0.1,
       'héllo', 'abc', 'ab', 'x  ', '\\x00ff', true, '2024-02-29', '12:34:56.789',
       '12:00+02', '2024-03-31 02:30:00.123', '2024-01-01 00:00:00+02',
       '{"b": 1,  "a": [1, 2]}', '{"b": 1,  "a": [1, 2]}',
       'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', '3 days -00:00:01.5', 'happy', '{x}', 5
  FROM generate_series(1, 3) AS i;
INSERT INTO every_type (id, small, r, d, day, ts, tstz, free, span)
VALUES (4, -32768, 'NaN', '-Infinity', '0001-01-01', '1999-12-31 23:59:59.999',
        '1969-07-20 20:17:40+00', 0.000000000000000001, '-1 days 00:00:00.000001');
"""


def test_stream_images_equal_snapshot_rows(case: PgCase) -> None:
    case.sql(_EVERY_TYPE)
    reader = case.reader("every_type")
    assert read_until_end(reader, None) == []
    start = reader.end_position()
    case.sql(_ROWS)
    images = {
        change.locator: dict(change.after)
        for change in read_until_end(reader, start)
        if isinstance(change, RowChange) and change.after is not None
    }
    snapshots = PostgresSnapshotReader(case.config("every_type"))
    with snapshots.snapshot(["every_type"]) as (_, tables):
        rows = [row for table in tables for batch in table.batches for row in batch.to_pylist()]
    assert len(rows) == len(images) == 4
    for row in rows:
        image = images[(row["id"],)]
        assert image.keys() == row.keys()
        for column, value in row.items():
            assert _same(image[column], value), (row["id"], column, image[column], value)
    assert images[(1,)]["free"] == D("-12345.6789012345678")
    assert images[(1,)]["tstz"] == dt.datetime(2023, 12, 31, 22, tzinfo=dt.UTC)
    assert images[(1,)]["t"] == (12 * 3600 + 34 * 60 + 56) * 10**6 + 789_000
    assert images[(1,)]["ch"] == "ab   "
    assert images[(1,)]["docb"] == '{"a": [1, 2], "b": 1}'
    assert images[(1,)]["tz"] == {"micros": 12 * 3600 * 10**6, "offset_seconds": 7200}
    assert images[(1,)]["tags"] == ["x"]
    assert images[(1,)]["span"] == "P3DT-1.5S"  # '3 days -00:00:01.5', as ::text prints it


def _same(stream: Any, snapshot: Any) -> bool:
    if isinstance(stream, float) and stream != stream:  # NaN
        return isinstance(snapshot, float) and snapshot != snapshot
    return bool(stream == snapshot) and type(stream) is type(snapshot)


def _sent(case: PgCase, expression: str) -> bytes:
    row = case.connection.execute(f"SELECT {expression}").fetchone()
    assert row is not None
    return bytes(row[0])


def _decoder(case: PgCase) -> ValueDecoder:
    def lookup(oid: int) -> TypeInfo:
        from connectors.postgres.pgoutput.binary_values import lookup_type

        return lookup_type(case.connection, oid)

    return ValueDecoder(lookup)


@pytest.mark.parametrize(
    ("send", "oid", "expected"),
    [
        ("numeric_send(0::numeric)", 1700, D("0")),
        ("numeric_send(0.000::numeric)", 1700, D("0.000")),
        (
            "numeric_send(-1234567890123456789012345678901234.5678)",
            1700,
            D("-1234567890123456789012345678901234.5678"),
        ),
        ("numeric_send(100000000::numeric)", 1700, D("100000000")),
        ("numeric_send(0.00012::numeric(10,6))", 1700, D("0.000120")),
        ("numeric_send(-0.5::numeric)", 1700, D("-0.5")),
        ("numeric_send(1e-20::numeric)", 1700, D("1E-20")),
        ("numeric_send(123456780000::numeric(20,3))", 1700, D("123456780000.000")),
        ("numeric_send('NaN'::numeric)", 1700, "NaN"),
        ("float4send(3.4028235e38::real)", 700, 3.4028234663852886e38),
        ("float8send(-0.0::float8)", 701, -0.0),
        (
            "timetz_send('23:59:59.5-03:30'::timetz)",
            1266,
            {"micros": 86_399_500_000, "offset_seconds": -12_600},  # east of UTC
        ),
        (
            "timetz_send('24:00:00+15:59'::timetz)",
            1266,
            {"micros": 86_400_000_000, "offset_seconds": 57_540},
        ),
        ("date_send('9999-12-31'::date)", 1082, dt.date(9999, 12, 31)),
        ("timestamp_send('0001-01-01 00:00:00'::timestamp)", 1114, dt.datetime(1, 1, 1)),
        ("interval_send('-3 days 04:05:06.000007'::interval)", 1186, "P-3DT4H5M6.000007S"),
        ("array_send('{1 mon,30 days,NULL}'::interval[])", 1187, ["P1M", "P30D", None]),
        ("array_send('{1,NULL,3}'::int[])", 1007, [1, None, 3]),
        ("array_send('{}'::text[])", 1009, []),
        ("array_send('{NULL}'::text[])", 1009, [None]),
        (
            "array_send('{12:00+02,NULL}'::timetz[])",
            1270,
            [{"micros": 43_200_000_000, "offset_seconds": 7200}, None],
        ),
        ("array_send('{1.50,NaN}'::numeric[])", 1231, "NaN"),
        ("array_send(ARRAY['2024-01-01'::date])", 1182, [dt.date(2024, 1, 1)]),
        ("array_send(ARRAY['a','b']::varchar[])", 1015, ["a", "b"]),
        (
            "uuid_send('A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11')",
            2950,
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
        ),
        ("boolsend(false)", 16, False),
    ],
)
def test_binary_values_of_the_server(case: PgCase, send: str, oid: int, expected: Any) -> None:
    value = _decoder(case).decode(oid, _sent(case, send), WHERE)
    if expected == "NaN" and isinstance(value, list):
        assert str(value[0]) == "1.50" and value[1].is_nan()
    elif expected == "NaN":
        assert value.is_nan()
    else:
        assert value == expected and type(value) is type(expected)
        if isinstance(expected, D):
            assert str(value) == str(expected)  # the display scale too


def test_enum_domain_and_their_arrays(case: PgCase) -> None:
    case.sql(
        "CREATE TYPE mood AS ENUM ('sad', 'happy')",
        "CREATE DOMAIN positive AS numeric(4,1) CHECK (VALUE > 0)",
    )
    oids = dict(
        case.connection.execute(
            "SELECT typname, oid::int FROM pg_type WHERE typname IN ('mood', '_mood', 'positive')"
        ).fetchall()
    )
    decoder = _decoder(case)
    assert decoder.decode(oids["mood"], _sent(case, "enum_send('happy'::mood)"), WHERE) == "happy"
    moods = _sent(case, "array_send(ARRAY['sad', 'happy']::mood[])")
    assert decoder.decode(oids["_mood"], moods, WHERE) == ["sad", "happy"]
    assert decoder.decode(oids["positive"], _sent(case, "numeric_send(2.5)"), WHERE) == D("2.5")
    assert decoder.storable(oids["mood"]) and decoder.storable(oids["positive"])
    assert decoder.storable(oids["_mood"]) and decoder.storable(1266)  # mood[], timetz
    assert decoder.storable(1270) and decoder.storable(1007)  # timetz[], integer[]
    assert decoder.storable(600) and decoder.storable(1017)  # point, point[] (issue 36)
    assert not decoder.storable(3643) and not decoder.storable(791)  # tsvector, money[]


@pytest.mark.parametrize(
    ("send", "oid", "problem"),
    [
        ("date_send('infinity'::date)", 1082, "infinite date"),
        ("timestamptz_send('-infinity'::timestamptz)", 1184, "infinite timestamp"),
        ("array_send('{{1,2},{3,4}}'::int[])", 1007, "array with 2 dimensions"),
        ("array_send('[0:1]={1,2}'::int[])", 1007, "array with 1 dimensions and lower bound 0"),
    ],
)
def test_values_without_a_logical_value_are_clear_errors(
    case: PgCase, send: str, oid: int, problem: str
) -> None:
    with pytest.raises(TerminalError, match=problem) as raised:
        _decoder(case).decode(oid, _sent(case, send), WHERE)
    assert raised.value.context == {"table": "public.t", "column": "c"}
