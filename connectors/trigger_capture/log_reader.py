"""The trigger capture reader: logging rows as the core's raw changes, in commit order.

Each poll is one consistent read (``TriggerDialect.read_session``). It asks which capture
positions above the frontier are committed and which transactions still run, advances the
frontier over them (``gaps.GapTracker``: a position that is not visible yet waits until
every transaction that could still commit it has finished), and yields every transaction
at or below the new frontier whole, in position order: ``Begin``, its ``RowChange``s and
``Commit``, all at the transaction's position (its ``commit_pos``). Then ``Idle`` at the
frontier: every transaction at or below it has been yielded. A rolled-back transaction's
rows never become visible, so nothing of it is ever yielded; an open transaction costs
nothing here until it commits.

Restart: ``iter_changes(start)`` yields the transactions above ``start``; the open gaps
above it are found again at the first poll, owned by whatever runs then (a superset of their
real owners, so no late commit is skipped). Purge: after each checkpoint the pipeline
acknowledges the lake's durable position (``AcknowledgesPositions``); the reader deletes
logging rows at or below it, in batches, at most every ``purge_every_s``, and logs what is
left (the purge lag).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from cdc_core.capture.events import Begin, Commit, RawChange, RowChange
from cdc_core.capture.position import Position
from cdc_core.capture.source import Idle, TableDescription
from cdc_core.errors import ConfigError
from connectors.trigger_capture.dialect import CaptureRow, TriggerDialect
from connectors.trigger_capture.gaps import GapTracker
from connectors.trigger_capture.position import capture_position

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TriggerReaderConfig:
    """How the reader polls and purges.

    Args:
        tables: The captured tables (their names in the pipeline).
        poll_s: The pause between polls while nothing new is committed, in seconds.
        purge_every_s: The least time between two purges, in seconds.
        purge_batch_rows: Logging rows deleted per purge statement.
    """

    tables: tuple[str, ...]
    poll_s: float = 0.2
    purge_every_s: float = 5.0
    purge_batch_rows: int = 10_000

    def __post_init__(self) -> None:
        if not self.tables:
            raise ConfigError("trigger capture needs at least one table")
        if self.poll_s <= 0 or self.purge_every_s < 0 or self.purge_batch_rows <= 0:
            raise ConfigError("poll_s and purge_batch_rows must be positive")


class TriggerLogReader:
    """A ``LogReader`` (and ``AcknowledgesPositions``) over a product's logging tables.

    Args:
        dialect: The product's trigger capture.
        config: Polling and purging.
    """

    def __init__(self, dialect: TriggerDialect, config: TriggerReaderConfig) -> None:
        self.dialect = dialect
        self.config = config
        self._purged_at = 0.0
        self._keys: dict[str, tuple[str, ...]] = {}

    def describe(self, table: str) -> TableDescription:
        """The table's columns and key (see ``TriggerDialect.describe``)."""
        return self.dialect.describe(table)

    def end_position(self) -> Position:
        """The capture sequence's current value."""
        return capture_position(self.dialect.end_position())

    def iter_changes(self, start: Position | None) -> Iterator[RawChange | Idle]:
        """The committed transactions above ``start`` (``None``: above the current end), in
        position order, and ``Idle`` at the frontier after each poll."""
        self.dialect.check_installed(self.config.tables)
        tracker = GapTracker(start.value if start is not None else self.dialect.end_position())
        while True:
            before = tracker.frontier
            rows = self._poll(tracker)
            for _, group in itertools.groupby(rows, key=lambda row: (row.position, row.txid)):
                yield from self._transaction(list(group))
            yield Idle(capture_position(tracker.frontier))
            if tracker.frontier == before:
                time.sleep(self.config.poll_s)

    def _poll(self, tracker: GapTracker) -> list[CaptureRow]:
        """One consistent read: the rows of the transactions the frontier passed. They are
        held in memory so that no read stays open while the pipeline writes."""
        with self.dialect.read_session() as session:
            previous = tracker.frontier
            visible = session.visible_commits(previous)
            frontier = tracker.advance(visible.positions, visible.running, visible.taken)
            if tracker.open_gaps:
                logger.debug("capture gaps open above %s: %s", frontier, sorted(tracker.open_gaps))
            if frontier == previous:
                return []
            return list(session.iter_rows(previous, frontier))

    def acknowledge(self, position: Position) -> None:
        """The lake holds everything up to ``position`` durably: purge behind it."""
        if time.monotonic() - self._purged_at < self.config.purge_every_s:
            return
        self._purged_at = time.monotonic()
        purged = 0
        while deleted := self.dialect.purge(position.value, self.config.purge_batch_rows):
            purged += deleted
        logger.info(
            "trigger capture: purged %s rows at or below %s; %s logging rows wait to be purged"
            " or read (capture at %s)",
            purged,
            position,
            self.dialect.backlog(),
            self.dialect.end_position(),
        )

    def close(self) -> None:
        """Release the dialect's connections."""
        self.dialect.close()

    def _transaction(self, rows: Sequence[CaptureRow]) -> Iterator[RawChange]:
        """One committed transaction as raw changes, all at its position."""
        first = rows[0]
        position = capture_position(first.position)
        yield Begin(first.txid, position)
        for row in rows:
            yield self._row_change(row, position)
        yield Commit(first.txid, position, max(row.written_at for row in rows))

    def _row_change(self, row: CaptureRow, position: Position) -> RowChange:
        if row.op == "t":
            return RowChange(row.txid, position, "t", row.table, None)
        image = dict(row.row)
        key = self._keys.get(row.table)
        if key is None:
            key = self._keys[row.table] = self.dialect.describe(row.table).key
        locator = tuple(image[column] for column in key)
        if row.op == "d":
            return RowChange(row.txid, position, "d", row.table, locator, before=image)
        return RowChange(row.txid, position, row.op, row.table, locator, after=image)
