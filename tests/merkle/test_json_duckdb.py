"""Canonical JSON has two implementations that share no code; they must agree bit for bit.

``merkle.canonical`` parses with Python's ``json`` and writes with ``json_text``.
``merkle.duckdb_json`` was written from the rule's text alone as DuckDB SQL: DuckDB's JSON
reader (yyjson, a C parser) finds the structure, and the SQL computes number payloads from
their digits as text, drops repeated keys, orders members by sorting paths and escapes
strings. Here both reproduce every JSON golden vector, the hand-checked texts below (each
written out from the rule, not from either implementation's output), and each other on
random documents spelled in many ways; both refuse what is not JSON.

What this proves: a JSON golden vector no longer rests only on the code that generated
it, and the local engine's DuckDB hashes a lake's JSON column as Python and Spark do
(Spark calls ``merkle.canonical``). What it does not: both implementations trust a parser
to decode ``\\u`` escapes and to accept exactly RFC 8259 (two unrelated parsers, so a
shared misreading would need both to make it).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdc_core.errors import ContractError
from merkle.canonical import payload_encoder
from merkle.duckdb import (
    check_layout,
    hash_leaf_sql,
    key_bytes_sql,
    md5_hash64_sql,
    payload_sql,
    quote,
    row_bytes_sql,
)
from merkle.duckdb_json import MAX_JSON_DEPTH
from merkle.golden import (
    arrow_type_of,
    expected_outcomes,
    load_vectors,
    ltypes_of,
    options_of,
    to_arrow_value,
)
from merkle.hashing import RowHasher, leaf_of, md5_hash64
from merkle.layout import RowLayout
from merkle.options import ComparisonOptions
from merkle.types import ArrayType, IntegerType, JsonType
from tests.merkle.json_strategies import json_texts

duckdb = pytest.importorskip("duckdb")

_PYTHON = payload_encoder(JsonType(), ComparisonOptions())


@pytest.fixture(scope="module")
def connection() -> Iterator[Any]:
    with duckdb.connect() as connection:
        yield connection


def duckdb_payloads(connection: Any, documents: Sequence[str | None]) -> list[bytes | None]:
    """DuckDB's ``json`` payloads of ``documents``, in one query."""
    table = pa.table({"i": range(len(documents)), "doc": pa.array(documents, pa.string())})
    connection.register("documents", table)
    sql = payload_sql(quote("doc"), pa.string(), JsonType(), ComparisonOptions())
    rows = connection.execute(f"SELECT {sql} FROM documents ORDER BY i").fetchall()
    return [None if payload is None else bytes(payload) for (payload,) in rows]


def _json_vectors() -> list[dict[str, Any]]:
    def has_json(ltype: Any) -> bool:
        return isinstance(ltype, JsonType) or (
            isinstance(ltype, ArrayType) and isinstance(ltype.element, JsonType)
        )

    return [v for v in load_vectors() if any(has_json(lt) for lt in ltypes_of(v))]


def _duckdb_outcomes(connection: Any, vectors: list[dict[str, Any]]) -> dict[str, tuple[str, int]]:
    """Canonical hex and MD5 row hash of vectors of one shape, in one query."""
    ltypes = ltypes_of(vectors[0])
    names = [f"c{i}" for i in range(len(ltypes))]
    columns: dict[str, Any] = {"id": [v["id"] for v in vectors]}
    for i, (name, ltype) in enumerate(zip(names, ltypes, strict=True)):
        values = [v["columns"][i]["value"] for v in vectors]
        dtype = arrow_type_of(ltype, next((x for x in values if x is not None), None))
        columns[name] = pa.array([to_arrow_value(ltype, x) for x in values], dtype)
    table = pa.table(columns)
    layout = RowLayout.of(list(zip(names, ltypes, strict=True)), [names[0]], options_of(vectors[0]))
    row_bytes = row_bytes_sql(layout, {f.name: f.type for f in table.schema})
    connection.register("vectors", table)
    sql = f"SELECT id, b, {md5_hash64_sql('b')} FROM (SELECT id, {row_bytes} AS b FROM vectors)"
    return {i: (bytes(b).hex(), md5) for i, b, md5 in connection.execute(sql).fetchall()}


