"""A side's stored leaf digests as two dense Arrow columns: row ``i`` is leaf ``i``'s count
and hash sum (an empty leaf: 0 and 0).

A state of a large table holds a million leaves a side: kept as columns indexed by leaf,
they are read, merged with a run's fresh digests (a masked replace), compared and written
without a Python object per leaf. Dense costs 16 bytes a leaf whether it holds rows or not,
and leaves are at most ``2**20``.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Collection, Iterable, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from merkle.tree import LeafDigest

COUNT, SUM = "count", "hash_sum"
TYPES = {COUNT: pa.int64(), SUM: pa.uint64()}
_CODES = {pa.int64(): "q", pa.uint64(): "Q"}


def int_column(values: Iterable[int], kind: pa.DataType = TYPES[COUNT]) -> pa.Array:
    """A 64-bit integer column of ``values``, built from their bytes: ``pa.array`` of a
    Python list imports pandas (0.2 s) to ask whether the list is a pandas object."""
    data = array(_CODES[kind], values)
    if sys.byteorder == "big":
        data.byteswap()
    return pa.Array.from_buffers(kind, len(data), [None, pa.py_buffer(data)])


class StoredDigests:
    """Leaf digests by leaf index: ``count`` (int64) and ``hash_sum`` (uint64) of equal length."""

    def __init__(self, count: pa.Array, hash_sum: pa.Array) -> None:
        if len(count) != len(hash_sum):
            raise ValueError("digest columns of different lengths")
        if count.type != TYPES[COUNT] or hash_sum.type != TYPES[SUM]:
            raise ValueError(f"digest columns of types {count.type}, {hash_sum.type}")
        if count.null_count or hash_sum.null_count:
            raise ValueError("digest columns hold nulls")
        self.count, self.hash_sum = count, hash_sum

    @classmethod
    def of(cls, digests: Mapping[int, LeafDigest], leaves: int) -> StoredDigests:
        """The columns of a run's digests over ``leaves`` leaves (absent: empty)."""
        counts, sums = [0] * leaves, [0] * leaves
        for leaf, digest in digests.items():
            counts[leaf], sums[leaf] = digest.count, digest.hash_sum
        return cls(int_column(counts), int_column(sums, TYPES[SUM]))

    def __len__(self) -> int:
        return len(self.count)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, StoredDigests)
            and self.count.equals(other.count)
            and self.hash_sum.equals(other.hash_sum)
        )

    def rows(self) -> int:
        """The rows the leaves hold."""
        return int(pc.sum(self.count).as_py() or 0)

    def to_dict(self) -> dict[int, LeafDigest]:
        """The non-empty leaves' digests by leaf."""
        pairs = zip(self.count.to_pylist(), self.hash_sum.to_pylist(), strict=True)
        return {leaf: LeafDigest(c, s) for leaf, (c, s) in enumerate(pairs) if c or s}

    def replaced(self, leaves: Collection[int], fresh: Mapping[int, LeafDigest]) -> StoredDigests:
        """These digests with those of ``leaves`` taken from ``fresh`` (absent: empty)."""
        wanted = sorted(set(leaves))
        flags = bytearray(len(self))
        for leaf in wanted:
            flags[leaf] = 1
        mask = pa.Array.from_buffers(pa.uint8(), len(flags), [None, pa.py_buffer(flags)]).cast(
            pa.bool_()
        )
        empty = LeafDigest(0, 0)  # one, not one a leaf: 30,000 leaves took 0.04 s
        digests = [fresh.get(leaf, empty) for leaf in wanted]
        counts = int_column(d.count for d in digests)
        sums = int_column((d.hash_sum for d in digests), TYPES[SUM])
        return StoredDigests(
            pc.replace_with_mask(self.count, mask, counts),
            pc.replace_with_mask(self.hash_sum, mask, sums),
        )

    def differing(self, other: StoredDigests) -> set[int]:
        """Leaves whose digests differ from ``other``'s (of as many leaves)."""
        if len(self) != len(other):
            raise ValueError(f"digests of {len(self)} and {len(other)} leaves")
        differ = pc.or_(
            pc.not_equal(self.count, other.count), pc.not_equal(self.hash_sum, other.hash_sum)
        )
        return set(pc.indices_nonzero(differ).to_pylist())
