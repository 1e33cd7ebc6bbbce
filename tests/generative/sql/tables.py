"""The generator's picture of a table: its name, integer key column and other columns.

It is only what the generator needs to write valid statements (column names and kinds as
DDL changes them, and fresh keys); the source database itself, not this picture, is what
the lake is judged against.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence

from tests.generative.sql.columns import KINDS

# Awkward names the product must carry through (README "Any name"): hyphen, space, quote
# characters, a dot, a reserved word, mixed case, non-ASCII.
AWKWARD = ("order", "my-table", "two words", 'say"hi', "back`tick", "v1.2", "MixedCase",
           "données", "select")  # fmt: skip
KEY_BASE = 1_000  # fresh keys are multiples of this: shifts by +1 never reach the next one


@dataclasses.dataclass(frozen=True, slots=True)
class Column:
    name: str
    kind: str
    nullable: bool = True


@dataclasses.dataclass(slots=True)
class Table:
    """A generated table (mutable: DDL and inserts change it as the workload is made)."""

    name: str
    key: str  # the integer column statements pick rows by: the primary key, if ``keyed``
    columns: list[Column]
    keyed: bool = True  # False: no primary key, and equal rows (README, "Tables without a key")
    unique_only: bool = False  # keyed by a unique key instead of a primary key
    next_key: int = 1
    keys: set[int] = dataclasses.field(default_factory=set)  # keys inserted (some may be gone)
    hot: list[int] = dataclasses.field(default_factory=list)  # drifted: picked most of the time

    def fresh_key(self) -> int:
        key = self.next_key * KEY_BASE
        self.next_key += 1
        self.keys.add(key)
        return key

    def known_key(self, rng: random.Random, hot: bool = True) -> int:
        """A key inserted before (``hot``: most often a drifted one, if any)."""
        if hot and self.hot and rng.random() < 0.7:
            return rng.choice(self.hot)
        return rng.choice(sorted(self.keys)) if self.keys else self.fresh_key()

    def value_columns(self) -> list[Column]:
        return [c for c in self.columns if c.name != self.key]

    def free_name(self, rng: random.Random) -> str:
        """A column name not in the table (case-insensitively: Delta ignores case)."""
        taken = {c.name.lower() for c in self.columns}
        candidates = [
            n for n in (*AWKWARD, *(f"c{i}" for i in range(40))) if n.lower() not in taken
        ]
        return rng.choice(candidates[: len(AWKWARD) + 3])


def new_table(
    name: str,
    rng: random.Random,
    kinds: Sequence[str] = KINDS,
    keyless_kinds: Sequence[str] | None = None,
) -> Table:
    """A table with three to six columns of random ``kinds`` (``keyless_kinds`` in a table
    without a key, if given; awkward names too) besides its integer key column, which is
    its primary key in three tables of four."""
    key = rng.choice(("id", "ID", "key-id", "order"))
    keyed = rng.random() < 0.75
    table = Table(name, key, [Column(key, "bigint", nullable=False)], keyed=keyed)
    for _ in range(rng.randint(3, 6)):
        choices = kinds if keyed or keyless_kinds is None else keyless_kinds
        table.columns.append(Column(table.free_name(rng), rng.choice(choices)))
    return table
