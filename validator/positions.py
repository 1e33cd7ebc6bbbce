"""The source positions a comparison agrees on, and waiting for the lake to reach them
(and, for a table created at the source while a pipeline runs, for the lake to have it).

Each source partition was read in a snapshot at a log position (one shared position for
products that can share a snapshot). Every key is compared with the target as of the
position of the partition that holds it, so a row written at the source after its
partition's snapshot is not yet expected in the target — no false differences while the
source keeps changing, and no lock on it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from cdc_core.errors import TerminalError, TransientError
from cdc_core.lake.delta_reads import read_delta
from cdc_core.lake.layout import (
    ChangelogMoved,
    LakeTable,
    changelog_files,
    high_water_mark,
    read_marks,
    read_progress,
)
from cdc_core.lake_location import LakeLocation
from connectors.model import POSITION_COLUMN, Partition
from connectors.registry import captures_by_trigger
from validator.quiet_log import whole_mark

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

    from connectors.model import QuietLog

log = logging.getLogger(__name__)

PARTITION_COLUMN = "_partition"


@dataclass(frozen=True, slots=True)
class PartitionPosition:
    """The position partition ``index`` (key range ``[low, high)``) was read at."""

    index: int
    position: int
    low: int | None = None
    high: int | None = None


@dataclass(frozen=True, slots=True)
class SourcePositions:
    """Where each partition of one source read stands in the source's log."""

    column: str | None  # the key column the ranges are on (None: one partition)
    partitions: tuple[PartitionPosition, ...]
    # The source product's spelling of a position (``Connector.describe_position``), so a
    # result says 0/241EEC8 where the pipeline's lines do, never the bare integer.
    spelling: Callable[[int], str] = field(default=str, compare=False)

    @property
    def values(self) -> tuple[int, ...]:
        """Every partition's position."""
        return tuple(p.position for p in self.partitions)

    @property
    def highest(self) -> int:
        """The position the lake must reach before the comparison can start."""
        return max(p.position for p in self.partitions)

    def describe(self) -> str:
        """Text for reports: one position, or the range of the partitions' positions."""
        values = [self.spelling(v) for v in sorted({p.position for p in self.partitions})]
        if len(values) == 1:
            return values[0]
        return f"{values[0]}..{values[-1]} ({len(self.partitions)} partitions)"

    def cutoff(self, key_column: Column) -> Column:
        """Per row of the target, the position it is compared at (by its key's partition)."""
        from pyspark.sql import functions as F

        ordered = sorted(self.partitions, key=lambda p: p.index)
        if self.column is None or len(ordered) == 1:
            return F.lit(ordered[0].position)
        first = F.lit(ordered[0].position)  # NULL keys are read by the partition open below
        expression = F.when(key_column.isNull() | (key_column < F.lit(ordered[0].high)), first)
        for partition in ordered[1:-1]:
            expression = expression.when(key_column < F.lit(partition.high), partition.position)
        # Keys beyond the last range (rows the source does not have) use its position too.
        return expression.otherwise(F.lit(ordered[-1].position))

    def cutoff_sql(self, key_column: str) -> str:
        """``cutoff`` as SQL over the key column's SQL ``key_column`` (DuckDB, PostgreSQL)."""
        ordered = sorted(self.partitions, key=lambda p: p.index)
        if self.column is None or len(ordered) == 1:
            return str(ordered[0].position)
        first = ordered[0]
        whens = [f"WHEN {key_column} IS NULL OR {key_column} < {first.high} THEN {first.position}"]
        whens += [f"WHEN {key_column} < {p.high} THEN {p.position}" for p in ordered[1:-1]]
        return f"CASE {' '.join(whens)} ELSE {ordered[-1].position} END"


def read_positions(
    source: DataFrame, partitions: Sequence[Partition], spelling: Callable[[int], str] = str
) -> SourcePositions | None:
    """The positions the partitions were read at (None when the source has no log), spelled
    by ``spelling`` in reports."""
    from pyspark.sql import functions as F

    rows = (
        source.groupBy(PARTITION_COLUMN)
        .agg(F.min(POSITION_COLUMN).alias("low_pos"), F.max(POSITION_COLUMN).alias("high_pos"))
        .collect()
    )
    found = {row[PARTITION_COLUMN]: row["high_pos"] for row in rows if row["high_pos"] is not None}
    if not found:
        return None
    fallback = max(found.values())  # an empty partition: nothing to place, any position works
    placed = tuple(
        PartitionPosition(p.index, found.get(p.index, fallback), p.low, p.high) for p in partitions
    )
    return SourcePositions(partitions[0].column, placed, spelling)


PROGRESS_EVERY_S = 5.0  # how often a wait for the lake says what it waits for
QUIET_FOR_S = 2.0  # a wait says nothing before this: most end at their first polls


