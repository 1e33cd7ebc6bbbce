"""The cross-database type matrix as data: one case per logical column type.

Each case names the column's native type in MariaDB, PostgreSQL and DuckDB and its Arrow
type in the lake, lists representative values (edges included: epoch edges, minimum and
maximum, NULL, non-ASCII text and emoji, CHAR padding) and says what the smallest
meaningful change of a value is. Values are *logical* values: each product stores them
its own way (a ``timestamp(3)`` rounds the microseconds it is given), and ``to_lake``
gives the value the lake's Arrow column holds.

A case without a MariaDB (or PostgreSQL) type is not stored in that product: PostgreSQL's
intervals, arrays and ``time with time zone`` have no MariaDB counterpart. Every case is
stored in DuckDB and the lake. ``not_in_sql`` says why the databases' own digest SQL
(``connectors/<product>/pushdown.py``) refuses a case (``NotPushable``): comparisons that
hash in that SQL leave it out, and ``test_type_catalog.py`` checks that
the SQL really refuses it.

The row layout: row ``id`` (1-based) holds ``values[(id - 1) % len(values)]`` of every
case; ``change_rows`` gives each case its own row to change, so that only the row hash can
find each change (a row changed in two columns would be reported for either, and then
both named).

The cases of this module come first; ``type_matrix_catalog_cases.py`` adds
those that cover the servers' catalogs (``type_catalog.py``), and
``ARRAY_OF`` an array of each PostgreSQL type listed.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa

from tests.validator.type_matrix.type_matrix_catalog_cases import CATALOG_CASES, array_case
from tests.validator.type_matrix.type_matrix_values import (
    EMOJI,
    JSON_DOCUMENTS,
    JSON_SQL,
    MAX_DATETIME,
    MAX_MARIADB_TIMESTAMP,
    MAX_SINGLE,
    MAX_UNSIGNED_BIGINT,
    ONE_MICRO,
    ONE_MILLI,
    POSTGRES_TYPES,
    ROWS,
    UTC,
    Case,
    bump_text,
    flip_bit,
    flip_uuid,
    int_case,
    next_double,
    next_single,
    step_decimal,
    step_integer,
    step_json,
    step_time,
    step_timestamp,
    time_micros,
    to_single,
)

__all__ = [  # with the names the tests take from here rather than type_matrix_values
    "CASES",
    "POSTGRES_TYPES",
    "ROWS",
    "Case",
    "change_rows",
    "duckdb_millis",
    "logical_rows",
    "postgres_millis",
]


FIRST_CASES: tuple[Case, ...] = (
    int_case("c_tinyint", "TINYINT", "smallint", "TINYINT", pa.int8(), 8),
    int_case("c_smallint", "SMALLINT", "smallint", "SMALLINT", pa.int16(), 16),
    int_case("c_mediumint", "MEDIUMINT", "integer", "INTEGER", pa.int32(), 24),
    int_case("c_int", "INT", "integer", "INTEGER", pa.int32(), 32),
    int_case("c_bigint", "BIGINT", "bigint", "BIGINT", pa.int64(), 64),
    Case(
        "c_int_unsigned",
        "INT UNSIGNED",
        "bigint",
        "UINTEGER",
        pa.int64(),
        (0, 4_294_967_295, None, 1, 2_147_483_648),
        step_integer(0, 4_294_967_295),
    ),
    Case(
        "c_bigint_unsigned",
        "BIGINT UNSIGNED",
        "numeric(20,0)",
        "UBIGINT",
        pa.decimal128(20, 0),
        (0, MAX_UNSIGNED_BIGINT, None, 1 << 63, 9_223_372_036_854_775_807),
        step_integer(0, MAX_UNSIGNED_BIGINT),
        to_lake=Decimal,
    ),
    Case(
        "c_year",
        "YEAR",
        "smallint",
        "SMALLINT",
        pa.int16(),
        (1970, 1901, 2155, None, 2000, 0),  # YEAR 0000: the text '0000', the number 0
        step_integer(1901, 2155),
    ),
    Case(
        "c_decimal_10_2",
        "DECIMAL(10,2)",
        "numeric(10,2)",
        "DECIMAL(10,2)",
        pa.decimal128(10, 2),
        tuple(
            Decimal(v) if v is not None else None
            for v in ("0.00", "-0.01", "99999999.99", "-99999999.99", None, "1.10", "100.00")
        ),
        step_decimal("0.01", "99999999.99"),
    ),
    Case(
        "c_decimal_38_10",
        "DECIMAL(38,10)",
        "numeric(38,10)",
        "DECIMAL(38,10)",
        pa.decimal128(38, 10),
        tuple(
            Decimal(v) if v is not None else None
            for v in (
                "0",
                "9999999999999999999999999999.9999999999",
                "-9999999999999999999999999999.9999999999",
                "0.0000000001",
                None,
                "123.4500000000",
            )
        ),
        step_decimal("0.0000000001", "9999999999999999999999999999.9999999999"),
    ),
    Case(  # DECIMAL vs unconstrained NUMERIC: read as decimal(38,18) on the PostgreSQL side
        "c_decimal_vs_numeric",
        "DECIMAL(30,10)",
        "numeric",
        "DECIMAL(38,18)",
        pa.decimal128(38, 18),
        tuple(
            Decimal(v) if v is not None else None
            for v in (
                "0",
                "99999999999999999999.9999999999",
                "-0.0000000001",
                "1.5",
                None,
                "-12345.6789000000",
            )
        ),
        step_decimal("0.0000000001", "99999999999999999999.9999999999"),
    ),
    Case(  # an integer kept as a decimal with scale 0 on the source
        "c_decimal_as_bigint",
        "DECIMAL(18,0)",
        "bigint",
        "BIGINT",
        pa.int64(),
        tuple(
            Decimal(v) if v is not None else None
            for v in ("0", "999999999999999999", "-999999999999999999", None, "7")
        ),
        step_decimal("1", "999999999999999999"),
        to_lake=lambda v: int(v),
    ),
    Case(
        "c_double",
        "DOUBLE",
        "double precision",
        "DOUBLE",
        pa.float64(),
        (
            0.1,
            -0.0,
            1.7976931348623157e308,
            5e-324,
            None,
            -1234.5678,
            1 / 3,
            2.2250738585072014e-308,
        ),
        next_double,
    ),
    Case(
        "c_float",
        "FLOAT",
        "real",
        "REAL",
        pa.float32(),
        (0.5, to_single(0.1), MAX_SINGLE, to_single(1.401298464324817e-45), None, -2.5, 1e-3),
        next_single,
        to_lake=to_single,
    ),
    Case(
        "c_bit1_bool",
        "BIT(1)",
        "boolean",
        "BOOLEAN",
        pa.bool_(),
        (True, False, None),
        lambda v: not v,
    ),
    Case(
        "c_bit8",
        "BIT(8)",
        "smallint",
        "UTINYINT",
        pa.int16(),
        (0, 255, 1, None, 128),
        lambda v: v ^ 1,
    ),
    Case(
        "c_char10",
        "CHAR(10)",
        "character(10)",
        "VARCHAR",
        pa.string(),
        ("ab", "", "a b", "ü", EMOJI, None, "abcdefghij", " lead"),
        bump_text,
    ),
    Case(
        "c_varchar_utf8mb4",
        "VARCHAR(60)",
        "character varying(60)",
        "VARCHAR",
        pa.string(),
        (
            "plain",
            "",
            "Grüße, naïve café",
            "日本語テキスト",
            f"emoji {EMOJI}\N{PARTY POPPER}",
            None,
            "tab\tnew\nline",
            "quote ' \" \\ back",
            "trailing  ",
        ),
        bump_text,
    ),
    Case(
        "c_text",
        "TEXT",
        "text",
        "VARCHAR",
        pa.string(),
        ("x" * 3000 + EMOJI, "short", None, "Ω" * 500, "NULL"),
        bump_text,
    ),
    Case(
        "c_enum",
        "ENUM('red','green','blue')",
        "color",
        "VARCHAR",
        pa.string(),
        ("red", "green", "blue", None),
        lambda v: "green" if v != "green" else "blue",
    ),
    Case(
        "c_varbinary",
        "VARBINARY(32)",
        "bytea",
        "BLOB",
        pa.binary(),
        (b"\x00", b"\xff" * 32, b"", None, b"abc\x00def", bytes(range(16))),
        flip_bit,
    ),
    Case(
        "c_date",
        "DATE",
        "date",
        "DATE",
        pa.date32(),
        (
            dt.date(1970, 1, 1),
            dt.date(1969, 12, 31),
            dt.date(1000, 1, 1),
            dt.date(9999, 12, 31),
            None,
            dt.date(2000, 2, 29),
            dt.date(1900, 3, 1),
        ),
        lambda v: v + dt.timedelta(days=1) if v < dt.date(9999, 12, 31) else v - dt.timedelta(1),
    ),
    Case(
        "c_datetime6",
        "DATETIME(6)",
        "timestamp(6) without time zone",
        "TIMESTAMP",
        pa.timestamp("us"),
        (
            dt.datetime(1970, 1, 1),
            dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
            dt.datetime(1000, 1, 1),
            MAX_DATETIME,
            None,
            dt.datetime(2025, 3, 30, 2, 30, 0, 123456),  # a wall clock Europe/Berlin skips
            dt.datetime(2025, 10, 26, 2, 30, 0, 654321),  # one it passes twice
        ),
        step_timestamp(ONE_MICRO, MAX_DATETIME),
    ),
    Case(  # DATETIME(6) vs TIMESTAMP(3): the targets round to milliseconds
        "c_datetime6_vs_ms",
        "DATETIME(6)",
        "timestamp(3) without time zone",
        "TIMESTAMP_MS",
        pa.timestamp("us"),  # Delta Lake keeps microseconds only
        (
            dt.datetime(2025, 3, 1, 12, 0, 0, 400),
            dt.datetime(2025, 3, 1, 12, 0, 0, 600),
            dt.datetime(2025, 12, 31, 23, 59, 59, 999600),  # rounds into the next year
            dt.datetime(2025, 3, 1, 12, 0, 0, 1500),  # an exact half, after 2000
            dt.datetime(1970, 1, 1),
            dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
            None,
            dt.datetime(1969, 12, 31, 23, 59, 59, 999400),
        ),
        step_timestamp(ONE_MILLI, MAX_DATETIME),
    ),
    Case(  # exact halves before 2000-01-01 (PostgreSQL's own epoch)
        "c_datetime6_vs_ms_half",
        "DATETIME(6)",
        "timestamp(3) without time zone",
        "TIMESTAMP_MS",
        pa.timestamp("us"),  # Delta Lake keeps microseconds only
        (
            dt.datetime(1999, 6, 15, 8, 30, 0, 500),
            dt.datetime(1969, 12, 31, 23, 59, 59, 999500),
            None,
            dt.datetime(1985, 1, 1, 0, 0, 0, 1500),
        ),
        step_timestamp(ONE_MILLI, MAX_DATETIME),
    ),
    Case(
        "c_timestamp_tz",
        "TIMESTAMP(6) NULL",
        "timestamp(6) with time zone",
        "TIMESTAMPTZ",
        pa.timestamp("us", tz="UTC"),
        (
            dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC),  # MariaDB's first TIMESTAMP
            MAX_MARIADB_TIMESTAMP,
            dt.datetime(2025, 3, 30, 1, 0, 0, tzinfo=UTC),  # Berlin springs forward
            dt.datetime(2025, 10, 26, 0, 30, 0, 1, tzinfo=UTC),  # Berlin 02:30, first time
            dt.datetime(2025, 10, 26, 1, 30, 0, 2, tzinfo=UTC),  # Berlin 02:30, second time
            None,
        ),
        step_timestamp(ONE_MICRO, MAX_MARIADB_TIMESTAMP),
    ),
    Case(
        "c_time6",
        "TIME(6)",
        "time(6) without time zone",
        "TIME",
        pa.int64(),
        (dt.time(0), dt.time(23, 59, 59, 999999), dt.time(12, 0, 0, 500000), None),
        step_time,
        to_lake=time_micros,
    ),
    Case(
        "c_json",
        "JSON",
        "jsonb",
        "JSON",
        pa.string(),
        JSON_DOCUMENTS,
        step_json,
        not_in_sql=JSON_SQL,
    ),
    Case(
        "c_uuid",
        "UUID",
        "uuid",
        "UUID",
        pa.string(),
        (
            "00000000-0000-0000-0000-000000000000",
            "ffffffff-ffff-ffff-ffff-ffffffffffff",
            "123e4567-e89b-12d3-a456-426614174000",
            None,
        ),
        flip_uuid,
    ),
    Case(
        "c_uuid_varchar",
        "VARCHAR(36)",
        "uuid",
        "UUID",
        pa.string(),
        ("6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b", None, "00000000-0000-0000-0000-000000000001"),
        flip_uuid,
    ),
    Case(
        "c_uuid_char36",
        "CHAR(36)",
        "uuid",
        "UUID",
        pa.string(),
        ("6f1c2a9e-3b4d-4e5f-8a7b-9c0d1e2f3a4b", None, "00000000-0000-0000-0000-000000000001"),
        flip_uuid,
    ),
    Case(  # MariaDB's BOOLEAN is TINYINT(1): compared as boolean via columns.boolean
        "c_tinyint1_bool",
        "TINYINT(1)",
        "boolean",
        "BOOLEAN",
        pa.bool_(),
        (True, False, None, False),
        lambda v: not v,
    ),
)

# The PostgreSQL types whose arrays the matrix stores, by the case that stores each.
ARRAY_OF = (
    "c_smallint", "c_int", "c_bigint", "c_decimal_10_2", "c_float", "c_double",
    "c_bit1_bool", "c_char10", "c_varchar_utf8mb4", "c_text", "c_varbinary", "c_date",
    "c_time6", "c_datetime6", "c_timestamp_tz", "c_uuid", "c_json", "c_json_text", "c_enum",
    "c_domain", "c_cardinal_number", "c_character_data", "c_time_stamp", "c_yes_or_no",
    "c_interval", "c_timetz", "c_point",
)  # fmt: skip
_SCALARS = {case.name: case for case in (*FIRST_CASES, *CATALOG_CASES)}
# The first cases, then those added to cover the servers' catalogs, then the arrays.
CASES = (*FIRST_CASES, *CATALOG_CASES, *(array_case(_SCALARS[name]) for name in ARRAY_OF))


def change_rows(cases: Sequence[Case] = CASES, rows: int = ROWS) -> dict[str, int]:
    """Each case's row to change: its own row, whose value has a one-unit change."""
    chosen: dict[str, int] = {}
    used: set[int] = set()
    for case in cases:
        for row_id in range(1, rows + 1):
            value = case.value(row_id)
            if row_id in used or value is None or case.change(value) is None:
                continue
            chosen[case.name] = row_id
            used.add(row_id)
            break
        else:
            raise AssertionError(f"no row left to change for {case.name}")
    return chosen


