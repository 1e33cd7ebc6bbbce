"""Type matrix cases of the PostgreSQL types issue 36 carries: ``money`` as an exact
``decimal(19,2)``, and network, range, multirange, geometric and interval types as the text
``::text`` prints (``connectors/postgres/types.py``; intervals in ISO 8601 form). The
other products store that text (or the decimal) in their own types, so each comparison
checks every reader agrees on it.

Each text case lists (value, changed value) pairs spelled as PostgreSQL prints them: the
change is another value of the type whose text differs, so a reader that printed values
its own way would report a false difference, and one that lost a digit a missed change.
"""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa

from tests.validator.type_matrix.type_matrix_values import Case, step_decimal

MAX_MONEY = "92233720368547758.07"


def _text_case(name: str, postgres: str, pairs: tuple[tuple[str, str], ...]) -> Case:
    changes = dict(pairs)
    values = (*changes, None)
    return Case(name, "VARCHAR(200)", postgres, "VARCHAR", pa.string(), values, changes.get)


TEXT_CASES: tuple[Case, ...] = (
    Case(
        "c_money",
        "DECIMAL(19,2)",
        "money",
        "DECIMAL(19,2)",
        pa.decimal128(19, 2),
        (*(Decimal(v) for v in ("0.00", "-92233720368547758.08", MAX_MONEY, "1.10")), None),
        step_decimal("0.01", MAX_MONEY),
    ),
    _text_case(
        "c_inet",
        "inet",
        (
            ("10.0.0.1/32", "10.0.0.2/32"),
            ("::ffff:1.2.3.4/128", "::ffff:1.2.3.5/128"),
            ("fe80::1:2/64", "fe80::1:3/64"),
            ("192.168.0.0/24", "192.168.0.0/25"),
        ),
    ),
    _text_case(
        "c_cidr", "cidr", (("10.0.0.0/8", "11.0.0.0/8"), ("2001:db8::/32", "2001:db9::/32"))
    ),
    _text_case("c_macaddr", "macaddr", (("08:00:2b:01:02:03", "08:00:2b:01:02:04"),)),
    _text_case("c_macaddr8", "macaddr8", (("08:00:2b:01:02:03:04:05", "08:00:2b:01:02:03:04:06"),)),
    _text_case("c_point", "point", (("(1,2)", "(1,2.5)"), ("(-0.5,1e+20)", "(-0.5,1e+21)"))),
    _text_case("c_line", "line", (("{1,-1,0.5}", "{1,-1,0.25}"),)),
    _text_case("c_lseg", "lseg", (("[(1,2),(3,4.25)]", "[(1,2),(3,4.5)]"),)),
    _text_case("c_box", "box", (("(3,4),(1,2)", "(3,4),(1,2.5)"),)),
    _text_case("c_path", "path", (("((1,2),(3,4),(5,6))", "[(1,2),(3,4),(5,6)]"),)),
    _text_case("c_polygon", "polygon", (("((0,0),(1,1),(1,0))", "((0,0),(1,1),(2,0))"),)),
    _text_case("c_circle", "circle", (("<(1,2),3.5>", "<(1,2),3.25>"),)),
    _text_case("c_int4range", "int4range", (("[1,5)", "[1,6)"), ("empty", "[1,2)"))),
    _text_case("c_int8range", "int8range", (("(,9223372036854775807)", "(,7)"),)),
    _text_case("c_numrange", "numrange", (("[1.50,2.000)", "[1.50,2.001)"),)),
    _text_case("c_daterange", "daterange", (("[2024-01-01,infinity)", "[2024-01-02,infinity)"),)),
    _text_case(
        "c_tsrange",
        "tsrange",
        (('["2024-01-01 00:00:00.5","2024-01-02 00:00:00")', '["2024-01-01 00:00:00.5",)'),),
    ),
    _text_case(
        "c_tstzrange",
        "tstzrange",
        (('["2024-01-01 00:00:00+00",infinity]', '["2024-01-01 00:00:01+00",infinity]'),),
    ),
    _text_case("c_int4multirange", "int4multirange", (("{[1,3),[5,7)}", "{[1,3),[5,8)}"),)),
    _text_case("c_int8multirange", "int8multirange", (("{}", "{[1,2)}"),)),
    _text_case("c_nummultirange", "nummultirange", (("{[1.1,2.20]}", "{[1.1,2.21]}"),)),
    _text_case(
        "c_datemultirange", "datemultirange", (("{[2024-01-01,2024-01-03)}", "{[2024-01-01,)}"),)
    ),
    _text_case(
        "c_tsmultirange",
        "tsmultirange",
        (('{["2024-01-01 00:00:00","2024-01-01 01:00:00")}', '{["2024-01-01 00:00:00",)}'),),
    ),
    _text_case(  # months, days and microseconds apart, each signed (IntervalStyle iso_8601)
        "c_interval",
        "interval",
        (
            ("P1Y2M3DT4H5M6.000007S", "P1Y2M3DT4H5M6.000008S"),
            ("P-1Y-2M3DT-4H-5M-6.5S", "P-1Y-2M3DT-4H-5M-6.4S"),
            ("P1M", "P30D"),  # equal to PostgreSQL's `=`, yet another value
            ("PT0S", "PT-0.000001S"),
            ("P178000000Y", "P177999999Y11M"),
            ("P-2147483648DT-0.5S", "P-2147483648D"),
        ),
    ),
    _text_case(
        "c_tstzmultirange",
        "tstzmultirange",
        (('{(,"2024-01-01 00:00:00+00"]}', '{(,"2024-01-01 00:00:00+00")}'),),
    ),
)
