"""Example ``result.json`` documents as plain dicts, shaped as ``validator.result.to_dict``."""

from __future__ import annotations

from typing import Any

STARTED = "2026-11-22T02:00:00+00:00"
FINISHED = "2026-11-22T02:03:20+00:00"


def make_comparison(name: str, differences: int = 0, *, depth: int = 8) -> dict[str, Any]:
    """A comparison with ``differences`` detailed differences cycling through every kind.

    Difference ``i`` lies in leaf ``(7 * i) % 2**depth`` so the heat map has spread drift.
    """
    diffs = [_difference(i) for i in range(differences)]
    leaves: dict[str, int] = {}
    by_kind: dict[str, int] = {}
    for i, diff in enumerate(diffs):
        leaf = str((7 * i) % (1 << depth))
        leaves[leaf] = leaves.get(leaf, 0) + 1
        by_kind[diff["kind"]] = by_kind.get(diff["kind"], 0) + 1
    return {
        "name": name,
        "status": "differences" if differences else "in_sync",
        "source": f"shop_src.{name}",
        "target": f"lake.shop.{name}",
        "source_rows": 10_000,
        "target_rows": 10_000 - by_kind.get("missing_in_target", 0),
        "source_position": "mariadb-bin.000003:1234",
        "target_position": "mariadb-bin.000003:1234",
        "depth": depth,
        "leaves_compared": 1 << depth,
        "leaves_mismatched": len(leaves),
        "mismatched_leaves": leaves,
        "differences": diffs,
        "differences_total": differences,
        "counts_by_kind": by_kind,
        "schema_differences": [],
        "in_flight": [],
        "timings": {"hash": 1.25, "leaves": 0.5, "keys": 0.25, "columns": 0.125},
        "error": None,
    }


def make_error(name: str, message: str = "source table shop.gone does not exist") -> dict[str, Any]:
    """A comparison that could not run."""
    comparison = make_comparison(name)
    comparison.update(status="error", error=message, depth=0, leaves_compared=0, timings={})
    return comparison


def make_result(comparisons: int = 1, differences: int = 0, errors: int = 0) -> dict[str, Any]:
    """A run of ``comparisons`` drifted comparisons (in sync when ``differences`` is 0)
    followed by ``errors`` failed ones."""
    items = [make_comparison(f"table_{i:02d}", differences) for i in range(comparisons)]
    items += [make_error(f"broken_{i:02d}") for i in range(errors)]
    return wrap(items)


def wrap(comparisons: list[dict[str, Any]]) -> dict[str, Any]:
    """A run-level result around ``comparisons``, its status derived as the validator does."""
    statuses = {c["status"] for c in comparisons}
    status = "error" if "error" in statuses else "in_sync"
    if status == "in_sync" and "differences" in statuses:
        status = "differences"
    return {
        "schema_version": 1,
        "status": status,
        "started": STARTED,
        "finished": FINISHED,
        "duration_s": 200.0,
        "replcheck_version": "0.1.0",
        "comparisons": comparisons,
    }


def _difference(i: int) -> dict[str, Any]:
    key = [str(1000 + i), None if i % 5 == 4 else f"region-{i % 3}"]
    kind = ("changed", "missing_in_target", "extra_in_target", "duplicate_key")[i % 4]
    if kind == "changed":
        columns = [
            {"column": "amount", "source": f"{i}.50", "target": f"{i}.05"},
            {"column": "note", "source": None, "target": "late"},
        ]
        return {"key": key, "columns": columns, "kind": kind}
    if kind == "duplicate_key":
        return {"key": key, "side": "target", "count": 2, "kind": kind}
    return {"key": key, "kind": kind}
