"""The type matrix's building blocks: a case (one logical column type spelled natively by
each product), one-unit changes of values, and the values the lake stores.

The cases themselves are in ``type_matrix.py`` (its docstring explains the
row layout) and ``type_matrix_catalog_cases.py``.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pyarrow as pa

ROWS = 144  # more than the cases: each needs a row of its own to change
UTC = dt.UTC
ONE_MICRO = dt.timedelta(microseconds=1)
ONE_MILLI = dt.timedelta(milliseconds=1)


@dataclass(frozen=True, slots=True)
class Case:
    """One logical column type, spelled natively by each product.

    Attributes:
        name: The column's name in every product.
        mariadb: MariaDB column type (None: not stored in MariaDB).
        postgres: PostgreSQL column type (None: not stored in PostgreSQL).
        duckdb: DuckDB column type (None: not stored in DuckDB).
        arrow: Arrow type of the lake's column (None: the lake cannot store it).
        values: Logical values, edges and NULL included.
        change: The one-unit change of a value (None: the value has none, pick another).
        to_lake: The value the lake stores for a logical value.
        not_in_sql: Why the databases' digest SQL cannot hash it ("": it can).
        over_jdbc: Whether the source's JDBC read carries it (else a comparison that reads
            the case reads the whole source with the Python driver).
    """

    name: str
    mariadb: str | None
    postgres: str | None
    duckdb: str | None
    arrow: pa.DataType | None
    values: tuple[Any, ...]
    change: Callable[[Any], Any]
    to_lake: Callable[[Any], Any] = lambda value: value
    not_in_sql: str = ""
    over_jdbc: bool = True

    def stored_in(self, product: str) -> bool:
        """Whether ``product`` (mariadb, postgres, duckdb, lake) holds this case."""
        declared = {
            "mariadb": self.mariadb,
            "postgres": self.postgres,
            "duckdb": self.duckdb,
            "lake": self.arrow,
        }
        return declared[product] is not None

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


def int_case(name: str, maria: str, pg: str, duck: str, arrow: pa.DataType, bits: int) -> Case:
    """A signed integer case of ``bits`` bits: zero, both ends, NULL, -1 and 42."""
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return Case(name, maria, pg, duck, arrow, (0, low, high, None, -1, 42), step_integer(low, high))


MAX_DATETIME = dt.datetime(9999, 12, 31, 23, 59, 59, 999999)
MAX_MARIADB_TIMESTAMP = dt.datetime(2038, 1, 19, 3, 14, 7, 999999, tzinfo=UTC)
MAX_UNSIGNED_BIGINT = (1 << 64) - 1
MAX_SINGLE = to_single(3.4028234663852886e38)
EMOJI = "\N{GRINNING FACE}"
JSON_DOCUMENTS = (
    '{"b": 1, "a": [1, 2.50, "x"]}',
    "null",
    f'{{"emoji": "{EMOJI}", "esc": "q\\"b\\u00e9"}}',
    None,
    "[1.0, 1e2, -0.5, true]",
    '{"big": 12345678901234567890.123, "nested": {"z": false, "k": "v"}}',
)
JSON_SQL = "no exact JSON text in MariaDB's or PostgreSQL's SQL (connectors/*/pushdown.py)"
# PostgreSQL types the matrix's database needs before its tables.
POSTGRES_TYPES = (
    "CREATE TYPE color AS ENUM ('red', 'green', 'blue')",
    "CREATE DOMAIN amount AS integer CHECK (VALUE BETWEEN -999999 AND 999999)",
)
