"""A comparison run again when the CDC pipeline moved its lake table aside under it.

A pipeline loads a table again after a DDL the lake cannot follow (``LakeSink.retire_table``):
it moves the table's folder aside and writes a new one. A validation reading the table at
that moment fails on files that are gone, with a Delta, DuckDB, Spark or OS error by engine
(postgres-full seeds 408 and 488 of the catalog soak). Such a comparison runs again, and
waits for the new table to reach the source's position like any lake behind it. A failure
while the table stayed where it was is the comparison's own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from cdc_core.lake.layout import ChangelogMoved, LakeTable, changelog_generation

log = logging.getLogger(__name__)

ATTEMPTS = 3  # a reload moves a table once per DDL it cannot follow
R = TypeVar("R")


def through_reloads(compare: Callable[[], R], table: LakeTable | None) -> R:
    """``compare()``, again while a reload moved ``table`` (the comparison's lake target;
    None: a database target) aside during it, at most ``ATTEMPTS`` times in all. An
    object-store lake's tables are never moved aside (``LakeSink.retire_table``), and asking
    an unreachable store here would replace the comparison's own error naming it."""
    if table is None or not table.location.is_local:
        return compare()
    for attempt in range(1, ATTEMPTS + 1):
        generation = changelog_generation(table)
        try:
            return compare()
        except Exception as exc:
            moved = isinstance(exc, ChangelogMoved) or changelog_generation(table) != generation
            if not moved or attempt == ATTEMPTS:
                raise
            log.info(
                "lake table %s was moved aside while it was compared (the CDC pipeline loads"
                " it again after a DDL); comparing again (attempt %d of %d)",
                table.table,
                attempt + 1,
                ATTEMPTS,
            )
    raise AssertionError("unreachable: the last attempt returns or raises")
