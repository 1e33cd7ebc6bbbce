"""The one comparison walk (``validator.engines.walk``): every engine's phases run in one
order, timed by one timer with one progress line each, and one result is built from what
they found, whatever computes the sides."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import pytest

from merkle.tree import LeafDigest
from validator.engines.progress import PhaseTimer
from validator.engines.walk import Compared, LeafDigests, Tally, walk
from validator.result import Coverage, Difference, MissingInTarget, Status

COMPARED = Compared("orders", "src:orders", "lake:orders", "binlog 1:4", "v7", "local")


@dataclass(frozen=True, slots=True)
class _Keys:
    total: int
    by_kind: dict[str, int]
    per_leaf: dict[int, int]


@dataclass
class _Sides:
    """Two sides that differ in leaf 2 by one missing row; records what the walk asks."""

    calls: list[str] = field(default_factory=list)
    rehashed: int | None = None

    def leaf_digests(self) -> LeafDigests:
        self.calls.append("leaves")
        source = {1: LeafDigest(2, 10), 2: LeafDigest(1, 5)}
        return LeafDigests(source, {1: LeafDigest(2, 10)}, 2, 4, self.rehashed)

    def differing_keys(self, depth: int, mismatched: tuple[int, ...]) -> _Keys:
        self.calls.append(f"keys {depth} {mismatched}")
        return _Keys(1, {"missing_in_target": 1}, {2: 1})

    def differences(self, keys: _Keys) -> list[Difference]:
        self.calls.append(f"columns {keys.total}")
        return [MissingInTarget(("7",))]


def test_the_walk_runs_the_phases_in_order_and_builds_the_result() -> None:
    sides = _Sides()
    timer = PhaseTimer("orders", "here")
    with timer.phase("source"):  # an engine's own phase before the walk, on the same timer
        pass
    result = walk(sides, COMPARED, timer)
    assert sides.calls == ["leaves", "keys 2 (2,)", "columns 1"]
    assert list(result.timings) == ["source", "leaves", "keys", "columns"]
    assert (result.name, result.source, result.target) == ("orders", "src:orders", "lake:orders")
    assert (result.source_position, result.target_position) == ("binlog 1:4", "v7")
    assert result.engine == "local" and result.coverage is None
    assert result.status is Status.DIFFERENCES
    assert (result.source_rows, result.target_rows) == (3, 2)
    assert (result.depth, result.leaves_compared, result.leaves_mismatched) == (2, 4, 1)
    assert result.mismatched_leaves == {2: 1} and result.counts_by_kind == {"missing_in_target": 1}
    assert result.differences == (MissingInTarget(("7",)),) and result.differences_total == 1


def test_equal_sides_are_in_sync() -> None:
    class _Equal(_Sides):
        def differing_keys(self, depth: int, mismatched: tuple[int, ...]) -> _Keys:
            return _Keys(0, {}, {})

        def differences(self, keys: _Keys) -> list[Difference]:
            return []

    result = walk(_Equal(), COMPARED, PhaseTimer("orders", "here"))
    assert result.status is Status.IN_SYNC and result.differences_total == 0


def test_a_tally_counts_every_leafs_rows_and_says_what_the_run_covered() -> None:
    """An incremental run hashes some leaves; its tally (which may store state) runs last."""
    sides = _Sides(rehashed=1)
    coverage = Coverage("incremental", leaves_changed=1, leaves_reused=3)

    def tally(digests: LeafDigests) -> Tally:
        sides.calls.append("tally")
        assert digests.rows == (3, 2)
        return Tally((300, 200), coverage)

    result = walk(sides, COMPARED, PhaseTimer("orders", "here"), tally)
    assert sides.calls[-1] == "tally"
    assert (result.source_rows, result.target_rows, result.coverage) == (300, 200, coverage)
    assert result.leaves_compared == 4  # the tree's leaves, not only those re-hashed


def test_each_phase_says_what_it_found(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, "validator.engines.progress"):
        walk(_Sides(rehashed=2), COMPARED, PhaseTimer("orders", "here"))
    lines = [record.getMessage() for record in caplog.records]
    assert lines[0] == "comparison orders: leaves (here)"
    assert "3 + 2 rows hashed" in lines[1] and lines[1].endswith("1 of 2 differ")
    assert lines[2] == "comparison orders: keys (here)"
    assert lines[3].startswith("comparison orders: keys: 1 differing in 1 leaves")
    assert lines[4] == "comparison orders: columns (here)"


def test_a_failing_phase_stops_the_walk_before_the_tally() -> None:
    class _Failing(_Sides):
        def differing_keys(self, depth: int, mismatched: tuple[int, ...]) -> _Keys:
            raise RuntimeError("the connection broke")

    def tally(digests: LeafDigests) -> Tally:
        raise AssertionError("no state is stored for a comparison that failed")

    with pytest.raises(RuntimeError, match="the connection broke"):
        walk(_Failing(), COMPARED, PhaseTimer("orders", "here"), tally)
