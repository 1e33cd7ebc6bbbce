"""The ``expectations`` of a comparison: the documented shape loads; every mistake names its
key and line; the gate fails on a failed expectation whatever differences it tolerates."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from cdc_core.errors import ConfigError
from reports.json_schema import load_schema
from validator.cli import EXIT_DIFFERENCES, EXIT_ERROR, EXIT_OK, gate_verdict
from validator.config import (
    EXPECTATION_KINDS,
    ExpectationConfig,
    ValidatorConfig,
    load_validator_config,
)

HEAD = """\
connections:
  src: {url: "duckdb:///shop.duckdb"}
  lake: {lake: "/data/lake"}
comparisons:
  - name: orders
    source: {connection: src, table: orders}
    target: {connection: lake, table: shop.orders}
    expectations:
"""
DOCUMENTED = """\
      - {kind: key_not_null_unique}
      - {kind: not_null, column: customer_id}
      - {kind: unique, column: ref, mostly: 0.99}
      - {kind: between, column: amount, min: 0, max: 10000}
      - {kind: between, column: placed_at, min: 2020-01-01}
      - {kind: in_set, column: status, values: [new, paid, shipped]}
      - {kind: regex, column: email, pattern: '^[^@]+@[^@]+$'}
      - {kind: row_count, tolerance: 0.5%}
      - {kind: row_count, tolerance: 10}
      - {kind: row_count}
