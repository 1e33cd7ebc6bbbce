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
from cdc_core.lake_location import StoreError

log = logging.getLogger(__name__)

ATTEMPTS = 3  # a reload moves a table once per DDL it cannot follow
R = TypeVar("R")


def through_reloads(compare: Callable[[], R], table: LakeTable | None) -> R:
    """``compare()``, again while a reload moved ``table`` (the comparison's lake target;
    None: a database target) aside during it, at most ``ATTEMPTS`` times in all. An object
    store that fails the generation's lookup leaves the comparison's own error to name it."""
    if table is None:
        return compare()
    for attempt in range(1, ATTEMPTS + 1):
        try:
            generation = changelog_generation(table)
        except StoreError:
            return compare()
        try:
            return compare()
        except Exception as exc:
            if not (isinstance(exc, ChangelogMoved) or _moved(table, generation)) or (
                attempt == ATTEMPTS
            ):
                raise
            log.info(
                "lake table %s was moved aside while it was compared (the CDC pipeline loads"
                " it again after a DDL); comparing again (attempt %d of %d)",
                table.table,
                attempt + 1,
                ATTEMPTS,
            )
    raise AssertionError("unreachable: the last attempt returns or raises")


def _moved(table: LakeTable, generation: int | str | None) -> bool:
    """Whether ``table``'s changelog is another generation than ``generation`` now."""
    try:
        return changelog_generation(table) != generation
    except StoreError:
        return False