def test_duckdb_reproduces_every_json_golden_vector(connection: Any) -> None:
    vectors = _json_vectors()
    groups: dict[str, list[dict[str, Any]]] = {}
    for vector in vectors:
        groups.setdefault(",".join(c["type"] for c in vector["columns"]), []).append(vector)
    produced: dict[str, tuple[str, int]] = {}
    for group in groups.values():
        produced |= _duckdb_outcomes(connection, group)
    expected = {i: (hex_, md5) for i, (hex_, _, md5) in expected_outcomes(vectors).items()}
    assert len(expected) >= 28 and {"json", "array<json>"} <= set(groups)
    assert produced == expected


# Written out by hand from the rule in merkle.canonical's docstring.
HAND_CHECKED = [
    ('{"a":1,"a":2}', '{"a":2}'),  # a repeated key: the last wins, as Python's json reads it
    ('{"a":{"x":1},"b":0,"a":[2]}', '{"a":[2],"b":0}'),  # with the whole first value
    ('{"\\uffff":1,"\\ud83d\\ude00":2}', '{"\uffff":1,"\U0001f600":2}'),  # code points
    ('{"ab":1,"a":2,"":3,"B":4}', '{"":3,"B":4,"a":2,"ab":1}'),
    ('{"10":1,"9":2,"-1":3}', '{"-1":3,"10":1,"9":2}'),  # keys are text, never numbers
    ('"\\u0000\\u001f\\u007f\\u2028\\/"', '"\\u0000\\u001F\x7f\u2028/"'),
    ('"\\"\\\\\\b\\f\\n\\r\\t"', '"\\"\\\\\\b\\f\\n\\r\\t"'),
    ('"\\u0301a\\u00E9e\\u0301"', '"\u0301a\u00e9e\u0301"'),  # no normalisation
    ("[0,-0,0.0e0,-0.0E-5,0e99]", "[0,0,0,0,0]"),
    ("[10,1e1,1.5E+2,0.001e3,100e-2,-12.340e1,5e-1,1E007]", "[10,10,150,1,1,-123.4,0.5,10000000]"),
    ("1.00000000000000000001", "1.00000000000000000001"),  # never through a double
    ("-1e-30", "-0." + "0" * 29 + "1"),
    ("-" + "9" * 5000, "-" + "9" * 5000),  # beyond int()'s 4,300 digits: still a number
    ("123456789012345678901234567890e-10", "12345678901234567890.123456789"),
    ('"1.50e0"', '"1.50e0"'),  # a number in a string is a string
    ('["n1","s",{"n":"s"}]', '["n1","s",{"n":"s"}]'),  # DuckDB's leaf markers are not seen
    (' \t\n\r[ 1 , { "a" : null } ,true, false ] \n', '[1,{"a":null},true,false]'),
    ('{"b":[],"a":{}}', '{"a":{},"b":[]}'),
    ("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH, "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH),
]


@pytest.mark.parametrize("implementation", ["python", "duckdb"])
def test_hand_checked_documents(connection: Any, implementation: str) -> None:
    documents = [document for document, _ in HAND_CHECKED]
    if implementation == "python":
        produced = [_PYTHON(document) for document in documents]
    else:
        produced = duckdb_payloads(connection, documents)
    assert produced == [text.encode("utf-8") for _, text in HAND_CHECKED]


