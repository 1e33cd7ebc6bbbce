"""The database engine's SQL reproduces the hash contract's golden vectors bit for bit.

Every golden vector whose values a product stores exactly is inserted into a table of that
product (times at full precision, so reducing them is the dialect's job), and the
product's dialect computes the canonical row bytes and the MD5 row hash in SQL. Both must
equal the vector's bytes and ``md5_hash64`` of them, and the MD5 hash of the vector's own
columns must be the vector's ``row_hash_md5`` (as Python and Spark reproduce it). Vectors
with options no dialect writes (``float_digits``, ``case_insensitive``) must be refused
with ``NotPushable``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import json
import math
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from connectors.base import Connector
from connectors.pushdown import (
    DigestColumn,
    DigestTable,
    HashLeaves,
    NotPushable,
    check_options,
    keyed_sql,
)
from connectors.registry import connector_for
from merkle import types as lt
from merkle.canonical import Interval, to_field, to_single
from merkle.golden import load_vectors, ltypes_of, options_of, to_python
from merkle.hashing import md5_hash64
from tests.private_servers import MariaDBServer, PostgresServer

pytestmark = [pytest.mark.integration, pytest.mark.mariadb, pytest.mark.postgres]

INT64 = range(-(2**63), 2**63)
EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
# TIMESTAMP's range (https://mariadb.com/kb/en/timestamp/).
MARIADB_TIMESTAMPS = (
    dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.UTC),
    dt.datetime(2038, 1, 19, 3, 14, 7, 999999, tzinfo=dt.UTC),
)
MARIADB_TIME_MICROS = 838 * 3600 * 10**6 + 59 * 60 * 10**6 + 59 * 10**6  # +-838:59:59
MAX_SINGLE = 3.4028234663852886e38


def _micros_of_time(value: Any) -> int:
    if isinstance(value, int):
        return value
    if isinstance(value, dt.timedelta):
        return value // dt.timedelta(microseconds=1)
    seconds = value.hour * 3600 + value.minute * 60 + value.second
    return seconds * 10**6 + value.microsecond


def _decimal_fits(value: decimal.Decimal, precision: int, scale: int) -> bool:
    exponent = value.as_tuple().exponent
    assert isinstance(exponent, int)
    return -exponent <= scale and abs(value) < decimal.Decimal(10) ** (precision - scale)


# --- what each product stores a vector value as -------------------------------------------


def mariadb_native(ltype: lt.LogicalType, value: Any) -> str | None:
    """The MariaDB column type that stores ``value`` exactly, or None to leave it out."""
    if isinstance(ltype, lt.IntegerType):
        if value is None or value in INT64:
            return "BIGINT"
        return "BIGINT UNSIGNED" if 0 <= value < 2**64 else None
    if isinstance(ltype, lt.DecimalType):
        precision, scale = ltype.precision or 65, 30 if ltype.precision is None else ltype.scale
        if value is not None and not _decimal_fits(value, precision, scale or 0):
            return None
        return f"DECIMAL({precision},{scale})"
    if isinstance(ltype, lt.FloatType):
        if value is not None and not math.isfinite(value):
            return None  # MariaDB keeps no NaN or infinity
        if ltype.bits == 64:
            return "DOUBLE"
        return "FLOAT" if value is None or abs(value) <= MAX_SINGLE else None
    simple: dict[type, str] = {
        lt.BytesType: "LONGBLOB",
        lt.BooleanType: "TINYINT",
        lt.DateType: "DATE",
        lt.TimestampType: "DATETIME(6)",
    }
    if type(ltype) in simple:
        return simple[type(ltype)]
    if isinstance(ltype, lt.StringType):
        return None if ltype.padded else "TEXT"  # MariaDB strips CHAR padding when read
    if isinstance(ltype, lt.TimeType):
        fits = value is None or abs(_micros_of_time(value)) <= MARIADB_TIME_MICROS
        return "TIME(6)" if fits else None
    if isinstance(ltype, lt.TimestampTzType):
        low, high = MARIADB_TIMESTAMPS
        return "TIMESTAMP(6) NULL" if value is None or low <= value <= high else None
    if isinstance(ltype, lt.UuidType):
        return "UUID" if value is None or isinstance(value, str) else None
    return None


def postgres_native(ltype: lt.LogicalType, value: Any) -> str | None:
    """The PostgreSQL column type that stores ``value`` exactly, or None to leave it out."""
    if isinstance(ltype, lt.IntegerType):
        return "bigint" if value is None or value in INT64 else None
    if isinstance(ltype, lt.DecimalType):
        if ltype.precision is None:
            return "numeric"
        return f"numeric({ltype.precision},{ltype.scale or 0})"
    if isinstance(ltype, lt.FloatType):
        if ltype.bits == 32 and value is not None and math.isfinite(value):
            return "real" if abs(value) <= MAX_SINGLE else None  # PostgreSQL refuses overflow
        return "real" if ltype.bits == 32 else "double precision"
    if isinstance(ltype, lt.StringType):
        if value is not None and "\x00" in value:
            return None  # text cannot hold NUL
        return f"character({max(1, len(value or ''))})" if ltype.padded else "text"
    if isinstance(ltype, lt.BooleanType):
        return "bigint" if type(value) is int else "boolean"
    if isinstance(ltype, lt.TimeType):
        fits = value is None or 0 <= _micros_of_time(value) < 86_400 * 10**6
        return "time(6)" if fits else None
    if isinstance(ltype, lt.UuidType):
        return "uuid" if value is None or isinstance(value, str) else None
    simple: dict[type, str] = {
        lt.BytesType: "bytea",
        lt.DateType: "date",
        lt.TimestampType: "timestamp(6)",
        lt.TimestampTzType: "timestamptz(6)",
        lt.IntervalType: "interval",
    }
    return simple.get(type(ltype))


def _uuid_text(value: Any) -> Any:
    return str(uuid.UUID(value.strip())) if isinstance(value, str) else value


def mariadb_value(ltype: lt.LogicalType, value: Any) -> Any:
    """The driver parameter storing ``value`` (the session runs in UTC)."""
    if value is None:
        return None
    if isinstance(ltype, lt.TimeType):
        return dt.timedelta(microseconds=_micros_of_time(value))
    if isinstance(ltype, lt.TimestampTzType):
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    if isinstance(ltype, lt.UuidType):
        return _uuid_text(value)
    if isinstance(ltype, lt.FloatType):
        return _float_text(ltype, value)
    return value


def _float_text(ltype: lt.FloatType, value: Any) -> str:
    """The stored value as exact text: a 32-bit column holds the single nearest the double
    (the contract narrows the same way), which text parsed straight to single might miss."""
    number = to_single(float(value)) if ltype.bits == 32 else float(value)
    return repr(number)


def postgres_value(ltype: lt.LogicalType, value: Any) -> Any:
    """The driver parameter storing ``value``."""
    if value is None:
        return None
    if isinstance(ltype, lt.TimeType):
        clock = dt.datetime(2000, 1, 1) + dt.timedelta(microseconds=_micros_of_time(value))
        return clock.time()
    if isinstance(ltype, lt.IntervalType) and isinstance(value, Interval):
        return f"{value.months} months {value.days} days {value.micros} microseconds"
    if isinstance(ltype, lt.UuidType):
        return _uuid_text(value)
    if isinstance(ltype, lt.FloatType):
        return _float_text(ltype, value)
    return value


# --- one product ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Product:
    """How to store vectors in one product and read their bytes back through its dialect."""

    name: str
    native: Callable[[lt.LogicalType, Any], str | None]
    value: Callable[[lt.LogicalType, Any], Any]
    quote: str
    placeholder: str  # with the column's type cast, as the product needs it

    def create(self, table: str, natives: list[str]) -> str:
        q = self.quote
        columns = ", ".join(f"{q}c{i}{q} {n}" for i, n in enumerate(natives))
        return f"CREATE TABLE {table} ({q}id{q} INTEGER PRIMARY KEY, {columns})"

    def insert(self, table: str, natives: list[str]) -> str:
        marks = [self.placeholder.format(native=n) for n in natives]
        return f"INSERT INTO {table} VALUES (%s, {', '.join(marks)})"


MARIADB = Product("mariadb", mariadb_native, mariadb_value, "`", "%s")
POSTGRES = Product("postgres", postgres_native, postgres_value, '"', "%s::{native}")


@dataclass(frozen=True, slots=True)
class Group:
    """Vectors of one shape: the same options and the same native column types."""

    natives: list[str]
    vectors: list[dict[str, Any]]


def group_vectors(product: Product) -> tuple[list[Group], list[dict[str, Any]]]:
    """Vectors the product stores, grouped; and those whose options it must refuse."""
    groups: dict[str, Group] = {}
    refused = []
    for vector in load_vectors():
        ltypes = ltypes_of(vector)
        values = [to_python(t, c["value"]) for t, c in zip(ltypes, vector["columns"], strict=True)]
        natives = [product.native(t, v) for t, v in zip(ltypes, values, strict=True)]
        if any(n is None for n in natives):
            continue
        try:
            check_options(options_of(vector))
        except NotPushable:
            refused.append(vector)
            continue
        shape = json.dumps([natives, [str(t) for t in ltypes], vector.get("options", {})])
        stored = [n for n in natives if n is not None]
        groups.setdefault(shape, Group(stored, [])).vectors.append(vector)
    return list(groups.values()), refused


Replayed = dict[str, tuple[bytes, int, int]]
"""Per vector: its key bytes and row hash with the ``id`` column, and its own MD5 row hash."""


def replay(
    product: Product, connector: Connector, run: Callable[[str, list[Any]], None]
) -> Replayed:
    """Each vector's canonical bytes and row hashes as the product's SQL computes them."""
    groups, _ = group_vectors(product)
    dialect = connector.digest_dialect()
    assert dialect is not None
    produced: Replayed = {}
    for number, group in enumerate(groups):
        table = f"g{number}"
        run(product.create(table, group.natives), [])
        for row_id, vector in enumerate(group.vectors):
            ltypes = ltypes_of(vector)
            values = [
                product.value(t, to_python(t, c["value"]))
                for t, c in zip(ltypes, vector["columns"], strict=True)
            ]
            run(product.insert(table, group.natives), [row_id, *values])
        own = dict(_vector_hashes(connector, dialect, table, group))
        for vector_id, (data, with_id) in _read_back(connector, dialect, table, group):
            produced[vector_id] = (data, with_id, own[vector_id])
    return produced


def _vector_hashes(
    connector: Connector, dialect: Any, table: str, group: Group
) -> Iterator[tuple[str, int]]:
    """The MD5 row hash of each vector's own columns (without ``id``), as the dialect's
    ``hash64`` writes it over the dialect's payloads and fields."""
    schema = connector.reflect(table)
    first = group.vectors[0]
    options = options_of(first)
    columns = zip(schema.columns[1:], ltypes_of(first), strict=True)
    payloads = [dialect.payload(DigestColumn(c, t), options) for c, t in columns]
    fields = [(dialect.field(p.sql, p), p.binary) for p in payloads]
    sql = f"SELECT {dialect.quote('id')}, {dialect.hash64(fields)} FROM {dialect.table(table)}"
    with connector.digest_session(schema, None) as session:
        for row_id, row_hash in session.iter_rows(sql):
            yield group.vectors[int(row_id)]["id"], int(row_hash)


