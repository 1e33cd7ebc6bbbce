"""Read-only helpers over a ``result.json`` document (plain dicts, as the validator writes).

``reports`` may not import ``validator`` (layering), so the renderers share these few
derived facts instead of a second copy of the result model. Every helper expects a
document that passed :func:`reports.json_schema.validate_result`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from cdc_core.input_limits import RESULT_LIMITS, check_json_depth, read_limited

Result = dict[str, Any]
Comparison = dict[str, Any]

# The verdicts, in the words every output uses (result.json, terminal, HTML, Markdown,
# JUnit): one vocabulary, so a status is found by the same word wherever it is read.
STATUSES = ("in_sync", "differences", "error")
KINDS = ("missing_in_target", "extra_in_target", "changed", "duplicate_key")
KIND_LABELS = {
    "missing_in_target": "missing in target",
    "extra_in_target": "extra in target",
    "changed": "changed",
    "duplicate_key": "duplicate key",
}
# A column the comparison could not compare is a difference in the same words as a row.
SCHEMA_KINDS = ("missing_in_target", "extra_in_target", "changed")
SCHEMA_KIND_LABELS = {kind: f"column {KIND_LABELS[kind]}" for kind in SCHEMA_KINDS}
# The lake's self-consistency check: findings beside a comparison, never its status.
FINDING_LABELS = {
    "foreign_commit": "commit not written by replcheck",
    "changed_file": "data file changed without a Delta commit",
    "unpaired_history": "changelog and mirror not in step",
}
NULL_TEXT = "NULL"
# What a report says of a comparison the error stopped before it counted anything: its
# zeros are no counts, and "0 rows" would read as empty tables.
NOT_COMPARED = "not compared: the comparison stopped at its error before counting any row"


def read_result(path: Path) -> Result:
    """Read and validate a ``result.json`` file.

    The file's size and nesting are checked first (``RESULT_LIMITS``): a crafted file must
    not cost minutes and gigabytes, or exhaust the parser's recursion.

    Raises:
        ConfigError: the file is larger or more deeply nested than ``RESULT_LIMITS``.
        ResultSchemaError: the file is not JSON or does not match the schema.
        OSError: the file cannot be read.
    """
    # Here, not at the top: the renderers need no jsonschema (0.06 s to import).
    from reports.json_schema import ResultSchemaError, validate_result

    limits = RESULT_LIMITS
    raw = read_limited(path, limits.max_bytes, limits.what, limits.fix)
    check_json_depth(raw, path, limits)
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ResultSchemaError("$", f"not UTF-8 text (byte {exc.start})") from exc
    except json.JSONDecodeError as exc:
        raise ResultSchemaError("$", f"not valid JSON (line {exc.lineno})") from exc
    if not isinstance(data, dict):
        raise ResultSchemaError("$", "must be of type object")
    validate_result(data)
    return data


def rows(count: int) -> str:
    """``"1 row"``, ``"1,234 rows"``."""
    return f"{count:,} row" + ("" if count == 1 else "s")


def status_counts(result: Result) -> dict[str, int]:
    """Number of comparisons per status, every status present (in ``STATUSES`` order)."""
    counts = dict.fromkeys(STATUSES, 0)
    for comparison in result["comparisons"]:
        counts[comparison["status"]] += 1
    return counts


def totals_by_kind(comparisons: Sequence[Comparison]) -> dict[str, int]:
    """Differences per kind summed over ``comparisons``; kinds with none are left out."""
    return _summed((c["counts_by_kind"] for c in comparisons), KINDS)


def _summed(counts: Iterable[Mapping[str, int]], kinds: Sequence[str]) -> dict[str, int]:
    """Counts per kind summed, in ``kinds`` order; kinds with none left out."""
    totals = dict.fromkeys(kinds, 0)
    for each in counts:
        for kind, count in each.items():
            totals[kind] += count
    return {kind: count for kind, count in totals.items() if count}


def describe_kinds(counts: Mapping[str, int]) -> str:
    """``"changed 3, missing in target 2"`` in ``KINDS`` order; ``"none"`` when empty."""
    parts = [f"{KIND_LABELS[kind]} {counts[kind]}" for kind in KINDS if counts.get(kind)]
    return ", ".join(parts) or "none"


def schema_kind(difference: Mapping[str, Any]) -> str:
    """The kind of a schema difference; a result written before schema differences had one
    says it only in the problem (``"missing in target"``, ``"extra in target"``)."""
    if "kind" in difference:
        return str(difference["kind"])
    by_problem = {KIND_LABELS[kind]: kind for kind in ("missing_in_target", "extra_in_target")}
    return by_problem.get(difference["problem"], "changed")


def schema_detail(difference: Mapping[str, Any]) -> str:
    """A schema difference's problem, or ``""`` when its kind already says it all."""
    problem = str(difference["problem"])
    return "" if problem == KIND_LABELS[schema_kind(difference)] else problem


