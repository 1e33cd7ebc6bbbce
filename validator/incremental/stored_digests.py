"""A side's stored leaf digests as three Arrow columns (leaf, count, hash sum).

A state of a large table holds a million leaves a side: kept as columns, they are read,
merged with a run's fresh digests, compared and written without a Python object per leaf.
In a state file each column is the base64 of its values as little-endian 64-bit integers.
"""

from __future__ import annotations

import base64
import sys
from array import array
from collections.abc import Collection, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from merkle.tree import LeafDigest

LEAF, COUNT, SUM = "leaf", "count", "hash_sum"
_COLUMNS = {LEAF: (pa.int64(), "q"), COUNT: (pa.int64(), "q"), SUM: (pa.uint64(), "Q")}
_OTHER = "_other"


class StoredDigests:
    """Leaf digests, one row per non-empty leaf, sorted by leaf."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table

    @classmethod
    def of(cls, digests: Mapping[int, LeafDigest]) -> StoredDigests:
        """The table of a run's digests."""
        leaves = sorted(digests)
        return cls(
            pa.table(
                {
                    LEAF: pa.array(leaves, pa.int64()),
                    COUNT: pa.array([digests[leaf].count for leaf in leaves], pa.int64()),
                    SUM: pa.array([digests[leaf].hash_sum for leaf in leaves], pa.uint64()),
                }
            )
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StoredDigests) and self.table.equals(other.table)

    def rows(self) -> int:
        """The rows the leaves hold."""
        return int(pc.sum(self.table[COUNT]).as_py() or 0)

    def to_dict(self) -> dict[int, LeafDigest]:
        """The digests by leaf."""
        columns = [self.table[name].to_pylist() for name in _COLUMNS]
        return {leaf: LeafDigest(c, s) for leaf, c, s in zip(*columns, strict=True)}

    def replaced(self, leaves: Collection[int], fresh: Mapping[int, LeafDigest]) -> StoredDigests:
        """These digests with those of ``leaves`` taken from ``fresh`` (absent: empty)."""
        wanted = pa.array(sorted(leaves), pa.int64())
        kept = self.table.filter(pc.invert(pc.is_in(self.table[LEAF], value_set=wanted)))
        return StoredDigests(pa.concat_tables([kept, StoredDigests.of(fresh).table]).sort_by(LEAF))

    def differing(self, other: StoredDigests) -> set[int]:
        """Leaves whose digests differ from ``other``'s (an absent leaf is empty)."""
        if self.table[LEAF].equals(other.table[LEAF]):  # the usual case: no join needed
            differ = pc.or_(*(pc.not_equal(self.table[n], other.table[n]) for n in (COUNT, SUM)))
            return set(self.table[LEAF].filter(differ).to_pylist())
        joined = self.table.join(other.table, LEAF, join_type="full outer", right_suffix=_OTHER)
        differ = pc.or_(
            *(
                pc.not_equal(pc.fill_null(joined[n], 0), pc.fill_null(joined[n + _OTHER], 0))
                for n in (COUNT, SUM)
            )
        )
        return set(joined.filter(differ)[LEAF].to_pylist())

    def to_document(self) -> dict[str, str]:
        """The JSON form: each column's base64."""
        return {name: _encode(self.table[name], code) for name, (_, code) in _COLUMNS.items()}

    @classmethod
    def from_document(cls, document: Mapping[str, str]) -> StoredDigests:
        """The inverse of ``to_document`` (KeyError, TypeError, ValueError on a bad one)."""
        arrays = {
            name: _decode(document[name], kind, code) for name, (kind, code) in _COLUMNS.items()
        }
        if len({len(a) for a in arrays.values()}) != 1:
            raise ValueError("digest columns of different lengths")
        return cls(pa.table(arrays))


def _encode(column: pa.ChunkedArray, code: str) -> str:
    values = array(code)
    for chunk in column.chunks:  # no nulls: the values buffer is the column
        width = chunk.type.byte_width
        data = chunk.buffers()[1].to_pybytes()
        values.frombytes(data[chunk.offset * width : (chunk.offset + len(chunk)) * width])
    if sys.byteorder == "big":
        values.byteswap()
    return base64.b64encode(values.tobytes()).decode("ascii")


def _decode(text: str, kind: pa.DataType, code: str) -> pa.Array:
    values = array(code)
    values.frombytes(base64.b64decode(text, validate=True))
    if sys.byteorder == "big":
        values.byteswap()
    return pa.Array.from_buffers(kind, len(values), [None, pa.py_buffer(values)])
