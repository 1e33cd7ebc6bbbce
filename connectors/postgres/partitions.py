"""Partitioned tables, captured once: through their root.

A partitioned table's rows live in its partitions, and ``SELECT * FROM root`` reads them
all. A glob such as ``public.*`` matches the root and every partition, so the rows would be
loaded twice; and with the publication's default ``publish_via_partition_root = false``,
pgoutput sends every change as a change of the leaf partition holding the row, so the root
would never follow (https://www.postgresql.org/docs/current/sql-createpublication.html).

So a partition whose ancestor is captured is left out of the captured tables (named on the
terminal as "captured through their root"), and the publication has
``publish_via_partition_root = true``: a change of any partition reaches the stream as a
change of the topmost ancestor the publication holds, with the root's columns and key. An
``UPDATE`` moving a row to another partition arrives as a delete and an insert, both of the
root. A partition captured without its root (a glob matching only partitions) is a table of
its own: no ancestor of it is in the publication, so its changes keep its own name.

A partition created while the pipeline runs is never a new table of its own: it reaches the
lake through its root (publications include a partitioned table's future partitions).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence, Set
from typing import TYPE_CHECKING, Any

from cdc_core.errors import ConfigError
from cdc_core.names import format_table

if TYPE_CHECKING:
    import psycopg

logger = logging.getLogger(__name__)

# Each partition with its ancestors, nearest first (``pg_partition_ancestors`` lists the
# partition itself first: https://www.postgresql.org/docs/current/functions-info.html).
_ANCESTORS_SQL = """
SELECT pn.nspname, p.relname, an.nspname, a.relname
  FROM pg_class p
  JOIN pg_namespace pn ON pn.oid = p.relnamespace
 CROSS JOIN LATERAL pg_partition_ancestors(p.oid) WITH ORDINALITY AS up(relid, depth)
  JOIN pg_class a ON a.oid = up.relid
  JOIN pg_namespace an ON an.oid = a.relnamespace
 WHERE p.relispartition AND up.relid <> p.oid
 ORDER BY 1, 2, up.depth
"""

Ancestors = Mapping[str, Sequence[str]]
"""Per partition (``schema.table``), its ancestors, nearest first."""


def partition_ancestors(connection: psycopg.Connection[Any]) -> dict[str, list[str]]:
    """Every partition of the database with its ancestors, nearest first."""
    found: dict[str, list[str]] = {}
    for schema, name, ancestor_schema, ancestor in connection.execute(_ANCESTORS_SQL):
        found.setdefault(format_table(schema, name), []).append(
            format_table(ancestor_schema, ancestor)
        )
    return found


def captured_through_roots(tables: Sequence[str], ancestors: Ancestors) -> dict[str, str]:
    """The partitions among ``tables`` whose rows another of ``tables`` captures: each with
    its topmost ancestor among ``tables`` (the one the publication publishes it as)."""
    captured = set(tables)
    through: dict[str, str] = {}
    for table in tables:
        roots = [ancestor for ancestor in ancestors.get(table, ()) if ancestor in captured]
        if roots:
            through[table] = roots[-1]
    return through


def leave_out_partitions(
    tables: Sequence[str], ancestors: Ancestors, named: Set[str] = frozenset()
) -> list[str]:
    """``tables`` without the partitions captured through an ancestor among them, whose
    names are logged (the terminal shows them).

    Args:
        tables: The captured tables, patterns resolved.
        ancestors: Per partition, its ancestors.
        named: The pipeline's tables as written: a partition named there is not left out
            in silence but refused.

    Raises:
        ConfigError: A partition named in the pipeline's tables has an ancestor there too.
    """
    through = captured_through_roots(tables, ancestors)
    twice = {partition: root for partition, root in through.items() if partition in named}
    if twice:
        shown = ", ".join(f"{partition} (of {root})" for partition, root in twice.items())
        raise ConfigError(
            f"the pipeline's tables name partitions {shown} and their root too, so their rows"
            " would be loaded twice, and the partitions' changes reach the log as the root's;"
            f" remove {', '.join(twice)} from the pipeline's tables: their rows are captured"
            " through their root",
            {"tables": ", ".join(twice)},
        )
    by_root: dict[str, list[str]] = {}
    for partition, root in through.items():
        by_root.setdefault(root, []).append(partition)
    for root, partitions in by_root.items():
        logger.info(
            "tables %s are partitions, captured through their root %s",
            ", ".join(partitions),
            root,
        )
    return [table for table in tables if table not in through]


def listing_without_partitions(
    list_tables: Callable[[], list[str]],
    ancestors: Callable[[], Ancestors],
    captured: Sequence[str],
) -> Callable[[], list[str]]:
    """The source's table listing without the partitions whose rows come through a captured
    ancestor (those present now and those created later), for the pipeline's table globs."""
    kept = set(captured)

    def listing() -> list[str]:
        known = ancestors()
        return [t for t in list_tables() if not any(a in kept for a in known.get(t, ()))]

    return listing
