"""The stored validation state: a round trip, and a clear error naming a corrupt file."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc_core.lake import LakeTable
from connectors.pushdown import RangeLeaves
from merkle.tree import LeafDigest
from validator.incremental.changed_leaves import leaf_of
from validator.incremental.state import (
    CorruptState,
    LogMark,
    ValidationState,
    read_state,
    state_path,
    write_state,
)
from validator.incremental.stored_digests import StoredDigests

STATE = ValidationState(
    fingerprint={"columns": "[('id', 'IntegerType()')]"},
    scheme=RangeLeaves(2, 125, 4),
    low=100,
    high=120,
    position_text="100..120 (2 partitions)",
    changelog=LogMark("a-table-id", 7),
    mirror=None,
    sweep_cursor=4,
    source=StoredDigests.of({0: LeafDigest(3, 2**64 - 1), 9: LeafDigest(1, 5)}),
    lake=StoredDigests.of({0: LeafDigest(3, 2**64 - 1)}),
)


def test_a_state_reads_back_as_written_and_knows_its_differing_leaves(tmp_path: Path) -> None:
    path = state_path(LakeTable(tmp_path, "shop.orders"), "orders/nightly")
    assert path.parent == tmp_path / "_replcheck" / "validation" / "shop" / "orders"
    write_state(path, STATE)
    assert read_state(path) == STATE
    assert STATE.differing_leaves() == {9}
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary left


@pytest.mark.parametrize(
    "text",
    [
        "",
        "[]",
        '{"format": "something else"}',
        '{"format": "replcheck.validation-state", "format_version": 1}',
        '{"format": "replcheck.validation-state", "format_version": 2}',
    ],
)
def test_a_corrupt_state_is_an_error_naming_the_file(tmp_path: Path, text: str) -> None:
    path = tmp_path / "orders.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CorruptState, match="is not a validation state") as raised:
        read_state(path)
    assert raised.value.path == path


def test_digests_merge_and_compare_as_columns() -> None:
    stored = StoredDigests.of(
        {1: LeafDigest(2, 10), 4: LeafDigest(1, 2**64 - 1), 7: LeafDigest(5, 0)}
    )
    fresh = {4: LeafDigest(2, 3), 9: LeafDigest(1, 1)}  # 7 re-hashed and now empty
    merged = stored.replaced({4, 7, 9}, fresh)
    assert merged.to_dict() == {1: LeafDigest(2, 10), 4: LeafDigest(2, 3), 9: LeafDigest(1, 1)}
    assert merged.rows() == 5
    assert merged.differing(stored) == {4, 7, 9}  # other leaves: joined
    assert merged.differing(merged.replaced({4}, {4: LeafDigest(2, 4)})) == {4}  # same leaves
    sliced = StoredDigests(merged.table.slice(1))  # columns at an offset encode as they read
    assert StoredDigests.from_document(sliced.to_document()).to_dict() == sliced.to_dict()
    assert StoredDigests.from_document(merged.to_document()) == merged


def test_digest_columns_of_different_lengths_are_refused() -> None:
    document = StoredDigests.of({1: LeafDigest(2, 10)}).to_document()
    document["count"] = StoredDigests.of({}).to_document()["count"]
    with pytest.raises(ValueError, match="different lengths"):
        StoredDigests.from_document(document)


def test_no_state_file_is_no_state(tmp_path: Path) -> None:
    assert read_state(tmp_path / "absent.json") is None


def test_keys_fall_into_leaves_as_the_sql_puts_them() -> None:
    scheme = RangeLeaves(2, 125, 4)
    assert [leaf_of(k, scheme) for k in (None, -5, 2, 126, 127, 1503, 2000, 10**9)] == [
        0,
        0,
        0,
        0,
        1,
        12,
        15,
        15,
    ]


def test_at_most_so_many_ranges_cover_the_leaves_keeping_the_widest_gaps() -> None:
    from validator.incremental.rehash import covering_runs

    runs = [(0, 1), (3, 4), (10, 12), (13, 14), (40, 41)]
    assert covering_runs(runs, 10) == runs
    assert covering_runs(runs, 3) == [(0, 4), (10, 14), (40, 41)]
    assert covering_runs(runs, 1) == [(0, 41)]
