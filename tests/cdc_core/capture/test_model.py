"""Positions and the raw change model: invariants, ordering, the ABSENT sentinel."""

from __future__ import annotations

import copy
import pickle
from datetime import UTC, datetime

import pytest

from cdc_core.capture.events import ABSENT, Commit, CommittedChange, RowChange
from cdc_core.capture.position import MAX_POSITION, Position
from cdc_core.errors import ContractError


def test_positions_order_and_compare_by_value_only() -> None:
    low, high = Position(5, "bin.000001:5"), Position(4294967301, "bin.000002:5")
    assert low < high and high > low and low <= low and high >= low
    assert Position(5, "bin.000001:5") == Position(5, "5")
    assert len({Position(5, "a"), Position(5, "b")}) == 1
    assert sorted([high, low]) == [low, high]
    assert str(high) == "bin.000002:5"


@pytest.mark.parametrize("value", [-1, MAX_POSITION + 1, True, 1.0])
def test_positions_must_fit_a_bigint(value: object) -> None:
    with pytest.raises(ContractError):
        Position(value, "x")  # type: ignore[arg-type]


def test_absent_is_a_singleton_distinct_from_none() -> None:
    assert repr(ABSENT) == "ABSENT"
    assert ABSENT is not None
    assert pickle.loads(pickle.dumps(ABSENT)) is ABSENT
    assert copy.deepcopy({"a": ABSENT})["a"] is ABSENT
    with pytest.raises(TypeError):
        bool(ABSENT)


def test_row_changes_check_their_images() -> None:
    pos = Position.of(1)
    RowChange("t1", pos, "c", "s.t", (1,), {"id": 1})
    RowChange("t1", pos, "d", "s.t", (1,), None, {"id": 1})
    RowChange("t1", pos, "t", "s.t", None)
    with pytest.raises(ContractError):
        RowChange("t1", pos, "u", "s.t", (1,), None)
    with pytest.raises(ContractError):
        RowChange("t1", pos, "d", "s.t", (1,), {"id": 1})
    with pytest.raises(ContractError):
        RowChange("t1", pos, "x", "s.t", (1,), {"id": 1})  # type: ignore[arg-type]
    with pytest.raises(ContractError):
        RowChange("", pos, "c", "s.t", (1,), {"id": 1})


def test_commits_need_an_aware_timestamp_and_seqs_are_not_negative() -> None:
    Commit("t1", Position.of(9), datetime(2026, 1, 1, tzinfo=UTC))
    with pytest.raises(ContractError):
        Commit("t1", Position.of(9), datetime(2026, 1, 1))
    with pytest.raises(ContractError):
        CommittedChange(-1, RowChange("t1", Position.of(1), "t", "s.t", None))
