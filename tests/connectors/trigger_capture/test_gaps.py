"""The gap tracker: the frontier passes a position not visible yet only once every
transaction that could still commit it has finished."""

from __future__ import annotations

import pytest

from cdc_core.errors import ContractError
from connectors.trigger_capture.gaps import GapTracker


def test_a_gap_holds_the_frontier_until_its_possible_owners_finish() -> None:
    tracker = GapTracker(10)
    assert tracker.advance((11, 13, 14), frozenset({"a", "b"})) == 11
    assert tracker.open_gaps == {12: frozenset({"a", "b"})}
    # b finished, a runs on: 12 may still be a's; a newer transaction c cannot own it.
    assert tracker.advance((13, 14, 16), frozenset({"a", "c"})) == 11
    assert tracker.open_gaps == {12: frozenset({"a"}), 15: frozenset({"a", "c"})}
    # a committed 12 (visible now); 15 waits for c.
    assert tracker.advance((12, 13, 14, 16), frozenset({"c", "d"})) == 14
    # c and d finished without 15 showing: it was rolled back, closed for good.
    assert tracker.advance((16,), frozenset({"e"})) == 16
    assert tracker.open_gaps == {}


def test_with_nothing_running_every_gap_closes_at_once() -> None:
    tracker = GapTracker(0)
    assert tracker.advance((3, 9), frozenset({"a"})) == 0
    assert tracker.advance((3, 9), frozenset()) == 9


def test_a_read_seeing_nothing_new_keeps_the_frontier() -> None:
    tracker = GapTracker(5)
    assert tracker.advance((), frozenset({"a"})) == 5


def test_positions_must_ascend_above_the_frontier() -> None:
    with pytest.raises(ContractError):
        GapTracker(5).advance((5, 6), frozenset())
    with pytest.raises(ContractError):
        GapTracker(5).advance((7, 6), frozenset())
