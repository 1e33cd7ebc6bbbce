"""The gap tracker: the frontier passes a position not visible yet only once every
transaction that could still commit it has finished."""

from __future__ import annotations

import pytest

from cdc_core.errors import ContractError
from connectors.trigger_capture.gaps import GapTracker


def test_a_gap_holds_the_frontier_until_its_possible_owners_finish() -> None:
    tracker = GapTracker(10)
    assert tracker.advance((11, 13, 14), frozenset({"a", "b"}), taken=14) == 11
    assert tracker.open_gaps == {12: frozenset({"a", "b"})}
    # b finished, a runs on: 12 may still be a's; a newer transaction c cannot own it.
    assert tracker.advance((13, 14, 16), frozenset({"a", "c"}), taken=16) == 11
    assert tracker.open_gaps == {12: frozenset({"a"}), 15: frozenset({"a", "c"})}
    # a committed 12 (visible now); 15 waits for c.
    assert tracker.advance((12, 13, 14, 16), frozenset({"c", "d"}), taken=16) == 14
    # c and d finished without 15 showing: it was rolled back, closed for good.
    assert tracker.advance((16,), frozenset({"e"}), taken=16) == 16
    assert tracker.open_gaps == {}


def test_a_gap_above_the_value_read_before_the_read_waits_for_a_read_that_names_its_owners() -> (
    None
):
    tracker = GapTracker(0)
    # 2 was taken after the sequence was read (by a transaction the list may not hold).
    assert tracker.advance((1, 3), frozenset(), taken=1) == 1
    assert tracker.open_gaps == {}
    assert tracker.advance((3,), frozenset({"x"}), taken=3) == 1
    assert tracker.open_gaps == {2: frozenset({"x"})}
    assert tracker.advance((2, 3), frozenset(), taken=3) == 3


def test_values_taken_before_the_read_are_gaps_even_above_every_visible_one() -> None:
    tracker = GapTracker(5)
    assert tracker.advance((6,), frozenset({"a"}), taken=8) == 6
    assert tracker.open_gaps == {7: frozenset({"a"}), 8: frozenset({"a"})}
    assert tracker.advance((), frozenset({"b"}), taken=8) == 8  # a rolled back: both close
    assert GapTracker(5).advance((), frozenset(), taken=9) == 9


def test_with_nothing_running_every_gap_closes_at_once() -> None:
    tracker = GapTracker(0)
    assert tracker.advance((3, 9), frozenset({"a"}), taken=9) == 0
    assert tracker.advance((3, 9), frozenset(), taken=9) == 9


def test_a_read_seeing_nothing_new_keeps_the_frontier() -> None:
    tracker = GapTracker(5)
    assert tracker.advance((), frozenset({"a"}), taken=5) == 5


def test_positions_must_ascend_above_the_frontier() -> None:
    with pytest.raises(ContractError):
        GapTracker(5).advance((5, 6), frozenset(), taken=6)
    with pytest.raises(ContractError):
        GapTracker(5).advance((7, 6), frozenset(), taken=7)
