"""The JSON Schema of ``result.json`` and a validator whose errors name the JSON path.

``result.schema.json`` (draft 2020-12, shipped as package data) documents the run-level
result exactly: the run's fields, and every comparison as ``validator.result.to_dict``
serialises it. Renderers call :func:`validate_result` first, so a malformed file fails
with one clear message instead of a ``KeyError`` deep inside a template.

Error messages never quote the offending value: it may be a row value (STYLE.md: row values
never reach logs), so they name the path and the rule broken instead.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import ValidationError, best_match

from cdc_core.errors import TerminalError

SCHEMA_RESOURCE = "result.schema.json"


class ResultSchemaError(TerminalError):
    """A result document does not match ``result.schema.json``.

    Attributes:
        path: JSON path of the first problem, e.g. ``$.comparisons[0].status``.
    """

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"invalid result at {path}: {problem}")
        self.path = path


@cache
def load_schema() -> dict[str, Any]:
    """The result schema, read once from the package data."""
    text = resources.files("reports").joinpath(SCHEMA_RESOURCE).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def validate_result(data: dict[str, Any]) -> None:
    """Check a result document against the schema.

    Args:
        data: A parsed ``result.json``.

    Raises:
        ResultSchemaError: naming the JSON path of the first problem and the rule it breaks.
    """
    error = best_match(_validator().iter_errors(data))
    if error is not None:
        path, problem = _describe(error)
        raise ResultSchemaError(path, problem)


@cache
def _validator() -> Draft202012Validator:
    # jsonschema checks "date-time" only when rfc3339-validator is installed; checking it
    # ourselves keeps validation identical wherever replcheck runs.
    checker = FormatChecker(formats=())
    checker.checks("date-time", raises=ValueError)(_is_iso_datetime)
    return Draft202012Validator(load_schema(), format_checker=checker)


def _is_iso_datetime(instance: object) -> bool:
    if isinstance(instance, str):
        datetime.fromisoformat(instance)
    return True


def _describe(error: ValidationError) -> tuple[str, str]:
    """(path, problem) for one error, without quoting the instance."""
    path = list(error.absolute_path)
    instance = error.instance
    if error.validator == "required" and isinstance(instance, dict):
        missing = _first_absent(error.validator_value, instance)
        return to_json_path([*path, missing]), "required field is missing"
    if "propertyNames" in error.absolute_schema_path and isinstance(instance, str):
        # The instance is a field name (a kind or a leaf number), never a row value.
        return to_json_path([*path, instance]), f"field name {_rule(error)}"
    if error.validator == "additionalProperties" and isinstance(instance, dict):
        allowed = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
        extra = _first_absent(instance, allowed)
        return to_json_path([*path, extra]), "field is not part of the schema"
    return to_json_path(path), _rule(error)


def _first_absent(names: Iterable[str], present: dict[str, Any]) -> str:
    return next((name for name in names if name not in present), "?")


def _rule(error: ValidationError) -> str:
    keyword, expected = error.validator, error.validator_value
    if keyword == "enum":
        return "must be one of " + ", ".join(json.dumps(value) for value in expected)
    if keyword == "const":
        return f"must be {json.dumps(expected)}"
    if keyword == "type":
        types = expected if isinstance(expected, list) else [expected]
        return "must be of type " + " or ".join(types)
    if keyword == "minimum":
        return f"must be >= {expected}"
    if keyword == "maximum":
        return f"must be <= {expected}"
    if keyword == "pattern":
        return f"must match {expected}"
    if keyword == "format":
        return f"must be a {expected} (ISO 8601)"
    return f"breaks the schema rule {keyword!s}={json.dumps(expected)}"


def to_json_path(parts: Iterable[str | int]) -> str:
    """``$.comparisons[0].status`` for ``["comparisons", 0, "status"]``."""
    text = "$"
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part.isidentifier():
            text += f".{part}"
        else:
            text += f"[{json.dumps(part)}]"
    return text
