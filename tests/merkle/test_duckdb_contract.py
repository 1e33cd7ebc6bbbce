"""The DuckDB SQL of the MD5 flavour agrees with the golden vectors and with pure Python."""

from __future__ import annotations

import math
import struct
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings

from merkle.duckdb import (
    NotInDuckDB,
    hash_leaf_sql,
    key_bytes_sql,
    md5_hash64_sql,
    md5_unsigned64_sql,
    payload_sql,
    row_bytes_sql,
)
from merkle.golden import duckdb_outcomes, expected_outcomes, load_vectors, ltypes_of, options_of
from merkle.hashing import RowHasher, leaf_of, md5_hash64
from merkle.layout import RowLayout
from merkle.options import ComparisonOptions
from merkle.types import (
    ArrayType,
    FloatType,
    IntegerType,
    JsonType,
    LogicalType,
    StringType,
    TimestampType,
)
from tests.merkle.row_strategies import duckdb_layouts_with_rows

duckdb = pytest.importorskip("duckdb")


def _refused_by_design(vector: dict[str, Any]) -> bool:
    """float_digits on a float, case_insensitive on a string (merkle.duckdb)."""
    options = options_of(vector)

    def refused(ltype: LogicalType) -> bool:
        if isinstance(ltype, ArrayType):
            return refused(ltype.element)
        return (isinstance(ltype, FloatType) and options.float_digits is not None) or (
            isinstance(ltype, StringType) and options.case_insensitive
        )

    return any(refused(ltype) for ltype in ltypes_of(vector))


def test_duckdb_reproduces_every_golden_vector_it_can_compute() -> None:
    vectors = load_vectors()
    expected = expected_outcomes(vectors)
    produced = duckdb_outcomes(duckdb.connect(), vectors)
    refused = {i for i, outcome in produced.items() if isinstance(outcome, str)}
    assert refused == {v["id"] for v in vectors if _refused_by_design(v)}
    mismatches = {
        i: (produced[i], want)
        for i, want in expected.items()
        if i not in refused and produced[i] != want
    }
    assert mismatches == {}
    assert len(refused) < len(vectors) / 5  # most of the contract runs in DuckDB


def _hashes(layout: RowLayout, rows: list[tuple[Any, ...]], schema: pa.Schema) -> list[Any]:
    table = pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], schema)
    types = {field.name: field.type for field in schema}
    connection = duckdb.connect()
    connection.register("t", table)
    sql = (
        f"SELECT {md5_hash64_sql(key_bytes_sql(layout, types))},"
        f" {md5_hash64_sql(row_bytes_sql(layout, types))},"
        f" {hash_leaf_sql(key_bytes_sql(layout, types), 5)} FROM t"
    )
    return [tuple(row) for row in connection.execute(sql).fetchall()]


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=duckdb_layouts_with_rows())
def test_duckdb_md5_hashes_equal_python_on_random_rows(
    data: tuple[RowLayout, list[tuple[Any, ...]], pa.Schema],
) -> None:
    layout, rows, schema = data
    hasher = RowHasher(layout)
    expected = []
    for row in rows:
        key_hash = md5_hash64(hasher.key_bytes(row))
        expected.append((key_hash, md5_hash64(hasher.row_bytes(row)), leaf_of(key_hash, 5)))
    assert _hashes(layout, rows, schema) == expected


def test_md5_hashes_take_both_signs_and_match_python() -> None:
    """Over enough rows that the hash's top bit is set in some and clear in others."""
    layout = RowLayout.of([("id", IntegerType()), ("name", StringType())], ["id"])
    rows = [(i, None if i % 7 == 0 else f"n{i}") for i in range(-50, 150)]
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    produced = _hashes(layout, rows, schema)
    assert {h[1] < 0 for h in produced} == {True, False}
    hasher = RowHasher(layout)
    assert [h[1] for h in produced] == [md5_hash64(hasher.row_bytes(r)) for r in rows]
    abc = md5_unsigned64_sql("'abc'::BLOB")
    unsigned = duckdb.connect().execute(f"SELECT {abc}").fetchone()
    assert unsigned is not None and unsigned[0] == md5_hash64(b"abc") % 2**64


def _float_payload(value: float) -> bytes:
    sql = payload_sql("v", pa.float64(), FloatType(), ComparisonOptions())
    found = duckdb.connect().execute(f"SELECT {sql} FROM (SELECT ?::DOUBLE AS v)", [value])
    row = found.fetchone()
    assert row is not None
    return bytes(row[0])


def test_float_bits_canonicalise_nan_and_negative_zero() -> None:
    nan_with_payload = struct.unpack(">d", bytes.fromhex("7ff8000000000001"))[0]
    assert math.isnan(nan_with_payload)
    assert _float_payload(nan_with_payload) == b"9221120237041090560"
    assert _float_payload(-0.0) == b"0"
    assert _float_payload(0.1) == b"4591870180066957722"
    assert _float_payload(5e-324) == b"1"  # the smallest subnormal


@pytest.mark.parametrize(
    ("dtype", "ltype", "options", "reason"),
    [
        (pa.binary(), JsonType(), ComparisonOptions(), "binary column as json"),
        (pa.float64(), FloatType(), ComparisonOptions(float_digits=6), "float_digits"),
        (pa.string(), StringType(), ComparisonOptions(case_insensitive=True), "case_insensitive"),
        (pa.timestamp("ns"), TimestampType(), ComparisonOptions(), "timestamp"),
        (pa.decimal256(60, 2), IntegerType(), ComparisonOptions(), "decimal256"),
        (pa.string(), IntegerType(), ComparisonOptions(), "string"),
        (pa.list_(pa.binary()), ArrayType(JsonType()), ComparisonOptions(), "as json"),
    ],
)
def test_what_duckdb_cannot_compute_exactly_is_refused_by_name(
    dtype: pa.DataType, ltype: LogicalType, options: ComparisonOptions, reason: str
) -> None:
    with pytest.raises(NotInDuckDB, match=reason):
        payload_sql('"c"', dtype, ltype, options)