def wait_for_lake(
    high_water_mark: Callable[[], int | None],
    position: int,
    timeout_s: float,
    table: str,
    poll_s: float = 1.0,
    sleep: Callable[[float], None] = time.sleep,
    spelling: Callable[[int], str] = str,
) -> int:
    """Wait until the lake's high-water mark reaches ``position``; its value when it does
    (positions spelled by ``spelling`` in its messages)."""
    return wait_for_position(
        high_water_mark,
        position,
        timeout_s,
        Waited(
            f"lake table {table}",
            "high-water mark",
            "check that the CDC pipeline is running, or raise validation.lake_wait_timeout_s",
            "a CDC pipeline must be running into the lake",
            {"table": table},
            spelling,
        ),
        poll_s,
        sleep,
    )


@dataclass(frozen=True, slots=True)
class Waited:
    """What a wait for a position waits on, for its messages."""

    what: str  # "lake table shop.orders", "target shop_pg (pipeline shop)"
    measure: str  # how far it is: "high-water mark", "applied position"
    fix: str  # what to check when it does not get there
    needs: str  # what must be running meanwhile
    context: dict[str, str]
    spelling: Callable[[int], str] = str  # the source product's spelling of a position

    def spell(self, position: int | None) -> str:
        """``position`` as the source product spells it (``None`` as itself: nothing yet)."""
        return str(position) if position is None else self.spelling(position)


def wait_for_position(
    reached: Callable[[], int | None],
    position: int,
    timeout_s: float,
    waited: Waited,
    poll_s: float = 1.0,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Wait until ``reached()`` is at least ``position``; its value when it is.

    Raises:
        TransientError: Not within ``timeout_s`` (names what, where it is, what it needs).
    """
    deadline = time.monotonic() + timeout_s
    said = time.monotonic() + QUIET_FOR_S - PROGRESS_EVERY_S  # first said after QUIET_FOR_S
    while True:
        now = reached()
        if now is not None and now >= position:
            return now
        if time.monotonic() >= deadline:
            raise TransientError(
                f"{waited.what} is behind: its {waited.measure} is {waited.spell(now)}, the"
                f" source snapshot is at {waited.spell(position)}, after waiting"
                f" {timeout_s:.0f} s; {waited.fix}",
                {**waited.context, "position": waited.spell(position)},
            )
        if time.monotonic() - said >= PROGRESS_EVERY_S:
            said = time.monotonic()
            log.info(
                "waiting for %s to reach the source's position %s (its %s is %s; %s); %.0f s left",
                waited.what,
                waited.spell(position),
                waited.measure,
                waited.spell(now),
                waited.needs,
                deadline - said,
            )
        sleep(min(poll_s, max(0.0, deadline - time.monotonic())))


def wait_for_lake_table(
    table: LakeTable,
    timeout_s: float,
    poll_s: float = 1.0,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Wait until the lake has ``table``'s changelog, when a pipeline writes to the lake.

    A table created at the source while a pipeline runs reaches the lake when the pipeline
    reaches its creation, as its rows do: the validation waits for it as it waits for a lake
    behind its position. A lake no pipeline has written to (no table, no progress) will not
    get it: refused at once.

    Raises:
        TerminalError: No pipeline writes to the lake and the table is not in it.
        TransientError: It did not appear within ``timeout_s``.
    """
    table.location.check_reachable()  # an object store's bucket answers (else exit 2)
    if table.exists():
        return
    if not _written_by_a_pipeline(table.place):
        raise TerminalError(
            f"lake table {table.table} has no changelog at {table.changelog_at} and no CDC"
            " pipeline has written to the lake: check the comparison's target table, or run"
            " the CDC pipeline first",
            {"table": table.table},
        )
    deadline = time.monotonic() + timeout_s
    said = time.monotonic() + QUIET_FOR_S - PROGRESS_EVERY_S  # first said after QUIET_FOR_S
    while not table.exists():
        if time.monotonic() >= deadline:
            raise TransientError(
                f"lake table {table.table} is not in the lake after waiting {timeout_s:.0f} s"
                " although a CDC pipeline writes to it: check that the pipeline's tables"
                " capture it and the comparison's target table names it, or raise"
                " validation.lake_wait_timeout_s",
                {"table": table.table},
            )
        if time.monotonic() - said >= PROGRESS_EVERY_S:
            said = time.monotonic()
            log.info(
                "waiting for lake table %s: the source has it, the lake not yet (the CDC"
                " pipeline creates it when it reaches the table's creation); %.0f s left",
                table.table,
                deadline - said,
            )
        sleep(min(poll_s, max(0.0, deadline - time.monotonic())))


def lake_columns(
    table: LakeTable,
    position: int | None,
    timeout_s: float,
    poll_s: float = 1.0,
    sleep: Callable[[float], None] = time.sleep,
    quiet: QuietLog | None = None,
) -> pa.Schema:
    """The lake table's columns once the lake has reached ``position`` (the source's when
    its columns were read: every DDL they show has reached the lake, or the source's log
    ``quiet`` shows none of the table since the lake's mark), read again when a reload moves
    the changelog aside under the read.

    Raises:
        TerminalError: No pipeline writes to the lake and the table is not in it, or its
            changelog cannot be read.
        TransientError: The lake did not get there within ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        left = max(0.0, deadline - time.monotonic())
        wait_for_lake_table(table, left, poll_s, sleep)
        if position is not None and whole_mark(table, position, quiet) is None:
            wait_for_lake(
                lambda: high_water_mark(table), position, left, table.table, poll_s, sleep
            )
        try:
            return read_schema(table, changelog_files(table)[1])
        except ChangelogMoved:
            if time.monotonic() >= deadline:
                raise
            log.info("lake table %s is being loaded again; reading its columns again", table.table)
            sleep(poll_s)


def read_schema(table: LakeTable, changelog: pa.Schema) -> pa.Schema:
    """The columns users read: the mirror's (a table without a key has only its changelog,
    ``changelog``). A column the changelog has and the mirror lacks is a column the lake
    does not carry, so it must not be taken from the changelog."""
    import pyarrow as pa

    if not table.mirror_at.join("_delta_log").is_dir():
        return changelog
    return pa.schema(read_delta(table.mirror_at).schema().to_arrow())


def _written_by_a_pipeline(lake: Path | LakeLocation) -> bool:
    """Whether a pipeline has written to ``lake``: its progress, or a table of its initial
    load (a pipeline records progress with its first batch after the load)."""
    if isinstance(lake, LakeLocation):  # an object store: anything under the lake's prefix
        return bool(read_progress(lake)) or lake.is_dir()
    return bool(read_progress(lake)) or (lake.is_dir() and any(lake.iterdir()))


@dataclass(frozen=True, slots=True)
class LakeAt:
    """Where a lake table is read: at ``at`` (each key at its partition's position; a bare
    position; None: everything the lake has), described for reports by ``text``."""

    at: int | SourcePositions | None
    text: str | None
    whole_from: int | None = None  # the lake's mark when whole at ``at`` below it (quiet log)


def read_at_own_mark(source_url: str) -> bool:
    """Whether a lake fed from ``source_url`` is read at its own high-water mark, not at the
    source's positions: a lake fed by trigger capture records capture positions, which the
    source's log positions do not order."""
    return captures_by_trigger(source_url)


