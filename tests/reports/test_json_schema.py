"""result.schema.json documents result.json; every mistake is reported with its JSON path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from cdc_core.errors import TerminalError
from reports.json_schema import ResultSchemaError, load_schema, to_json_path, validate_result
from reports.model import KINDS, STATUSES, read_result
from tests.reports.sample import make_comparison, make_error, make_result, wrap
from validator.result import (
    Changed,
    ColumnChange,
    ComparisonResult,
    DuplicateKey,
    ExtraInTarget,
    MissingInTarget,
    SchemaDifference,
    Status,
    to_dict,
)


def problem_path(data: dict[str, Any]) -> str:
    with pytest.raises(ResultSchemaError) as caught:
        validate_result(data)
    return caught.value.path


def test_the_schema_is_a_valid_draft_2020_12_schema() -> None:
    Draft202012Validator.check_schema(load_schema())
    assert load_schema()["$schema"].endswith("/draft/2020-12/schema")


def test_the_renderers_know_exactly_the_schemas_statuses_and_kinds() -> None:
    definitions = load_schema()["$defs"]
    assert tuple(definitions["status"]["enum"]) == STATUSES
    assert set(definitions["kind"]["enum"]) == set(KINDS)


@pytest.mark.parametrize(
    "result",
    [
        make_result(1),
        make_result(3, differences=9, errors=1),
        wrap([]),
        wrap([make_error("gone")]),
    ],
    ids=["in_sync", "mixed", "no_comparisons", "error"],
)
def test_valid_results_pass(result: dict[str, Any]) -> None:
    validate_result(result)


def test_the_validators_own_serialisation_matches_the_schema() -> None:
    comparison = ComparisonResult(
        name="orders",
        status=Status.DIFFERENCES,
        source="shop_src.orders",
        target="lake.shop.orders",
        source_rows=3,
        target_rows=4,
        depth=2,
        leaves_compared=4,
        leaves_mismatched=2,
        mismatched_leaves={1: 2, 3: 2},
        differences=(
            MissingInTarget(("1",)),
            ExtraInTarget(("2", None)),
            Changed(("3",), (ColumnChange("email", "***", "***"), ColumnChange("n", None, "1"))),
            DuplicateKey(("4",), "target", 2),
        ),
        differences_total=4,
        counts_by_kind={"missing_in_target": 1, "extra_in_target": 1, "changed": 1},
        schema_differences=(SchemaDifference("note", "missing in target", "missing_in_target"),),
        timings={"hash": 0.5},
    )
    failed = ComparisonResult("gone", Status.ERROR, "a", "b", error="table does not exist")
    result = wrap([to_dict(comparison), to_dict(failed)])
    validate_result(json.loads(json.dumps(result)))


def set_in(data: dict[str, Any], path: list[str | int], value: Any) -> dict[str, Any]:
    target: Any = data
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return data


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (["status"], "drifted", "$.status"),
        (["comparisons", 0, "status"], "ok", "$.comparisons[0].status"),
        (
            ["comparisons", 0, "differences", 2, "kind"],
            "renamed",
            "$.comparisons[0].differences[2].kind",
        ),
        (["comparisons", 0, "source_rows"], -1, "$.comparisons[0].source_rows"),
        (["comparisons", 0, "source_rows"], "12", "$.comparisons[0].source_rows"),
        (["comparisons", 0, "differences", 3, "count"], 1, "$.comparisons[0].differences[3].count"),
        (
            ["comparisons", 0, "differences", 1, "key", 0],
            7,
            "$.comparisons[0].differences[1].key[0]",
        ),
        (["schema_version"], 2, "$.schema_version"),
        (["started"], "yesterday", "$.started"),
    ],
)
def test_a_wrong_value_is_reported_with_its_path(
    path: list[str | int], value: Any, expected: str
) -> None:
    assert problem_path(set_in(make_result(1, differences=4), path, value)) == expected


@pytest.mark.parametrize(
    ("field", "expected"),
    [
        ("differences_total", "$.comparisons[0].differences_total"),
        ("error", "$.comparisons[0].error"),
        ("name", "$.comparisons[0].name"),
    ],
)
def test_a_missing_field_is_reported_with_its_path(field: str, expected: str) -> None:
    result = make_result(1, differences=2)
    del result["comparisons"][0][field]
    with pytest.raises(ResultSchemaError, match="required field is missing") as caught:
        validate_result(result)
    assert caught.value.path == expected


def test_a_missing_run_field_and_an_unknown_field_are_named() -> None:
    result = make_result(1)
    del result["finished"]
    assert problem_path(result) == "$.finished"
    result = make_result(1)
    result["comparisons"][0]["rows"] = 5
    assert problem_path(result) == "$.comparisons[0].rows"


def test_a_changed_row_needs_its_columns() -> None:
    result = make_result(1, differences=1)
    del result["comparisons"][0]["differences"][0]["columns"]
    assert problem_path(result) == "$.comparisons[0].differences[0].columns"


def test_bad_field_names_in_maps_are_named() -> None:
    result = make_result(1, differences=1)
    result["comparisons"][0]["counts_by_kind"] = {"moved": 1}
    assert problem_path(result) == "$.comparisons[0].counts_by_kind.moved"
    result = make_result(1, differences=1)
    result["comparisons"][0]["mismatched_leaves"] = {"-3": 1}
    assert problem_path(result) == '$.comparisons[0].mismatched_leaves["-3"]'


def test_the_error_never_quotes_the_value_and_is_terminal() -> None:
    result = make_result(1, differences=1)
    column = result["comparisons"][0]["differences"][0]["columns"][0]
    column["source"] = {"card": "4111-1111-1111-1111"}
    with pytest.raises(ResultSchemaError) as caught:
        validate_result(result)
    assert isinstance(caught.value, TerminalError)
    assert caught.value.path == "$.comparisons[0].differences[0].columns[0].source"
    assert "4111" not in str(caught.value)
    assert "must be of type string or null" in str(caught.value)


def test_json_paths_quote_names_that_are_not_identifiers() -> None:
    assert to_json_path(["a", 0, "b c", "d"]) == '$.a[0]["b c"].d'


def test_read_result_validates_files(tmp_path: Path) -> None:
    good = tmp_path / "result.json"
    good.write_text(json.dumps(wrap([make_comparison("orders", 3)])), encoding="utf-8")
    assert read_result(good)["comparisons"][0]["name"] == "orders"
    broken = tmp_path / "broken.json"
    broken.write_text('{"status": ', encoding="utf-8")
    with pytest.raises(ResultSchemaError, match="not valid JSON"):
        read_result(broken)
    listed = tmp_path / "list.json"
    listed.write_text("[]", encoding="utf-8")
    with pytest.raises(ResultSchemaError, match=r"at \$: must be of type object"):
        read_result(listed)