def _read_back(
    connector: Connector, dialect: Any, table: str, group: Group
) -> Iterator[tuple[str, tuple[bytes, int]]]:
    """The ``id`` column first, then the vector's columns, all in the key: the key bytes
    are the id's field followed by the vector's canonical bytes."""
    schema = connector.reflect(table)
    first = group.vectors[0]
    ltypes = [lt.IntegerType(), *ltypes_of(first)]
    columns = tuple(DigestColumn(c, t) for c, t in zip(schema.columns, ltypes, strict=True))
    names = tuple(c.name for c in schema.columns)
    digest_table = DigestTable(table, columns, names, options_of(first))
    sql = keyed_sql(dialect, digest_table, HashLeaves(0))
    with connector.digest_session(schema, None) as session:
        for row in session.iter_rows(sql):
            raw = row[len(names)]
            data = raw.encode() if isinstance(raw, str) else bytes(raw)
            row_id = int(row[0])
            yield group.vectors[row_id]["id"], (data, int(row[len(names) + 2]))


def _check(produced: Replayed, product: Product) -> None:
    vectors = {v["id"]: v for v in load_vectors()}
    groups, _ = group_vectors(product)
    expected_ids = {v["id"] for g in groups for v in g.vectors}
    assert set(produced) == expected_ids
    wrong = []
    for vector_id, (data, row_hash, own_hash) in produced.items():
        row_id = next(i for g in groups for i, v in enumerate(g.vectors) if v["id"] == vector_id)
        want = to_field(str(row_id).encode()) + bytes.fromhex(vectors[vector_id]["canonical"])
        if data != want or row_hash % 2**64 != md5_hash64(want) % 2**64:
            wrong.append((vector_id, data.hex(), want.hex()))
        if own_hash % 2**64 != vectors[vector_id]["row_hash_md5"] % 2**64:
            wrong.append((vector_id, str(own_hash), str(vectors[vector_id]["row_hash_md5"])))
    assert wrong == []


