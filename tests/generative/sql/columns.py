"""Column kinds of the generated tables and their values, edge values first.

A kind is one logical type with a native type in each product (``render.py`` names it).
Values are plain Python values; ``render.py`` writes them as SQL literals. Edge values are
picked often, because that is where readers and encoders break: the type's extremes, the
empty string beside NULL, 4-byte UTF-8, values over 2 kB (TOASTed in PostgreSQL, LOB pages
in MariaDB), MariaDB's zero dates (read as NULL by the product's documented policy; partial
dates such as '2024-00-15' are an error by that policy, so they are never generated),
PostgreSQL's NaN and infinities.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
from decimal import Decimal
from typing import Any

from tests.generative.sql.vocabulary import CATALOG_KINDS, native_type

KINDS = ("int", "bigint", "dec", "dbl", "str", "text", "blob", "date", "dt", "ts", "time")


class ZeroDate(str):
    """MariaDB's zero date or datetime literal (NULL in the product's reading)."""


class Special(str):
    """A float that has no Python literal in SQL: 'NaN', 'Infinity', '-Infinity'."""


@dataclasses.dataclass(frozen=True, slots=True)
class Typed:
    """A value of a catalog kind (``vocabulary.py``) and its column type: PostgreSQL's
    literal is cast to it, since arrays, ranges and the like have no untyped literal."""

    value: Any
    sql_type: str


def _text(rng: random.Random, size: int) -> str:
    alphabet = "abcXYZ 09-_'\"\\%é€😀中"
    return "".join(rng.choice(alphabet) for _ in range(size))


def _edges(kind: str, product: str) -> list[object]:
    edges: dict[str, list[object]] = {
        "int": [0, -(2**31), 2**31 - 1, -1],
        "bigint": [-(2**63), 2**63 - 1, 0],
        "dec": [Decimal("99999999999999.9999"), Decimal("-99999999999999.9999"),
                Decimal("0.0001"), Decimal("0")],
        "dbl": [1.7976931348623157e308, -2.2250738585072014e-308, 0.1, -0.0, 5e-324],
        "str": ["", " ", "😀𝄞", "a'b\"c\\d", "ü" * 40],
        "text": ["", "x" * 3000, "😀" * 800],
        "blob": [b"", b"\x00\xff" * 1500, b"\\'\""],
        "date": [dt.date(1000, 1, 1), dt.date(9999, 12, 31), dt.date(2024, 2, 29)],
        "dt": [dt.datetime(1000, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
               dt.datetime(2024, 3, 31, 2, 30)],  # a wall clock in Berlin's DST gap
        "ts": [dt.datetime(1970, 1, 2, tzinfo=dt.UTC),
               dt.datetime(2038, 1, 19, 3, 14, 7, 999999, tzinfo=dt.UTC),
               dt.datetime(2024, 10, 27, 0, 30, tzinfo=dt.UTC)],  # Berlin's repeated hour
        "time": [dt.time(0), dt.time(23, 59, 59, 999999)],
    }  # fmt: skip
    found = edges[kind]
    if product == "mariadb" and kind in ("date", "dt"):
        found = [*found, ZeroDate("0000-00-00" if kind == "date" else "0000-00-00 00:00:00")]
    if product == "postgres" and kind == "dbl":
        found = [*found, Special("NaN"), Special("Infinity"), Special("-Infinity")]
    if product == "postgres" and kind == "ts":
        found = [*found, dt.datetime(1, 1, 1, tzinfo=dt.UTC)]
    return found


def _ordinary(kind: str, rng: random.Random) -> object:
    if kind in ("int", "bigint"):
        return rng.randint(-1000, 1000)
    if kind == "dec":
        return Decimal(rng.randint(-(10**8), 10**8)).scaleb(-4)
    if kind == "dbl":
        return rng.uniform(-1e6, 1e6)
    if kind in ("str", "text"):
        return _text(rng, rng.randint(0, 20))
    if kind == "blob":
        return rng.randbytes(rng.randint(0, 16))
    moment = dt.datetime(2000, 1, 1) + dt.timedelta(seconds=rng.randint(0, 10**9))
    moment = moment.replace(microsecond=rng.choice((0, rng.randint(0, 999999))))
    if kind == "date":
        return moment.date()
    if kind == "time":
        return moment.time()
    return moment.replace(tzinfo=dt.UTC) if kind == "ts" else moment


def value(kind: str, product: str, rng: random.Random, nullable: bool = True) -> object:
    """A value of ``kind``: NULL, an edge value or an ordinary one."""
    if kind not in KINDS:
        return _catalog_value(kind, product, rng, nullable)
    roll = rng.random()
    if nullable and roll < 0.1:
        return None
    if roll < 0.35:
        return rng.choice(_edges(kind, product))
    return _ordinary(kind, rng)


def _catalog_value(kind: str, product: str, rng: random.Random, nullable: bool) -> object:
    """One of the type matrix's values of catalog kind ``kind`` (all storable and exact)."""
    values = [v for v in CATALOG_KINDS[product][kind].values if nullable or v is not None]
    found = rng.choice(values)
    return None if found is None else Typed(found, native_type(kind, product))
