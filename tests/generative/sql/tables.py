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
class Generated:
    """A generated column's expression over one integer column of its table (``render.py``
    spells it): ``twice`` (``c * 2 + 1``), ``label`` (``'k'`` and ``c`` as text) or
    ``tenfold`` (``coalesce(c, -1) * 10``); ``stored`` or computed when read (MariaDB's
    VIRTUAL)."""

    expression: str
    source: str
    stored: bool = True

    def __post_init__(self) -> None:
        assert self.expression in ("twice", "label", "tenfold"), self.expression


@dataclasses.dataclass(frozen=True, slots=True)
class ForeignKey:
    """A column's reference to another generated table's key, with its referential
    actions (``NO ACTION``, ``RESTRICT``, ``CASCADE``, ``SET NULL``, ``SET DEFAULT``)."""

    parent: str
    parent_key: str
    on_delete: str
    on_update: str


@dataclasses.dataclass(frozen=True, slots=True)
class Column:
    name: str
    kind: str
    nullable: bool = True
    generated: Generated | None = None  # never written: the server computes it
    invisible: bool = False  # MariaDB's INVISIBLE: left out of SELECT *
    references: ForeignKey | None = None  # written with a parent's key or NULL


@dataclasses.dataclass(slots=True)
class Table:
    """A generated table (mutable: DDL and inserts change it as the workload is made)."""

    name: str
    key: str  # the integer column statements pick rows by: the primary key, if ``keyed``
    columns: list[Column]
    keyed: bool = True  # False: no primary key, and equal rows (README, "Tables without a key")
    unique_only: bool = False  # keyed by a unique key instead of a primary key
    # Table kinds of the catalog vocabulary (``table_kinds.py``): PostgreSQL's partitioning
    # of the key (range, list, hash) and MariaDB's system versioning ("implicit": hidden
    # period columns; "declared": period columns of the table's own).
    partitioning: str | None = None
    versioning: str | None = None
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
        """The columns statements write besides the key (generated ones are computed)."""
        return [c for c in self.columns if c.name != self.key and c.generated is None]

    def computed(self) -> bool:
        """Whether a column is generated or invisible, or the table declares its period
        columns: ``SELECT *`` does not fit an insert into the table."""
        declared = self.versioning == "declared"
        return declared or any(c.generated is not None or c.invisible for c in self.columns)

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