def describe_schema_difference(difference: Mapping[str, Any]) -> str:
    """``"column missing in target: note"``, ``"column changed: b (incompatible types …)"``."""
    line = f"{SCHEMA_KIND_LABELS[schema_kind(difference)]}: {difference['column']}"
    detail = schema_detail(difference)
    return f"{line} ({detail})" if detail else line


def schema_counts(comparison: Comparison) -> dict[str, int]:
    """Schema differences per kind (``SCHEMA_KINDS`` order), kinds with none left out."""
    found = comparison.get("schema_differences", ())
    return _summed(({schema_kind(d): 1} for d in found), SCHEMA_KINDS)


def schema_totals_by_kind(comparisons: Sequence[Comparison]) -> dict[str, int]:
    """Schema differences per kind summed over ``comparisons``; kinds with none left out."""
    return _summed((schema_counts(c) for c in comparisons), SCHEMA_KINDS)


def total_differences(comparison: Comparison) -> int:
    """Differing rows plus schema differences: what a comparison counts for in a report's
    totals and against ``replcheck gate --max-differences``."""
    return int(comparison["differences_total"]) + len(comparison.get("schema_differences", ()))


def compared(comparison: Comparison) -> bool:
    """Whether the comparison counted rows and hashed leaves: false for one that could not
    run (its counts are zeros, not findings). A comparison may fail after comparing (the
    two sides' readers disagreeing on a value): its counts stand."""
    return comparison["status"] != "error" or comparison["leaves_compared"] > 0


def changed_columns(comparison: Comparison) -> list[str]:
    """The names of the columns the detailed changed rows differ in, sorted (names only: a
    sensitive column's values are never part of it)."""
    found = comparison["differences"]
    return sorted({c["column"] for d in found if d["kind"] == "changed" for c in d["columns"]})


def describe_differences(comparison: Comparison) -> str:
    """``"changed 3, column missing in target 1"``: rows by kind, then schema differences
    by kind; ``"none"`` when there are neither."""
    rows = describe_kinds(comparison["counts_by_kind"])
    parts = [] if rows == "none" else [rows]
    counts = schema_counts(comparison)
    parts += [f"{SCHEMA_KIND_LABELS[kind]} {count}" for kind, count in counts.items()]
    return ", ".join(parts) or "none"


def omitted_count(comparison: Comparison, shown: int) -> int:
    """Differences counted but not shown when a report shows ``shown`` of the detailed ones.

    This includes the ones the result itself did not detail (``differences_total`` beyond
    its ``differences``). A key duplicated on both sides is one counted difference but two
    detailed entries, so the result's own part is clamped at zero.
    """
    detailed = sum(d.get("rows", 1) for d in comparison["differences"])  # equal rows: rows
    not_detailed = max(0, comparison["differences_total"] - detailed)
    return not_detailed + len(comparison["differences"]) - shown


def format_key(key: Sequence[str | None]) -> str:
    """A key as one line of text: its parts joined by ``", "``, NULL parts as ``NULL``."""
    return ", ".join(NULL_TEXT if part is None else part for part in key)


def positions(result: Result) -> list[tuple[str | None, str | None]]:
    """The distinct (source, target) position pairs compared, in first-seen order."""
    pairs = ((c["source_position"], c["target_position"]) for c in result["comparisons"])
    return list(dict.fromkeys(pairs))


