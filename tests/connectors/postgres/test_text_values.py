"""The stream prints network, range, multirange, geometric and interval values as the server
does: each value's send function output (what pgoutput sends in binary), decoded by
``wal_values``, equals the value's ``::text`` in a session of the connector (the snapshot's
and the validator's reading), on the private cluster. Edge values: IPv6 zero runs and
embedded IPv4, BC dates and timestamps, infinities, quoted range bounds, float notation
switches, negative zero and NaN; intervals with mixed signs, fractions of a second, and
each field at its limits. An interval's text reads back as the very same value."""

from __future__ import annotations

from decimal import Decimal

import pytest

from connectors.postgres.errors import ValueContext
from connectors.postgres.pgoutput.binary_values import ValueDecoder, lookup_type
from connectors.registry import connector_for
from tests.connectors.postgres.helpers import PgCase

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

# Written in the postgres style (the server's default input): months, days and time, each
# with its own sign; the ISO 8601 text must keep all three apart.
INTERVALS = (
    "0",
    "1 mon",
    "30 days",
    "24:00:00",
    "1 year 2 mons 3 days 04:05:06.000007",
    "-1 year -2 mons +3 days -04:05:06.5",
    "1 year -1 mon",
    "-1 mon 30 days",
    "1 day -00:00:00.000001",
    "-00:00:00.5",
    "00:00:59.999999",
    "-00:01:00",
    "00:00:06.12",
    "-3 days",
    "178000000 years",
    "-178000000 years",
    "2147483647 days",
    "-2147483648 days",
    "2562047788:00:54.775807",
    "-2562047788:00:54.775807",
    "2147483647 mons 2147483647 days 2562047788:00:54.775806",
)
VALUES: dict[str, tuple[str, ...]] = {
    "inet": (
        "10.0.0.1",
        "10.0.0.1/8",
        "0.0.0.0/0",
        "::",
        "::1",
        "::2",
        "1::",
        "1:0:0:2:0:0:0:3",
        "1:0:0:2:0:0:3:4",
        "0:0:1:0:0:0:0:0",
        "fe80::1:2/64",
        "::ffff:1.2.3.4",
        "::1.2.3.4",
        "::ffff:0:1.2.3.4",
        "::0:1:0:0/100",
        "2001:db8:85a3:8d3:1319:8a2e:370:7348/128",
    ),
    "cidr": ("10.0.0.0/8", "10.1.2.3/32", "::/0", "2001:db8::/32", "::ffff:1.2.3.0/120"),
    "macaddr": ("08:00:2b:01:02:03", "ff:ff:ff:ff:ff:ff"),
    "macaddr8": ("08:00:2b:01:02:03:04:05",),
    "point": ("(1,2)", "(-0,0.1)", "(1e15,1e-5)", "(123456789012345,0.0001)", "(NaN,Infinity)"),
    "line": ("{1,-1,0.5}",),
    "lseg": ("[(1,2),(3,4.25)]",),
    "box": ("(3,4),(1,2)", "(1,2),(3,4)"),
    "path": ("((1,2),(3,4),(5,6))", "[(1,2),(3,4)]"),
    "polygon": ("((0,0),(1,1),(1,0))",),
    "circle": ("<(1,2),3.5>",),
    "int4range": ("empty", "[1,5)", "(,)", "[-3,)", "(,7]"),
    "int8range": ("[-9223372036854775808,9223372036854775807)",),
    "numrange": ("[1.50,2.000]", "(,0.0000001)", "[-Infinity,Infinity]"),
    "daterange": (
        "[2024-01-01,2024-02-01)",
        "[4713-11-24 BC,infinity)",
        "[-infinity,5874897-12-31)",
    ),
    "tsrange": ("[2024-01-01 00:00:00.5,2024-01-01 12:34:56.000001)", "[0001-01-01 BC,)"),
    "tstzrange": ("[2024-01-01 00:00+02,2024-01-02 00:00:00.123456+00)", "(,infinity]"),
    "int4multirange": ("{}", "{[1,3),[5,7)}"),
    "nummultirange": ("{[1.1,2.20]}",),
    "datemultirange": ("{[2024-01-01,2024-01-03),[2024-02-01,)}",),
    "tsmultirange": ("{[2024-01-01 00:00,2024-01-01 01:00)}",),
    "tstzmultirange": ("{(,2024-01-01 00:00+05:30]}",),
    "interval": INTERVALS,
}


@pytest.mark.parametrize("type_name", sorted(VALUES))
def test_binary_values_print_as_the_server_prints_them(case: PgCase, type_name: str) -> None:
    connector = connector_for(case.server.url(case.database))
    where = ValueContext("t", "c")
    with connector.connect() as connection:
        decoder = ValueDecoder(lambda oid: lookup_type(connection, oid))
        for text in VALUES[type_name]:
            for value in (f"'{text}'::{type_name}", f"ARRAY['{text}'::{type_name}, NULL]"):
                oid, send, expected = connection.execute(
                    f"SELECT pg_typeof(v)::oid, (SELECT typsend FROM pg_type WHERE oid ="
                    f" pg_typeof(v)::oid)::text, v::text FROM (SELECT {value} AS v) AS s"
                ).fetchone()
                (data,) = connection.execute(f"SELECT {send}({value})").fetchone()
                decoded = decoder.decode(oid, data, where)
                if isinstance(decoded, list):  # ARRAY[v, NULL]: compared element by element
                    (single,) = connection.execute(f"SELECT ({value})[1]::text").fetchone()
                    assert decoded == [single, None], value
                else:
                    assert decoded == expected, value


def test_money_is_its_cents_whatever_lc_monetary_says(case: PgCase) -> None:
    connector = connector_for(case.server.url(case.database))
    where = ValueContext("t", "c")
    decoder = ValueDecoder(lambda oid: lookup_type(connection, oid))
    with connector.connect() as connection:
        for text in ("1.5", "-92233720368547758.08", "92233720368547758.07", "0"):
            (data,) = connection.execute(f"SELECT cash_send('{text}'::money)").fetchone()
            assert decoder.decode(790, data, where) == Decimal(text)


def test_an_intervals_text_reads_back_as_the_same_value(case: PgCase) -> None:
    """``::text`` in a session of the connector (IntervalStyle iso_8601) keeps months, days
    and microseconds apart: read back in any IntervalStyle, it is the same three fields
    (compared by interval_send: the type's `=` holds '1 mon' and '30 days' equal)."""
    connector = connector_for(case.server.url(case.database))
    with connector.connect() as connection:
        read = [
            connection.execute(
                f"SELECT v::text, interval_send(v) FROM (SELECT '{value}'::interval AS v) AS s"
            ).fetchone()
            for value in INTERVALS
        ]
    texts = [text for text, _ in read]
    assert texts[1:3] == ["P1M", "P30D"]
    assert texts[5] == "P-1Y-2M3DT-4H-5M-6.5S"
    for style in ("postgres", "postgres_verbose", "sql_standard", "iso_8601"):
        case.connection.execute(f"SET IntervalStyle = {style}")
        for text, sent in read:
            (again,) = case.connection.execute(
                "SELECT interval_send(%s::interval)", (text,)
            ).fetchone()
            assert again == sent, (style, text)