def logical_rows(replica: bool = False) -> list[dict[str, Any]]:
    """Every row as {column: logical value}.

    Rows ``1..ROWS`` hold the values; rows ``ROWS+1..2*ROWS`` repeat them. In the replica
    (``replica=True``) each case's change row of that second half carries its change, so
    one comparison checks both: no difference in the first half, exactly the changes in
    the second.
    """
    targets = {name: ROWS + row for name, row in change_rows().items()} if replica else {}
    rows = []
    for row_id in range(1, 2 * ROWS + 1):
        row: dict[str, Any] = {"id": row_id}
        for case in CASES:
            value = case.value((row_id - 1) % ROWS + 1)
            if targets.get(case.name) == row_id:
                value = case.change(value)
            row[case.name] = value
        rows.append(row)
    return rows


def _half_away_from_zero_millis(value: dt.datetime, epoch: dt.datetime) -> dt.datetime:
    micros = (value - epoch) // ONE_MICRO
    magnitude = (abs(micros) + 500) // 1000 * 1000
    return epoch + dt.timedelta(microseconds=magnitude if micros >= 0 else -magnitude)


def postgres_millis(value: dt.datetime) -> dt.datetime:
    """What ``timestamp(3)`` stores: half away from zero counted from 2000-01-01, PostgreSQL's
    own epoch (``AdjustTimestampForTypmod`` in src/backend/utils/adt/timestamp.c), so an
    exact half before 2000 goes to the earlier millisecond."""
    return _half_away_from_zero_millis(value, dt.datetime(2000, 1, 1))


def duckdb_millis(value: dt.datetime) -> dt.datetime:
    """What DuckDB's ``TIMESTAMP_MS`` stores: half away from zero counted from 1970-01-01,
    so an exact half before 1970 goes to the earlier millisecond."""
    return _half_away_from_zero_millis(value, dt.datetime(1970, 1, 1))