def describe_coverage(comparison: Comparison) -> str | None:
    """One line on which leaves the run re-hashed (None: no validation state kept, or a
    result written before incremental runs existed); the guarantee is separate."""
    coverage = comparison.get("coverage")
    if not coverage:
        return None
    if coverage["mode"] == "full":
        why = f" ({coverage['reason']})" if coverage["reason"] else ""
        return f"full run: every leaf re-hashed{why}"
    return (
        f"incremental {coverage['from_position']} → {coverage['to_position']}: "
        f"{coverage['leaves_changed']:,} changed leaves, {coverage['leaves_swept']:,} swept, "
        f"{coverage['leaves_reused']:,} reused; every leaf swept within "
        f"{coverage['sweep_runs']:,} runs ({coverage['runs_until_swept']:,} more this cycle)"
    )


def phase_seconds(comparison: Comparison) -> float:
    """Total seconds over the comparison's timed phases."""
    return float(sum(comparison["timings"].values()))


def expectations(comparison: Comparison) -> list[dict[str, Any]]:
    """The comparison's checked data-quality expectations (none in older results)."""
    checked: list[dict[str, Any]] = comparison.get("expectations") or []
    return checked


def failed_expectations(comparison: Comparison) -> list[dict[str, Any]]:
    """The expectations the target did not meet."""
    return [e for e in expectations(comparison) if not e["success"]]


def describe_expectations(comparison: Comparison) -> str:
    """``"2 of 5 expectations failed"``, ``"5 expectations passed"``, or ``""`` for none."""
    checked = len(expectations(comparison))
    failed = len(failed_expectations(comparison))
    if not checked:
        return ""
    noun = "expectation" + ("" if checked == 1 else "s")
    if failed:
        return f"{failed:,} of {checked:,} {noun} failed"
    return f"{'the' if checked == 1 else 'all'} {checked:,} {noun} passed"


def describe_observed(expectation: dict[str, Any]) -> str:
    """What was observed, in words: ``"3 of 2,000 rows unexpected (0.15%)"``, ``"1,998"``.

    Sample values are not part of it (renderers mask and escape them themselves).
    """
    if expectation["error"] is not None:
        return f"could not be evaluated: {expectation['error']}"
    observed = expectation["observed_value"]
    if observed is not None:  # a table-level expectation: the row count
        return f"observed {rows(int(observed)) if observed.isdigit() else observed}"
    unexpected, checked = expectation["unexpected_count"], expectation["element_count"]
    if unexpected is None or checked is None:
        return "passed" if expectation["success"] else "failed"
    text = f"{unexpected:,} of {rows(checked)} unexpected"
    if expectation["unexpected_percent"] is not None and unexpected:
        text += f" ({expectation['unexpected_percent']:.2f}%)"
    return text


RESYNC_MODE_LABELS = {
    "refreshed": "rows re-read from the source and written to the lake",
    "applied": "repair SQL applied",
    "dry_run": "repairs proposed, nothing written (dry run)",
    "nothing": "nothing to repair",
    "failed": "failed",
}


def describe_resync_check(resync: dict[str, Any]) -> str:
    """What the re-validation after a re-sync found, in words (one comparison of
    ``resync.json``)."""
    if resync["error"] is not None:
        return "not checked: the re-sync failed"
    if resync["revalidation"] == "none":
        return "not checked (nothing was applied)" if resync["mode"] == "dry_run" else "not checked"
    scope = "the whole comparison" if resync["revalidation"] == "full" else "the repaired keys"
    remaining = resync["remaining_total"]
    text = f"{scope} re-validated: "
    text += "every difference is gone" if remaining == 0 else f"{remaining:,} still differ"
    if resync["in_flight"]:
        text += f" ({len(resync['in_flight']):,} still changing, not counted)"
    return text


def lake_findings(comparison: Comparison) -> list[str]:
    """The lake's self-consistency findings in words (none in results written before the
    check existed)."""
    found = comparison.get("lake_findings") or []
    return [f"lake: {FINDING_LABELS[f['kind']]}: {f['detail']}" for f in found]