def test_mariadb_sql_reproduces_the_golden_vectors(
    mariadb_full: MariaDBServer, mariadb_database: Callable[[MariaDBServer], str]
) -> None:
    database = mariadb_database(mariadb_full)
    with contextlib.closing(mariadb_full.connect(database)) as connection:
        with connection.cursor() as cursor:
            cursor.execute("SET time_zone = '+00:00'")

        def run(sql: str, params: list[Any]) -> None:
            with connection.cursor() as cursor:
                cursor.execute(sql, params or None)

        produced = replay(MARIADB, connector_for(mariadb_full.url(database)), run)
    assert len(produced) > 250  # most of the contract is stored and replayed
    _check(produced, MARIADB)


def test_postgres_sql_reproduces_the_golden_vectors(
    postgres: PostgresServer, postgres_database: Callable[[PostgresServer], str]
) -> None:
    database = postgres_database(postgres)
    with contextlib.closing(postgres.connect(database)) as connection:

        def run(sql: str, params: list[Any]) -> None:
            connection.execute(sql, params or None)

        produced = replay(POSTGRES, connector_for(postgres.url(database)), run)
    assert len(produced) > 280
    _check(produced, POSTGRES)


@pytest.mark.parametrize("product", [MARIADB, POSTGRES], ids=lambda p: p.name)
def test_options_no_database_writes_exactly_are_refused(product: Product) -> None:
    _, refused = group_vectors(product)
    options = {json.dumps(v["options"], sort_keys=True) for v in refused}
    assert any("float_digits" in o for o in options)
    assert any("case_insensitive" in o for o in options)


def test_the_vectors_left_out_are_the_types_a_product_cannot_store() -> None:
    """Guard against a mapping that silently skips a whole type: every stored logical type
    of the contract is replayed on at least one product."""
    replayed: defaultdict[str, int] = defaultdict(int)
    for product in (MARIADB, POSTGRES):
        groups, _ = group_vectors(product)
        for group in groups:
            for vector in group.vectors:
                for ltype in ltypes_of(vector):
                    replayed[type(ltype).__name__] += 1
    expected = {
        "IntegerType", "DecimalType", "FloatType", "StringType", "BytesType", "BooleanType",
        "DateType", "TimeType", "TimestampType", "TimestampTzType", "UuidType", "IntervalType",
    }  # fmt: skip
    assert expected <= set(replayed)
