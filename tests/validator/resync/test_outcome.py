"""The outcome of a re-sync: when is a comparison repaired, and the exit codes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from validator.result import MissingInTarget
from validator.resync.outcome import ComparisonResync, Mode, ResyncOutcome, Revalidation

BASE = ComparisonResync("orders", "pg", Mode.APPLIED, requested=3)


@pytest.mark.parametrize(
    ("change", "repaired", "exit_code"),
    [
        ({"revalidation": Revalidation.KEYS}, True, 0),
        ({"revalidation": Revalidation.KEYS, "remaining_total": 1}, False, 1),
        ({"revalidation": Revalidation.KEYS, "skipped": {"duplicate_key": 1}}, False, 1),
        ({"revalidation": Revalidation.FULL, "skipped": {"not_detailed": 9}}, True, 0),
        ({"revalidation": Revalidation.FULL, "remaining_total": 2}, False, 1),
        ({"mode": Mode.DRY_RUN}, False, 0),
        ({"mode": Mode.NOTHING}, True, 0),
        ({"mode": Mode.FAILED, "error": "target unreachable"}, False, 2),
        ({}, False, 1),  # applied but never checked: not proven repaired
    ],
)
def test_repaired_and_exit_code(change: dict[str, object], repaired: bool, exit_code: int) -> None:
    comparison = replace(BASE, **change)  # type: ignore[arg-type]
    assert (comparison.repaired, comparison.exit_code) == (repaired, exit_code)


def test_the_run_exits_with_the_worst_comparison_and_serialises() -> None:
    remaining = replace(
        BASE,
        revalidation=Revalidation.KEYS,
        remaining=(MissingInTarget(("7",)),),
        remaining_total=1,
    )
    done = replace(BASE, revalidation=Revalidation.KEYS)
    outcome = ResyncOutcome("s", "f", "me", "r", (done, remaining))
    data = outcome.to_dict()
    assert outcome.exit_code == data["exit_code"] == 1
    assert data["comparisons"][1]["remaining"] == [{"key": ["7"], "kind": "missing_in_target"}]
    assert [c["repaired"] for c in data["comparisons"]] == [True, False]
    assert ResyncOutcome("s", "f", "me", "r", ()).exit_code == 0