def lake_at(
    table: LakeTable,
    positions: SourcePositions | None,
    timeout_s: float,
    quiet: QuietLog | None = None,
) -> LakeAt:
    """Where to read ``table``: at the source's ``positions`` once the lake has reached them
    (waiting up to ``timeout_s``, unless the source's log ``quiet`` shows no change of the
    table since the lake's mark: ``validator.quiet_log``; then checking they are exact), or,
    for a source without a log (None), at the lake's high-water mark."""
    if positions is None:
        mark = high_water_mark(table)
        return LakeAt(mark, None if mark is None else str(mark))
    whole_from = whole_mark(table, positions.highest, quiet)
    if whole_from is None:
        reached, highest = (lambda: high_water_mark(table)), positions.highest
        wait_for_lake(reached, highest, timeout_s, table.table, spelling=positions.spelling)
    check_exact(table, positions.values)
    return LakeAt(positions, positions.describe(), whole_from)


def confirm_exact(table: LakeTable, at: LakeAt) -> None:
    """Check again, once the files holding ``table``'s state at ``at`` are listed, that the
    lake is still exact there. A reload after a DDL later than the source snapshot marks
    the table before it writes the table's new generation (``PipelineSink.write``), so
    files listed from that generation, which lacks the older states, fail this check.

    Raises:
        TransientError: The table began to be loaded again (the message says to validate
            again).
    """
    if not isinstance(at.at, SourcePositions):
        return  # read at the lake's own mark: whatever it lists is its state
    mark = high_water_mark(table)
    whole_from = at.at.highest if at.whole_from is None else at.whole_from
    if mark is None or mark < whole_from:
        raise TransientError(
            f"lake table {table.table} began to be loaded again from the source (after a"
            f" DDL) while it was read at {at.text}; validate again",
            {"table": table.table},
        )
    check_exact(table, at.at.values)


class InexactStateError(TransientError):
    """A source position lies in a window a table refresh left inexact; from ``end`` on the
    lake is exact again."""

    def __init__(self, message: str, context: dict[str, object], end: int) -> None:
        super().__init__(message, context)
        self.end = end


def check_exact(table: LakeTable, positions: Sequence[int]) -> None:
    """Refuse positions at which a table refresh left the lake's state of ``table`` inexact
    (between a DDL that rewrote rows, or a table's addition, and the refresh's last chunk:
    ``cdc_core.ddl.table_refresh``); every other position is exact.

    Raises:
        InexactStateError: A position lies in such a window (the message names it and says
            to validate again: a new source snapshot lies after the window).
    """
    marks = read_marks(table.place)
    for position in positions:
        window = marks.window_at(table.table, position)
        if window is not None:
            start, end = window
            raise InexactStateError(
                f"lake table {table.table} was refreshed from the source after a DDL, its"
                f" addition or a re-sync: its state at the source snapshot's position"
                f" {position} (between {start} and {end}) is not exact; validate again (from"
                f" {end} on it is)",
                {"table": table.table, "position": position},
                end,
            )
