"""The catalog vocabulary's table kinds (issue 36): what the generator makes of a new table
besides its columns' types.

PostgreSQL: partitioned by its key (range, list or hash; two leaves that every key falls
in, captured through the root: docs/cdc-postgres.md, "Partitioned tables"), stored
generated columns, and foreign keys with each referential action. MariaDB: system
versioning by timestamps (hidden period columns, or the table's own), VIRTUAL and STORED
generated columns, INVISIBLE columns, and foreign keys with the actions the pipeline
captures (``RESTRICT``, ``NO ACTION``; cascading ones are refused: docs/cdc-mariadb.md,
"Foreign keys with cascading actions"). Tables with only a unique key and without a key
are the workload generator's own (``Table.unique_only``, ``Table.keyed``).

Kinds with a few values (actions, partitionings, versionings) are handed out in turn, not
drawn, so a short workload has each; ``test_vocabulary_coverage.py`` reads them back from
the servers' catalogs.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Sequence

from tests.generative.sql.tables import Column, ForeignKey, Generated, Table

ACTIONS = {
    # PostgreSQL: https://www.postgresql.org/docs/15/ddl-constraints.html#DDL-CONSTRAINTS-FK
    "postgres": ("NO ACTION", "RESTRICT", "CASCADE", "SET NULL", "SET DEFAULT"),
    "mariadb": ("NO ACTION", "RESTRICT"),
}
PARTITIONINGS = ("range", "list", "hash")
VERSIONINGS = ("implicit", "declared")
NULL_REFERENCE = 0.25  # share of child rows without a parent


@dataclasses.dataclass(slots=True)
class TableKinds:
    """Shapes the tables of one workload (catalog vocabulary) for ``product``."""

    product: str
    rng: random.Random
    # False under MariaDB's MINIMAL row images, which never hold a VIRTUAL column: the
    # pipeline refuses it by name there (docs/cdc-mariadb.md, "Refused columns";
    # tests/connectors/mariadb/test_generated_columns.py), so it is generated STORED.
    virtual: bool = True
    turns: Counter[str] = dataclasses.field(default_factory=Counter)

    def turn(self, name: str, choices: Sequence[str], offset: int = 0) -> str:
        """The next of ``choices`` for ``name``, in turn."""
        chosen = choices[(self.turns[name] + offset) % len(choices)]
        self.turns[name] += 1
        return chosen

    def shape(self, table: Table, earlier: Sequence[Table]) -> None:
        """Give new ``table`` its table kinds: partitioning or versioning, foreign keys to
        ``earlier`` tables with a key, generated and invisible columns."""
        if self.product == "postgres" and not table.unique_only and self.rng.random() < 0.6:
            # A unique key of a partitioned table is only its leaves' replica identity by
            # each leaf's own index: the generator keeps that kind unpartitioned.
            table.partitioning = self.turn("partitioning", PARTITIONINGS)
        if self.product == "mariadb" and self.rng.random() < 0.4:
            table.versioning = self.turn("versioning", VERSIONINGS)
        for parent in earlier:
            if parent.keyed and self.rng.random() < 0.7:
                for _ in range(self.rng.randint(1, 2)):
                    table.columns.append(self.reference(table, parent))
        for _ in range(self.rng.randint(0, 2)):
            table.columns.append(self.generated(table))
        if self.product == "mariadb":
            table.columns = [self.maybe_invisible(table, column) for column in table.columns]

    def reference(self, table: Table, parent: Table) -> Column:
        actions = ACTIONS[self.product]
        on_delete = self.turn("on_delete", actions)
        on_update = self.turn("on_update", actions, offset=1)
        key = ForeignKey(parent.name, parent.key, on_delete, on_update)
        return Column(table.free_name(self.rng), "bigint", references=key)

    def generated(self, table: Table) -> Column:
        references = [c.name for c in table.columns if c.references is not None]
        expression = self.rng.choice(("twice", "label", "tenfold" if references else "twice"))
        source = self.rng.choice(references) if expression == "tenfold" else table.key
        stored = self.product == "postgres" or self.rng.random() < 0.5 or not self.virtual
        kind = "str" if expression == "label" else "bigint"
        return Column(
            table.free_name(self.rng), kind, generated=Generated(expression, source, stored)
        )

    def maybe_invisible(self, table: Table, column: Column) -> Column:
        plain = column.name != table.key and column.generated is None
        if plain and self.rng.random() < 0.2:
            return dataclasses.replace(column, invisible=True, nullable=True)
        return column


def reference_value(column: Column, tables: Sequence[Table], rng: random.Random) -> int | None:
    """A value of foreign key column ``column``: a key of its parent, or NULL."""
    assert column.references is not None
    parent = next(t for t in tables if t.name == column.references.parent)
    if not parent.keys or rng.random() < NULL_REFERENCE:
        return None
    return rng.choice(sorted(parent.keys))


def families(tables: Sequence[Table]) -> dict[str, int]:
    """Each table's family: tables joined by foreign keys, whose rows a statement locks
    (a child's insert its parent's row, a parent's delete its cascades) share one."""
    family = {table.name: index for index, table in enumerate(tables)}
    for table in tables:
        for column in table.columns:
            if column.references is not None and column.references.parent in family:
                old, new = family[column.references.parent], family[table.name]
                family = {name: new if f == old else f for name, f in family.items()}
    return family