"""


def load(tmp_path: Path, suite: str) -> ValidatorConfig:
    path = tmp_path / "replcheck.yaml"
    path.write_text(HEAD + suite, encoding="utf-8")
    return load_validator_config(path, environ={})


def test_the_documented_shape_loads(tmp_path: Path) -> None:
    loaded = load(tmp_path, DOCUMENTED).comparison("orders").expectations
    assert [e.kind for e in loaded] == [
        "key_not_null_unique",
        "not_null",
        "unique",
        "between",
        "between",
        "in_set",
        "regex",
        "row_count",
        "row_count",
        "row_count",
    ]
    assert loaded[1].column == "customer_id" and loaded[1].mostly == 1.0
    assert loaded[2].mostly == 0.99
    assert (loaded[3].min_value, loaded[3].max_value) == (0, 10000)
    assert loaded[4].min_value == dt.date(2020, 1, 1) and loaded[4].max_value is None
    assert loaded[5].values == ("new", "paid", "shipped")
    assert loaded[6].pattern == "^[^@]+@[^@]+$"
    assert (loaded[7].tolerance, loaded[7].tolerance_percent) == (0.5, True)
    assert (loaded[8].tolerance, loaded[8].tolerance_percent) == (10.0, False)
    assert loaded[9].tolerance == 0.0
    assert loaded[1].where.endswith("line 10, key comparisons[0].expectations[1]")


def test_a_comparison_without_expectations_has_none(tmp_path: Path) -> None:
    path = tmp_path / "plain.yaml"
    path.write_text(HEAD.replace("    expectations:\n", ""), encoding="utf-8")
    config = load_validator_config(path, environ={}).comparison("orders")
    assert config.expectations == ()


@pytest.mark.parametrize(
    ("suite", "expected"),
    [
        (
            "      - {kind: unique_key}\n",
            r"line 9, key comparisons\[0\]\.expectations\[0\]\.kind: unknown expectation kind "
            r"'unique_key'; expected one of: key_not_null_unique, not_null, unique, between",
        ),
        (
            "      - {kind: between, column: amount, minimum: 0}\n",
            r"line 9, key comparisons\[0\]\.expectations\[0\]\.minimum: unknown key; "
            r"expected one of: kind, column, min, max, mostly",
        ),
        (
            "      - {kind: row_count, column: id}\n",
            r"expectations\[0\]\.column: unknown key; expected one of: kind, tolerance",
        ),
        ("      - {column: id}\n", r"expectations\[0\]: missing required key 'kind'"),
        ("      - {kind: not_null}\n", r"expectations\[0\]: missing required key 'column'"),
        ("      - {kind: in_set, column: s}\n", r"missing required key 'values'"),
        ("      - {kind: in_set, column: s, values: []}\n", r"values: must be a non-empty list"),
        ("      - {kind: regex, column: s, pattern: '[a-'}\n", r"pattern: is not a valid regular"),
        ("      - {kind: between, column: a}\n", r"needs min, max or both"),
        ("      - {kind: between, column: a, min: 5, max: 1}\n", r"min: is above max \(5 > 1\)"),
        ("      - {kind: between, column: a, min: [1]}\n", r"min: must be a number, a date"),
        ("      - {kind: unique, column: a, mostly: 1.5}\n", r"mostly: must be above 0"),
        ("      - {kind: row_count, tolerance: 5 percent}\n", r"tolerance: must be a whole number"),
        ("      - {kind: row_count, tolerance: -1}\n", r"tolerance: must be a whole number"),
        ("      - not_null\n", r"key comparisons\[0\]\.expectations: item 0 must be a mapping"),
    ],
)
def test_mistakes_name_the_key_and_line(tmp_path: Path, suite: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        load(tmp_path, suite)


def test_the_row_count_range_is_inclusive_and_never_widened_by_a_fraction() -> None:
    def row_count(tolerance: float, percent: bool) -> ExpectationConfig:
        return ExpectationConfig("row_count", tolerance=tolerance, tolerance_percent=percent)

    assert row_count(0, False).row_count_range(200) == (200, 200)
    assert row_count(3, False).row_count_range(200) == (197, 203)
    assert row_count(1.5, True).row_count_range(200) == (197, 203)
    assert row_count(1.4, True).row_count_range(200) == (198, 202)  # 2.8 rows: 2 either way
    assert row_count(10, False).row_count_range(4) == (0, 14)


def test_a_column_kind_needs_exactly_a_column() -> None:
    with pytest.raises(ValueError, match="needs a column"):
        ExpectationConfig("not_null")
    with pytest.raises(ValueError, match="needs a column"):
        ExpectationConfig("row_count", column="id")
    with pytest.raises(ValueError, match="unknown expectation kind"):
        ExpectationConfig("fresh")


def test_the_result_schema_knows_exactly_the_configurable_kinds() -> None:
    schema_kinds = load_schema()["$defs"]["expectation"]["properties"]["kind"]["enum"]
    assert schema_kinds == list(EXPECTATION_KINDS)


def document(status: str, differences: int, *expectations: bool) -> dict[str, Any]:
    checked = [{"success": ok} for ok in expectations]
    comparison = {"differences_total": differences, "expectations": checked}
    return {"status": status, "comparisons": [comparison]}


@pytest.mark.parametrize(
    ("result", "max_differences", "code", "verdict"),
    [
        (document("in_sync", 0, True), 0, EXIT_OK, "gate passed: 0 difference(s), 0 allowed"),
        (document("differences", 3), 5, EXIT_OK, "gate passed: 3 difference(s), 5 allowed"),
        (document("differences", 3), 2, EXIT_DIFFERENCES, "gate FAILED: 3 difference(s)"),
        (
            document("differences", 0, True, False),
            100,
            EXIT_DIFFERENCES,
            "gate FAILED: 0 difference(s), 100 allowed; 1 expectation(s) failed",
        ),
        (document("error", 0, False), 100, EXIT_ERROR, "could not be validated"),
    ],
)
def test_the_gate_fails_on_a_failed_expectation_whatever_it_tolerates(
    result: dict[str, Any], max_differences: int, code: int, verdict: str
) -> None:
    exit_code, message = gate_verdict(result, max_differences)
    assert exit_code == code
    assert verdict in message


def test_the_gate_reads_results_written_before_expectations_existed() -> None:
    old = {"status": "differences", "comparisons": [{"differences_total": 1}]}
    assert gate_verdict(old, 1) == (EXIT_OK, "gate passed: 1 difference(s), 1 allowed")
