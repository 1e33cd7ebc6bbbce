"""Type matrix cases added so that the servers' catalogs are covered
(``tests/validator/type_matrix/type_catalog.py`` lists what each server offers and what is refused).

MariaDB: the unsigned numbers, every TEXT and BLOB size, BINARY, SET, BIT(64).
PostgreSQL: ``json``, a domain of the user's, the domains of ``information_schema``,
``time with time zone`` and an array of every type the matrix stores in PostgreSQL whose
array type the connector carries (built from that type's case); ``interval`` and the other
types carried as their text are in ``type_matrix_text_cases.py``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa

from tests.validator.type_matrix.type_matrix_text_cases import TEXT_CASES
from tests.validator.type_matrix.type_matrix_values import (
    EMOJI,
    JSON_DOCUMENTS,
    JSON_SQL,
    MAX_MARIADB_TIMESTAMP,
    MAX_SINGLE,
    MAX_UNSIGNED_BIGINT,
    UTC,
    Case,
    bump_text,
    flip_bit,
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

TEN_MILLIS = dt.timedelta(milliseconds=10)
ARRAY_SQL = "arrays: no SQL form in PostgreSQL's digest SQL (connectors/postgres/pushdown.py)"
TIME_TZ_SQL = "time with time zone: no SQL form in PostgreSQL's digest SQL"


def _unsigned(name: str, maria: str, pg: str, duck: str, arrow: pa.DataType, bits: int) -> Case:
    high = (1 << bits) - 1
    values = (0, high, None, 1, 1 << (bits - 1))
    return Case(name, maria, pg, duck, arrow, values, step_integer(0, high))


def _text(name: str, maria: str, values: tuple[str | None, ...], pg: str = "text") -> Case:
    return Case(name, maria, pg, "VARCHAR", pa.string(), values, bump_text)


def _blob(name: str, maria: str, values: tuple[bytes | None, ...]) -> Case:
    return Case(name, maria, "bytea", "BLOB", pa.binary(), values, flip_bit)


def _decimals(*texts: str | None) -> tuple[Decimal | None, ...]:
    return tuple(None if text is None else Decimal(text) for text in texts)


def toggle_member(value: str) -> str:
    """A SET('a','b','c') value with ``b`` added or removed (members in definition order)."""
    members = set(value.split(",")) - {""}
    members ^= {"b"}
    return ",".join(m for m in ("a", "b", "c") if m in members)


def yes_or_no(value: str) -> str:
    """The other answer of ``information_schema.yes_or_no``."""
    return "NO" if value == "YES" else "YES"


UNSIGNED_CASES = (
    _unsigned("c_tinyint_unsigned", "TINYINT UNSIGNED", "smallint", "UTINYINT", pa.int16(), 8),
    _unsigned("c_smallint_unsigned", "SMALLINT UNSIGNED", "integer", "USMALLINT", pa.int32(), 16),
    _unsigned("c_mediumint_unsigned", "MEDIUMINT UNSIGNED", "integer", "UINTEGER", pa.int32(), 24),
    Case(
        "c_decimal_unsigned",
        "DECIMAL(10,2) UNSIGNED",
        "numeric(10,2)",
        "DECIMAL(10,2)",
        pa.decimal128(10, 2),
        _decimals("0.00", "99999999.99", None, "0.01", "1.10"),
        step_decimal("0.01", "99999999.99"),
    ),
    Case(
        "c_float_unsigned",
        "FLOAT UNSIGNED",
        "real",
        "REAL",
        pa.float32(),
        (0.5, MAX_SINGLE, to_single(1.401298464324817e-45), None, 0.0, to_single(1e-3)),
        next_single,
        to_lake=to_single,
    ),
    Case(
        "c_double_unsigned",
        "DOUBLE UNSIGNED",
        "double precision",
        "DOUBLE",
        pa.float64(),
        (0.1, 1.7976931348623157e308, 5e-324, None, 0.0),
        next_double,
    ),
    Case(  # up to 2**64 - 1, beyond int64: read as DECIMAL(20,0) like BIGINT UNSIGNED
        "c_bit64",
        "BIT(64)",
        "numeric(20,0)",
        "UBIGINT",
        pa.decimal128(20, 0),
        (0, MAX_UNSIGNED_BIGINT, None, 1 << 63, 1),
        lambda v: v ^ 1,
        to_lake=Decimal,
    ),
)

STRING_CASES = (
    _text("c_tinytext", "TINYTEXT", ("short", "", EMOJI * 63, None, "Grüße")),
    # a length of 5 digits, beyond TEXT's 65,535 bytes
    _text("c_mediumtext", "MEDIUMTEXT", ("m" * 70_000 + EMOJI, None, "Ω", "", "a", "b")),
    _text("c_longtext", "LONGTEXT", ("l" * 1000, "x", None)),
    Case(  # MariaDB pads BINARY(4) with 0x00 (https://mariadb.com/kb/en/binary/): full values
        "c_binary4",
        "BINARY(4)",
        "bytea",
        "BLOB",
        pa.binary(),
        (b"\x00\x00\x00\x00", b"\xff" * 4, b"ab\x00\x00", None, bytes(range(4))),
        flip_bit,
    ),
    _blob("c_tinyblob", "TINYBLOB", (b"", b"\x00", b"\xff" * 255, None)),
    _blob("c_blob", "BLOB", (bytes(range(256)) * 4, None, b"b")),
    _blob("c_mediumblob", "MEDIUMBLOB", (b"\x01" * 70_000, None, b"", b"a", b"b", b"c")),
    _blob("c_longblob", "LONGBLOB", (b"\xfe" * 1000, b"z", None)),
    Case(
        "c_set",
        "SET('a','b','c')",
        "text",
        "VARCHAR",
        pa.string(),
        ("a", "a,c", "a,b,c", "", None, "c"),
        toggle_member,
    ),
)

POSTGRES_SCALAR_CASES = (
    Case(  # json keeps the document's text; its canonical form is jsonb's
        "c_json_text",
        "JSON",
        "json",
        "JSON",
        pa.string(),
        JSON_DOCUMENTS,
        step_json,
        not_in_sql=JSON_SQL,
    ),
    Case(  # a domain of the user's, over integer
        "c_domain",
        "INT",
        "amount",
        "INTEGER",
        pa.int32(),
        (0, 999_999, -999_999, None, 7),
        step_integer(-999_999, 999_999),
    ),
    Case(  # information_schema's domains (SQL standard): integer >= 0
        "c_cardinal_number",
        "INT UNSIGNED",
        "information_schema.cardinal_number",
        "UINTEGER",
        pa.int64(),
        (0, 2_147_483_647, None, 1),
        step_integer(0, 2_147_483_647),
    ),
    _text(
        "c_character_data",
        "VARCHAR(60)",
        ("plain", "", "Grüße", None),
        "information_schema.character_data",
    ),
    Case(
        "c_yes_or_no",
        "VARCHAR(3)",
        "information_schema.yes_or_no",
        "VARCHAR",
        pa.string(),
        ("YES", "NO", None),
        yes_or_no,
    ),
    Case(  # timestamp(2) with time zone; MariaDB and DuckDB keep 6 digits, so only
        # PostgreSQL's rounding rule reduces times in each comparison (one rule a comparison)
        "c_time_stamp",
        "TIMESTAMP(6) NULL",
        "information_schema.time_stamp",
        "TIMESTAMPTZ",
        pa.timestamp("us", tz="UTC"),
        (
            dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC),
            dt.datetime(2038, 1, 19, 3, 14, 7, 990000, tzinfo=UTC),
            dt.datetime(2025, 6, 1, 12, 0, 0, 10000, tzinfo=UTC),
            None,
        ),
        step_timestamp(TEN_MILLIS, MAX_MARIADB_TIMESTAMP),
    ),
)


def _offset(hours: int, minutes: int = 0) -> dt.timezone:
    return dt.timezone(dt.timedelta(hours=hours, minutes=minutes))


def step_time_tz(value: dt.time) -> dt.time:
    """One microsecond later on the wall clock, the offset kept."""
    return step_time(value.replace(tzinfo=None)).replace(tzinfo=value.tzinfo)


def time_tz_to_lake(value: dt.time) -> dict[str, int]:
    """The struct the lake keeps a ``time with time zone`` as (``merkle.types.TimeTzType``)."""
    offset = value.utcoffset()
    assert offset is not None
    return {"micros": time_micros(value), "offset_seconds": int(offset.total_seconds())}


POSTGRES_ONLY_CASES = (
    Case(
        "c_timetz",
        None,
        "time(6) with time zone",
        None,  # the DuckDB connector maps no TIMETZ
        pa.struct([pa.field("micros", pa.int64()), pa.field("offset_seconds", pa.int32())]),
        (
            dt.time(12, 0, tzinfo=_offset(2)),
            dt.time(0, 0, tzinfo=dt.UTC),
            dt.time(23, 59, 59, 999_999, tzinfo=_offset(-3, -30)),
            None,
            dt.time(11, 0, tzinfo=_offset(1)),  # the instant of the first, another value
        ),
        step_time_tz,
        to_lake=time_tz_to_lake,
        not_in_sql=TIME_TZ_SQL,
        over_jdbc=False,
    ),
)


def _array_change(change: Callable[[Any], Any], element: Any) -> Callable[[Any], Any]:
    """The first element changed, or ``element`` added to the empty array."""

    def changed(value: Sequence[Any]) -> list[Any]:
        if not value:
            return [element]
        first = element if value[0] is None else change(value[0])
        return [element if first is None else first, *value[1:]]

    return changed


def _array_to_lake(to_lake: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: [None if item is None else to_lake(item) for item in value]


def array_case(scalar: Case) -> Case:
    """An array of ``scalar``'s PostgreSQL type: some of its values and a NULL element, the
    empty array, NULL, and one element; stored in PostgreSQL and the lake (MariaDB has no
    arrays; the DuckDB connector maps no LIST)."""
    assert scalar.postgres is not None
    values = [value for value in scalar.values if value is not None]
    return Case(
        f"{scalar.name}_array",
        None,
        f"{scalar.postgres}[]",
        None,  # the DuckDB connector maps no LIST
        None if scalar.arrow is None else pa.list_(scalar.arrow),
        ([*values[:3], None], [], None, values[-1:]),
        _array_change(scalar.change, values[0]),
        to_lake=_array_to_lake(scalar.to_lake),
        not_in_sql=ARRAY_SQL,
        over_jdbc=False,
    )


CATALOG_CASES: tuple[Case, ...] = (
    *UNSIGNED_CASES,
    *STRING_CASES,
    *POSTGRES_SCALAR_CASES,
    *POSTGRES_ONLY_CASES,
    *TEXT_CASES,
)
