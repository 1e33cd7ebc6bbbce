"""Leaves, digests, the Merkle tree and its diff (pure Python)."""

from __future__ import annotations

import struct

import pytest
import xxhash
from hypothesis import given
from hypothesis import strategies as st

from cdc_core.errors import ContractError
from merkle.hashing import leaf_of, to_signed64
from merkle.layout import RowLayout
from merkle.tree import (
    EMPTY_LEAF,
    LeafDigest,
    build_leaf_digests,
    build_tree,
    choose_depth,
    diff_leaves,
    diff_trees,
    leaf_digests_of_rows,
)
from merkle.types import IntegerType, StringType

MASK = (1 << 64) - 1


def test_leaf_is_the_top_bits_of_the_key_hash() -> None:
    assert leaf_of(to_signed64(0xF000_0000_0000_0000), 4) == 15
    assert leaf_of(-1, 3) == 7  # all bits set, read unsigned
    assert leaf_of(0x0FFF_FFFF_FFFF_FFFF, 4) == 0
    assert leaf_of(12345, 0) == 0
    with pytest.raises(ContractError):
        leaf_of(0, 31)


def test_leaf_digest_sums_wrap_modulo_two_to_the_64() -> None:
    hashes = [(0, to_signed64(MASK)), (0, 2), (0, -5)]
    digests = build_leaf_digests(hashes, depth=0)
    assert digests == {0: LeafDigest(3, (MASK + 2 - 5) & MASK)}
    assert LeafDigest.from_signed(1, -1) == LeafDigest(1, MASK)


def test_digests_do_not_depend_on_row_order() -> None:
    layout = RowLayout.of([("id", IntegerType()), ("name", StringType())], ["id"])
    rows = [(i, f"name-{i}") for i in range(200)]
    forward = leaf_digests_of_rows(rows, layout, depth=3)
    backward = leaf_digests_of_rows(list(reversed(rows)), layout, depth=3)
    assert forward == backward
    assert sum(d.count for d in forward.values()) == 200
    assert len(forward) == 8  # 200 hashed keys reach every one of 8 leaves


def test_node_bytes_follow_the_documented_layout() -> None:
    leaves = {0: LeafDigest(2, 7), 1: LeafDigest(1, 3)}
    tree = build_tree(leaves, depth=1)
    left = struct.pack(">QQ", 2, 7)
    right = struct.pack(">QQ", 1, 3)
    assert tree.node(1, 0) == left
    assert tree.root == xxhash.xxh64_digest(left + right, seed=42)


def test_empty_leaves_are_zero_digests_and_trees_of_nothing_agree() -> None:
    assert build_tree({}, 5).root == build_tree({3: EMPTY_LEAF}, 5).root
    assert build_tree({}, 5).root != build_tree({3: LeafDigest(1, 0)}, 5).root


def test_diff_walks_only_into_mismatched_subtrees() -> None:
    depth = 10
    same = {i: LeafDigest(1, i) for i in range(0, 1024, 3)}
    changed = dict(same)
    changed[300] = LeafDigest(1, 999)
    diff = diff_trees(build_tree(same, depth), build_tree(changed, depth))
    assert diff.mismatched_leaves == (300,)
    assert diff.nodes_compared == 1 + 2 * depth  # one path down, plus each sibling
    assert diff_trees(build_tree(same, depth), build_tree(same, depth)).nodes_compared == 1


def test_trees_of_different_depth_cannot_be_compared() -> None:
    with pytest.raises(ContractError):
        diff_trees(build_tree({}, 2), build_tree({}, 3))
    with pytest.raises(ContractError):
        build_tree({4: LeafDigest(1, 1)}, 2)


def test_depth_is_chosen_from_the_row_count() -> None:
    assert choose_depth(0) == 0
    assert choose_depth(4096) == 0
    assert choose_depth(4097) == 1
    assert choose_depth(10_000_000) == 12  # about 2,400 rows per leaf
    rows_per_leaf = 10_000_000 / 2 ** choose_depth(10_000_000)
    assert 1_000 <= rows_per_leaf <= 10_000


_LEAF_SETS = st.dictionaries(
    st.integers(0, 255),
    st.builds(LeafDigest, st.integers(1, 50), st.integers(0, MASK)),
    max_size=40,
)


@given(source=_LEAF_SETS, target=_LEAF_SETS)
def test_diff_returns_exactly_the_leaves_whose_digests_differ(
    source: dict[int, LeafDigest], target: dict[int, LeafDigest]
) -> None:
    expected = sorted(
        leaf
        for leaf in set(source) | set(target)
        if source.get(leaf, EMPTY_LEAF) != target.get(leaf, EMPTY_LEAF)
    )
    diff = diff_trees(build_tree(source, 8), build_tree(target, 8))
    assert list(diff.mismatched_leaves) == expected
    assert diff.in_sync == (not expected)
    assert diff_leaves(source, target) == diff.mismatched_leaves  # the diff without trees
    assert diff_leaves({**source, 300: EMPTY_LEAF}, target) == diff.mismatched_leaves


def test_excluded_columns_never_reach_the_hash() -> None:
    full = RowLayout.of(
        [("id", IntegerType()), ("name", StringType()), ("loaded_at", StringType())], ["id"]
    )
    layout = full.excluding(["loaded_at"])
    assert layout.names == ("id", "name")
    before = leaf_digests_of_rows([(1, "a")], layout, 2)
    assert before == leaf_digests_of_rows([(1, "a")], full.excluding(["loaded_at"]), 2)
    assert before != leaf_digests_of_rows([(1, "a", "x")], full, 2)
    with pytest.raises(ContractError, match="key columns"):
        full.excluding(["id"])
    with pytest.raises(ContractError, match="not compared"):
        full.excluding(["nope"])
