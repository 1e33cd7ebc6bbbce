"""Whether a lake behind a source snapshot already holds a table's state there, so a
validation after ``cdc run --until-caught-up`` (the pipeline stopped) needs no pipeline.

The lake holds every change of a table up to its high-water mark H. When the source's log
provably holds no committed change of the table between H and the snapshot's position P
(``connectors.model.QuietLog``: the product reads its own log, never moving a pipeline's
place in it), the table's state at H is its state at P: the comparison runs at P without
waiting. Writes to other tables or databases, which always move a real server's log, no
longer make it wait. A change of the table there, or a log that cannot tell, leaves the
wait for a running pipeline as before: exact, never ``in_sync`` by guess.
"""

from __future__ import annotations

import logging

from cdc_core.lake.layout import LakeTable, high_water_mark, read_marks
from connectors.model import QuietLog
from connectors.registry import quiet_log_for

log = logging.getLogger(__name__)


def quiet_log_of(url: str | None, password: str | None, source_table: str) -> QuietLog | None:
    """The source's ``QuietLog`` of ``source_table``, whatever lake table it is asked about
    (a comparison may name the lake's copy otherwise); None: its product or its capture has
    none."""
    if url is None:
        return None
    try:
        check = quiet_log_for(url, password)
    except Exception as exc:  # only saves a wait: without it the validation waits as before
        log.info("the source's log cannot be read between positions (%s)", exc)
        return None
    if check is None:
        return None
    found = check
    return lambda _lake_table, start, end: found(source_table, start, end)


def whole_mark(table: LakeTable, position: int, quiet: QuietLog | None) -> int | None:
    """The lake's high-water mark H of ``table`` when the lake is whole at ``position``
    without reaching it (no change of the table in the log between them); None when it
    must reach ``position`` first (or already has)."""
    mark = high_water_mark(table)
    if quiet is None or mark is None or mark >= position:
        return None
    if table.table in read_marks(table.place).refreshing:
        return None  # a refresh under way: the lake lacks part of the table below H too
    why = _why_not_quiet(quiet, table.table, mark, position)
    if why is not None:
        log.info(
            "lake table %s is behind the source snapshot: %s; a CDC pipeline must run into"
            " the lake to bring it there",
            table.table,
            why,
        )
        return None
    log.info(
        "lake table %s: no change of it in the source's log between the lake's mark and the"
        " source snapshot; compared at the snapshot without a pipeline",
        table.table,
    )
    return mark


def _why_not_quiet(quiet: QuietLog, table: str, start: int, end: int) -> str | None:
    try:
        return quiet(table, start, end)
    except Exception as exc:  # a log it cannot read (privileges, purged): wait as before
        return f"its log could not be read between the two positions ({exc})"
