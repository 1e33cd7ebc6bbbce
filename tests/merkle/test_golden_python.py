"""The pure-Python implementation reproduces every golden vector bit for bit."""

from __future__ import annotations

from collections import Counter

from merkle.golden import expected_outcomes, load_vectors, python_outcomes
from merkle.hashing import md5_hash64
from tests.merkle.make_golden_vectors import build_vectors

VECTORS = load_vectors()


def test_the_file_covers_every_logical_type_with_enough_cases() -> None:
    assert len(VECTORS) >= 300
    kinds = Counter(c["type"].split("(")[0] for v in VECTORS for c in v["columns"])
    expected = {
        "integer",
        "decimal",
        "float64",
        "float32",
        "string",
        "char",
        "bytes",
        "boolean",
        "date",
        "time",
        "timestamp",
        "timestamp_tz",
        "json",
        "uuid",
        "interval",
        "time_tz",
    }
    assert expected <= set(kinds)
    arrays = {c["type"] for v in VECTORS for c in v["columns"] if c["type"].startswith("array<")}
    elements = {text.removeprefix("array<").split("(")[0].rstrip(">") for text in arrays}
    assert {"integer", "string", "decimal", "float64", "time", "time_tz", "json"} <= elements
    assert len({vector["id"] for vector in VECTORS}) == len(VECTORS)


def test_the_file_matches_its_generator() -> None:
    # Changing a rule means regenerating on purpose: python -m tests.merkle.make_golden_vectors
    assert build_vectors() == VECTORS


def test_python_reproduces_every_vector() -> None:
    expected = expected_outcomes(VECTORS)
    produced = python_outcomes(VECTORS)
    assert {i for i in expected if produced[i] != expected[i]} == set()


def test_a_changed_vector_is_caught() -> None:
    tampered = [dict(VECTORS[0], row_hash=VECTORS[0]["row_hash"] + 1)]
    assert python_outcomes(tampered) != expected_outcomes(tampered)


def test_a_changed_md5_vector_is_caught() -> None:
    tampered = [dict(VECTORS[0], row_hash_md5=VECTORS[0]["row_hash_md5"] ^ 1)]
    assert python_outcomes(tampered) != expected_outcomes(tampered)


def test_the_md5_flavour_is_the_first_eight_bytes_of_md5() -> None:
    # md5(b"") = d41d8cd98f00b204 e9800998ecf8427e: the first 8 bytes, read signed
    assert md5_hash64(b"") == int.from_bytes(bytes.fromhex("d41d8cd98f00b204"), "big", signed=True)
    assert md5_hash64(b"") < 0  # 0xd4... has its top bit set
