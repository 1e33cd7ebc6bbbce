"""The cross-database type matrix as data: one case per logical column type.

Each case names the column's native type in MariaDB, PostgreSQL and DuckDB and its Arrow
type in the lake, lists representative values (edges included: epoch edges, minimum and
maximum, NULL, non-ASCII text and emoji, CHAR padding) and says what the smallest
meaningful change of a value is. Values are *logical* values: each product stores them
its own way (a ``timestamp(3)`` rounds the microseconds it is given), and ``to_lake``
gives the value the lake's Arrow column holds.

The row layout: row ``id`` (1-based) holds ``values[(id - 1) % len(values)]`` of every
case; ``change_rows`` gives each case its own row to change, so a reported (key, column)
pair names exactly one case.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import struct
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pyarrow as pa

ROWS = 32
UTC = dt.UTC
ONE_MICRO = dt.timedelta(microseconds=1)
ONE_MILLI = dt.timedelta(milliseconds=1)


@dataclass(frozen=True, slots=True)
class Case:
    """One logical column type, spelled natively by each product.

    Attributes:
        name: The column's name in every product.
        mariadb: MariaDB column type (always the source).
        postgres: PostgreSQL column type.
        duckdb: DuckDB column type.
        arrow: Arrow type of the lake's column.
        values: Logical values, edges and NULL included.
        change: The one-unit change of a value (None: the value has none, pick another).
        to_lake: The value the lake stores for a logical value.
    """

    name: str
    mariadb: str
    postgres: str
    duckdb: str
    arrow: pa.DataType
    values: tuple[Any, ...]
    change: Callable[[Any], Any]
    to_lake: Callable[[Any], Any] = lambda value: value

    def value(self, row_id: int) -> Any:
        """The logical value of row ``row_id``."""
        return self.values[(row_id - 1) % len(self.values)]


# --- one-unit changes -------------------------------------------------------------------


def step_integer(low: int, high: int) -> Callable[[Any], Any]:
    """+1, or -1 at the type's maximum."""
    return lambda v: v + 1 if v < high else v - 1


def step_decimal(quantum: str, high: str) -> Callable[[Any], Any]:
    """+1 unit in the last place of the scale, or -1 at the maximum."""
    unit, top = Decimal(quantum), Decimal(high)
    return lambda v: v + unit if v + unit <= top else v - unit


def next_double(value: float) -> float:
    """One ulp up (down at the largest double)."""
    return math.nextafter(value, -math.inf if value > 1e308 else math.inf)


def to_single(value: float) -> float:
    """``value`` as IEEE single precision."""
    return float(struct.unpack("<f", struct.pack("<f", value))[0])


def next_single(value: float) -> float:
    """One single-precision ulp up (down at the largest single)."""
    bits = struct.unpack("<i", struct.pack("<f", value))[0]
    if value == 0:
        bits = 1
    elif value >= 3.4e38:
        bits -= 1
    else:
        bits += 1 if value > 0 else -1
    return float(struct.unpack("<f", struct.pack("<i", bits))[0])


def bump_text(value: str) -> str | None:
    """The last character's code point plus one (None for empty or blank text)."""
    if not value.strip():
        return None
    stripped = value.rstrip(" ")
    return stripped[:-1] + chr(ord(stripped[-1]) + 1) + value[len(stripped) :]


def flip_bit(value: bytes) -> bytes | None:
    """The last byte with its lowest bit flipped (None for empty bytes)."""
    if not value:
        return None
    return value[:-1] + bytes([value[-1] ^ 1])


def step_timestamp(unit: dt.timedelta, high: dt.datetime) -> Callable[[Any], Any]:
    """One unit later, or earlier when later would pass ``high``."""
    return lambda v: v + unit if v + unit <= high else v - unit


def step_time(value: dt.time) -> dt.time:
    """One microsecond later (earlier at the last microsecond of the day)."""
    micros = time_micros(value)
    micros += 1 if micros < 86_400_000_000 - 1 else -1
    return (dt.datetime(2000, 1, 1) + dt.timedelta(microseconds=micros)).time()


def step_json(text: str) -> str | None:
    """The first scalar of the document changed: a number plus one, a string's last
    character bumped, a boolean flipped (None for a document without one)."""
    document = json.loads(text, parse_float=Decimal)

    def change(node: Any) -> tuple[Any, bool]:
        if isinstance(node, bool):
            return (not node), True
        if isinstance(node, int | Decimal):
            return node + 1, True
        if isinstance(node, str) and node:
            return bump_text(node) or node + "x", True
        if isinstance(node, dict):
            for key in sorted(node):
                node[key], done = change(node[key])
                if done:
                    return node, True
        if isinstance(node, list):
            for index, item in enumerate(node):
                node[index], done = change(item)
                if done:
                    return node, True
        return node, False

    changed, done = change(document)
    return to_json(changed) if done else None


def to_json(node: Any) -> str:
    """JSON text that keeps a Decimal's digits (``json.dumps`` cannot write one as a number)."""
    if isinstance(node, Decimal):
        return str(node)
    if isinstance(node, dict):
        return "{" + ", ".join(f"{to_json(k)}: {to_json(v)}" for k, v in node.items()) + "}"
    if isinstance(node, list):
        return "[" + ", ".join(to_json(item) for item in node) + "]"
    return json.dumps(node, ensure_ascii=False)


def flip_uuid(value: str) -> str:
    """The UUID with its last bit flipped."""
    return str(uuid.UUID(int=uuid.UUID(value).int ^ 1))


# --- lake values --------------------------------------------------------------------------


def time_micros(value: dt.time) -> int:
    """Microseconds since midnight: how the lake keeps a time of day."""
    seconds = value.hour * 3600 + value.minute * 60 + value.second
    return seconds * 1_000_000 + value.microsecond


def _int(name: str, maria: str, pg: str, duck: str, arrow: pa.DataType, bits: int) -> Case:
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return Case(name, maria, pg, duck, arrow, (0, low, high, None, -1, 42), step_integer(low, high))


MAX_DATETIME = dt.datetime(9999, 12, 31, 23, 59, 59, 999999)
MAX_MARIADB_TIMESTAMP = dt.datetime(2038, 1, 19, 3, 14, 7, 999999, tzinfo=UTC)
MAX_UNSIGNED_BIGINT = (1 << 64) - 1
MAX_SINGLE = to_single(3.4028234663852886e38)
EMOJI = "\N{GRINNING FACE}"

CASES: tuple[Case, ...] = (
    _int("c_tinyint", "TINYINT", "smallint", "TINYINT", pa.int8(), 8),
    _int("c_smallint", "SMALLINT", "smallint", "SMALLINT", pa.int16(), 16),
    _int("c_mediumint", "MEDIUMINT", "integer", "INTEGER", pa.int32(), 24),
    _int("c_int", "INT", "integer", "INTEGER", pa.int32(), 32),
    _int("c_bigint", "BIGINT", "bigint", "BIGINT", pa.int64(), 64),
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
        (1970, 1901, 2155, None, 2000),
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
        (
            '{"b": 1, "a": [1, 2.50, "x"]}',
            "null",
            f'{{"emoji": "{EMOJI}", "esc": "q\\"b\\u00e9"}}',
            None,
            "[1.0, 1e2, -0.5, true]",
            '{"big": 12345678901234567890.123, "nested": {"z": false, "k": "v"}}',
        ),
        step_json,
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
