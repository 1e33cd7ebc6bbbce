"""Leaf digests, the Merkle tree over them, and the tree diff.

A leaf digest is ``(row count, sum of row hashes mod 2**64)``: order-independent, so any
engine computes it with one GROUP BY. Node bytes: a leaf is ``count`` and ``sum`` as two
big-endian unsigned 64-bit integers (16 bytes); an inner node is the big-endian xxh64
(seed 42) of its left child's bytes followed by its right child's bytes (8 bytes). Level 0
is the root, level ``depth`` the leaves; leaf ``i`` has parent ``i // 2``. Empty leaves are
``(0, 0)``, so two trees can be compared whatever rows either side lacks.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import xxhash

from cdc_core.errors import ContractError
from merkle.hashing import HASH_SEED, MAX_DEPTH, RowHasher, leaf_of
from merkle.layout import RowLayout

_MASK64 = (1 << 64) - 1
DEFAULT_ROWS_PER_LEAF = 4096


@dataclass(frozen=True, slots=True)
class LeafDigest:
    """Digest of the rows in one leaf: how many, and their row hashes summed mod 2**64."""

    count: int
    hash_sum: int

    def __post_init__(self) -> None:
        if self.count < 0 or not 0 <= self.hash_sum <= _MASK64:
            raise ContractError(f"invalid leaf digest ({self.count}, {self.hash_sum})")

    @classmethod
    def from_signed(cls, count: int, signed_sum: int) -> LeafDigest:
        """Build from a sum read as signed 64-bit (as Spark returns it)."""
        return cls(count, signed_sum & _MASK64)

    def to_bytes(self) -> bytes:
        """The leaf's node bytes."""
        return struct.pack(">QQ", self.count, self.hash_sum)


EMPTY_LEAF = LeafDigest(0, 0)


def build_leaf_digests(hashes: Iterable[tuple[int, int]], depth: int) -> dict[int, LeafDigest]:
    """Leaf digests of ``(key_hash, row_hash)`` pairs; leaves with no rows are left out."""
    counts: dict[int, int] = {}
    sums: dict[int, int] = {}
    for key_hash, row_hash in hashes:
        leaf = leaf_of(key_hash, depth)
        counts[leaf] = counts.get(leaf, 0) + 1
        sums[leaf] = (sums.get(leaf, 0) + row_hash) & _MASK64
    return {leaf: LeafDigest(counts[leaf], sums[leaf]) for leaf in counts}


def leaf_digests_of_rows(
    rows: Iterable[Sequence[Any]], layout: RowLayout, depth: int
) -> dict[int, LeafDigest]:
    """Pure-Python leaf digests of rows given in the layout's column order."""
    hasher = RowHasher(layout)
    return build_leaf_digests((hasher.hashes(row) for row in rows), depth)


def choose_depth(row_count: int, rows_per_leaf: int = DEFAULT_ROWS_PER_LEAF) -> int:
    """Depth that puts about ``rows_per_leaf`` rows (at most twice that) in each leaf."""
    if row_count <= rows_per_leaf:
        return 0
    return min(MAX_DEPTH, math.ceil(math.log2(row_count / rows_per_leaf)))


def _parent_bytes(left: bytes, right: bytes) -> bytes:
    return xxhash.xxh64_digest(left + right, seed=HASH_SEED)


class MerkleTree:
    """A sparse Merkle tree: only nodes above non-empty leaves are stored.

    Args:
        leaves: Digest per leaf index; missing leaves are empty.
        depth: Number of levels below the root (``2**depth`` leaves).
    """

    def __init__(self, leaves: Mapping[int, LeafDigest], depth: int) -> None:
        if not 0 <= depth <= MAX_DEPTH:
            raise ContractError(f"tree depth must be 0..{MAX_DEPTH}, not {depth}")
        if any(not 0 <= leaf < 1 << depth for leaf in leaves):
            raise ContractError(f"leaf index out of range for depth {depth}")
        self.depth = depth
        self.leaves = {i: d for i, d in leaves.items() if d != EMPTY_LEAF}
        self._empty = self._empty_nodes(depth)
        self._levels = self._build_levels()

    @staticmethod
    def _empty_nodes(depth: int) -> list[bytes]:
        empty = [b""] * (depth + 1)
        empty[depth] = EMPTY_LEAF.to_bytes()
        for level in range(depth - 1, -1, -1):
            empty[level] = _parent_bytes(empty[level + 1], empty[level + 1])
        return empty

    def _build_levels(self) -> list[dict[int, bytes]]:
        levels: list[dict[int, bytes]] = [{} for _ in range(self.depth + 1)]
        levels[self.depth] = {i: d.to_bytes() for i, d in self.leaves.items()}
        for level in range(self.depth - 1, -1, -1):
            below, empty = levels[level + 1], self._empty[level + 1]
            for parent in {index // 2 for index in below}:
                left = below.get(2 * parent, empty)
                right = below.get(2 * parent + 1, empty)
                levels[level][parent] = _parent_bytes(left, right)
        return levels

    def node(self, level: int, index: int) -> bytes:
        """Bytes of the node at ``level`` (0 = root) and ``index`` within the level."""
        return self._levels[level].get(index, self._empty[level])

    @property
    def root(self) -> bytes:
        """The root's bytes: equal roots mean equal leaf digests everywhere."""
        return self.node(0, 0)


@dataclass(frozen=True, slots=True)
class TreeDiff:
    """The leaves whose digests differ, and how many node pairs were compared to find them."""

    mismatched_leaves: tuple[int, ...]
    nodes_compared: int

    @property
    def in_sync(self) -> bool:
        """True when no leaf differs."""
        return not self.mismatched_leaves


def build_tree(leaves: Mapping[int, LeafDigest], depth: int) -> MerkleTree:
    """Build the Merkle tree over leaf digests."""
    return MerkleTree(leaves, depth)


def diff_leaves(
    source: Mapping[int, LeafDigest], target: Mapping[int, LeafDigest]
) -> tuple[int, ...]:
    """The leaves whose digests differ (a missing leaf is empty), sorted: what
    ``diff_trees`` finds, without the trees. With both sides' digests on one machine the
    trees only cost: a million leaves take 1.8 s to build two trees, 0.35 s to compare."""
    leaves = source.keys() | target.keys()
    return tuple(
        sorted(
            leaf for leaf in leaves if source.get(leaf, EMPTY_LEAF) != target.get(leaf, EMPTY_LEAF)
        )
    )


def diff_trees(source: MerkleTree, target: MerkleTree) -> TreeDiff:
    """Walk down from the root into differing nodes only; return the mismatched leaves."""
    if source.depth != target.depth:
        raise ContractError(f"cannot compare trees of depth {source.depth} and {target.depth}")
    mismatched: list[int] = []
    compared = 0
    pending = [(0, 0)]
    while pending:
        level, index = pending.pop()
        compared += 1
        if source.node(level, index) == target.node(level, index):
            continue
        if level == source.depth:
            mismatched.append(index)
        else:
            pending.extend(((level + 1, 2 * index + 1), (level + 1, 2 * index)))
    return TreeDiff(tuple(sorted(mismatched)), compared)