# Not JSON, though DuckDB's reader takes some (trailing commas, NaN, Infinity).
INVALID = [
    '["SECRET",]',
    '{"a":"SECRET",}',
    "NaN",
    "[-Infinity]",
    "01",
    "1.",
    ".5",
    "+1",
    "1e",
    '{1:"SECRET"}',
    "",
    "[1 2]",
    '"SECRET',
    '"a\tb"',
    '"\\ud800"',  # a lone surrogate: JSON's grammar, but no Unicode text
    "1e99999999999999999999",  # an exponent beyond 64 bits
    '{"a":1}x',
    "True",
]


@pytest.mark.parametrize("document", INVALID)
def test_what_is_not_json_is_refused_by_both_without_its_value(
    connection: Any, document: str
) -> None:
    with pytest.raises(ContractError, match=r"JSON document|NaN"):
        _PYTHON(document)
    with pytest.raises(duckdb.Error, match="invalid JSON document") as refused:
        duckdb_payloads(connection, [document])
    assert "SECRET" not in str(refused.value)


def test_python_refuses_bytes_that_are_not_utf8_by_the_contract_error() -> None:
    with pytest.raises(ContractError, match="not UTF-8"):
        _PYTHON(b'"\xff"')


def test_a_document_deeper_than_the_sql_walks_is_refused_not_hashed(connection: Any) -> None:
    deep = "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1)
    assert _PYTHON(deep) == deep.encode()
    with pytest.raises(duckdb.Error, match=f"nested deeper than {MAX_JSON_DEPTH} levels"):
        duckdb_payloads(connection, [deep])


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(documents=st.lists(json_texts() | st.none(), min_size=1, max_size=12))
def test_duckdb_equals_python_on_random_documents(
    connection: Any, documents: list[str | None]
) -> None:
    expected = [None if d is None else _PYTHON(d) for d in documents]
    assert duckdb_payloads(connection, documents) == expected


def test_a_lake_with_json_columns_hashes_in_duckdb_as_in_python(
    connection: Any, tmp_path: Path
) -> None:
    """A Parquet file of a lake, read and hashed by DuckDB as the local engine does: the same
    row hashes, key hashes and leaves as Python, and no drift between spellings."""
    layout = RowLayout.of(
        [("id", IntegerType()), ("doc", JsonType()), ("docs", ArrayType(JsonType()))], ["id"]
    )
    rows = [
        (1, '{"b":[1.50,{"y":null,"x":"\\u00e9"}],"a":true}', ['{"k":1e2}', None, "[]"]),
        (2, '{"a": true, "b": [15e-1, {"x": "é", "y": null}]}', ['{ "k" : 100 }', None, "[ ]"]),
        (3, None, []),
        (4, '"x"', None),
        (5, "12345678901234567890.50", ['{"z":0,"a":-0}']),
    ]
    schema = pa.schema([("id", pa.int64()), ("doc", pa.string()), ("docs", pa.list_(pa.string()))])
    path = tmp_path / "part-0.parquet"
    pq.write_table(
        pa.Table.from_pylist([dict(zip(schema.names, r, strict=True)) for r in rows], schema), path
    )
    types = {field.name: field.type for field in schema}
    check_layout(layout, types)  # JSON is no longer sent to Spark
    keys, row_bytes = key_bytes_sql(layout, types), row_bytes_sql(layout, types)
    documents = RowLayout.of([("doc", JsonType()), ("docs", ArrayType(JsonType()))], ["doc"])
    sql = (
        f"SELECT {md5_hash64_sql(keys)}, {md5_hash64_sql(row_bytes)}, {hash_leaf_sql(keys, 5)},"
        f" {row_bytes_sql(documents, types)} FROM read_parquet('{path}') ORDER BY id"
    )
    produced = connection.execute(sql).fetchall()
    hasher = RowHasher(layout)
    expected = []
    for row in rows:
        key_hash = md5_hash64(hasher.key_bytes(row))
        expected.append((key_hash, md5_hash64(hasher.row_bytes(row)), leaf_of(key_hash, 5)))
    assert [tuple(row[:3]) for row in produced] == expected
    assert produced[0][3] == produced[1][3]  # two spellings of the same documents
