"""Row hashes, key hashes and leaf assignment (DESIGN.md, "The hash contract").

``row_hash = xxh64(canonical row bytes, seed=42)`` and ``key_hash = xxh64(canonical key
bytes, seed=42)``, both read as signed 64-bit integers: that is what Spark's native
``xxhash64`` of one binary column returns, so no engine needs a Python UDF to agree.
A row's leaf is the top ``depth`` bits of its key hash (as an unsigned number): hash
buckets, not key ranges, so no product's collation or key order matters.

Databases have no xxh64. When both sides of a comparison compute their own leaf digests in
SQL (``connectors.pushdown``, the ``database`` engine), they hash the same canonical bytes
with MD5, which every supported product has: ``md5_hash64 = the first 8 bytes of
MD5(canonical bytes)``, read as a big-endian signed 64-bit integer. One comparison never
mixes the two hashes: both of its sides use the same engine.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import xxhash

from cdc_core.errors import ContractError
from merkle.canonical import RowEncoder
from merkle.layout import RowLayout

HASH_SEED = 42  # Spark's xxhash64 seed; fixed by the contract
MAX_DEPTH = 30  # 2**30 leaves is far beyond any table we size leaves for
_TWO_64 = 1 << 64


def to_signed64(value: int) -> int:
    """Read an unsigned 64-bit number as a signed one (two's complement)."""
    return value - _TWO_64 if value >= 1 << 63 else value


def hash_bytes(data: bytes) -> int:
    """xxh64 of ``data`` with the contract's seed, as a signed 64-bit integer."""
    return to_signed64(xxhash.xxh64_intdigest(data, seed=HASH_SEED))


def md5_hash64(data: bytes) -> int:
    """The database engine's hash: the first 8 bytes of MD5(``data``), big-endian, signed."""
    digest = hashlib.md5(data, usedforsecurity=False).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def leaf_of(key_hash: int, depth: int) -> int:
    """The leaf a key hash falls in: its top ``depth`` bits."""
    if not 0 <= depth <= MAX_DEPTH:
        raise ContractError(f"tree depth must be 0..{MAX_DEPTH}, not {depth}")
    return (key_hash % _TWO_64) >> (64 - depth) if depth else 0


class RowHasher:
    """Computes ``(key_hash, row_hash)`` for rows given in a layout's column order."""

    __slots__ = ("_key_encoder", "_key_positions", "_row_encoder")

    def __init__(self, layout: RowLayout) -> None:
        ltypes = [column.ltype for column in layout.columns]
        self._row_encoder = RowEncoder(ltypes, layout.options)
        self._key_encoder = RowEncoder([c.ltype for c in layout.key_columns], layout.options)
        self._key_positions = layout.key_positions()

    def row_bytes(self, row: Sequence[Any]) -> bytes:
        """Canonical bytes of a whole row."""
        return self._row_encoder.to_bytes(row)

    def key_bytes(self, row: Sequence[Any]) -> bytes:
        """Canonical bytes of a row's key."""
        return self._key_encoder.to_bytes([row[i] for i in self._key_positions])

    def row_hash(self, row: Sequence[Any]) -> int:
        """The row hash."""
        return hash_bytes(self.row_bytes(row))

    def key_hash(self, row: Sequence[Any]) -> int:
        """The key hash."""
        return hash_bytes(self.key_bytes(row))

    def hashes(self, row: Sequence[Any]) -> tuple[int, int]:
        """``(key_hash, row_hash)`` of one row."""
        return self.key_hash(row), self.row_hash(row)
