"""What a running pipeline reports about itself: throughput, lag and what it holds open."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

from cdc_core.buffer import TransactionBuffer
from cdc_core.events import CommittedTransaction
from cdc_core.position import Position


@dataclass(frozen=True, slots=True)
class PipelineMetrics:
    """A pipeline's figures at one moment.

    Args:
        position: The position the lake has reached (``None`` before the first batch).
        transactions: Committed transactions written since the pipeline started.
        events: Row events written since the pipeline started.
        events_per_second: Events written per second, averaged since the start.
        lag_seconds: Now minus the commit time of the newest transaction in the lake.
        open_transactions: Transactions begun and not yet committed or rolled back.
        oldest_open: The oldest open transaction's id, begin position and change count.
        oldest_open_age_seconds: How long the oldest open transaction has been open.
        buffered_bytes: Estimated bytes of open transactions held in memory.
        spilled_bytes: Bytes of open transactions spilled to disk.
    """

    position: Position | None
    transactions: int
    events: int
    events_per_second: float
    lag_seconds: float | None
    open_transactions: int
    oldest_open: tuple[str, Position, int] | None
    oldest_open_age_seconds: float | None
    buffered_bytes: int
    spilled_bytes: int
    load: LoadFigures | None = None


@dataclass(frozen=True, slots=True)
class LoadFigures:
    """How far an initial load (or a table's load) is.

    Args:
        table: The table being read.
        table_number: Its number among the tables of the load (1-based).
        tables: How many tables the load reads.
        rows: Rows of ``table`` written so far.
        rows_per_second: Their rate since the table's load started.
        estimated_rows: The source's estimate of the table's rows (statistics; None: unknown).
    """

    table: str
    table_number: int
    tables: int
    rows: int
    rows_per_second: float
    estimated_rows: int | None

    @property
    def seconds_left(self) -> float | None:
        """An estimate of the table's remaining time (None: no estimate or no rate yet)."""
        if self.estimated_rows is None or self.rows_per_second <= 0:
            return None
        return max(self.estimated_rows - self.rows, 0) / self.rows_per_second


class MetricsTracker:
    """Accumulates the pipeline's figures as it goes (private to the pipeline)."""

    def __init__(self) -> None:
        self._started = time.monotonic()
        self._transactions = 0
        self._events = 0
        self._newest_commit: datetime | None = None
        self._position: Position | None = None
        self._open = 0
        self._oldest: tuple[str, Position, int] | None = None
        self._oldest_age: float | None = None
        self._buffered = 0
        self._spilled = 0
        self._load: tuple[str, int, int, float, int | None] | None = None
        self._load_rows = 0

    def committed(self, transaction: CommittedTransaction, events: int) -> None:
        """Count a transaction handed to the sink."""
        self._transactions += 1
        self._events += events
        self._newest_commit = transaction.commit_ts

    def flushed(self, written: int, position: Position, buffer: TransactionBuffer) -> None:
        """Record a durable batch and what the buffer holds after it."""
        self._position = position
        open_transactions = buffer.open_transactions()
        self._open = len(open_transactions)
        oldest = open_transactions[0] if open_transactions else None
        self._oldest_age = oldest.age.total_seconds() if oldest else None
        self._oldest = (oldest.txid, oldest.begin_pos, oldest.change_count) if oldest else None
        self._buffered = buffer.memory_bytes
        self._spilled = sum(info.spilled_bytes for info in open_transactions)

    def loading(self, table: str, number: int, tables: int, estimated_rows: int | None) -> None:
        """An initial load starts reading ``table`` (its ``number`` of ``tables``)."""
        self._load = (table, number, tables, time.monotonic(), estimated_rows)
        self._load_rows = 0

    def loaded_rows(self, rows: int) -> None:
        """Rows of the table being loaded are in the lake."""
        self._load_rows += rows

    def load_finished(self, position: Position) -> None:
        """The load ended: the lake holds the tables as of ``position``."""
        self._load = None
        self._position = self._position or position

    def _load_figures(self) -> LoadFigures | None:
        if self._load is None:
            return None
        table, number, tables, started, estimate = self._load
        rate = self._load_rows / max(time.monotonic() - started, 1e-9)
        return LoadFigures(table, number, tables, self._load_rows, rate, estimate)

    def snapshot(self) -> PipelineMetrics:
        """The figures as of now."""
        elapsed = max(time.monotonic() - self._started, 1e-9)
        lag = None
        if self._newest_commit is not None:
            lag = (datetime.now(UTC) - self._newest_commit).total_seconds()
        return PipelineMetrics(
            self._position,
            self._transactions,
            self._events,
            self._events / elapsed,
            lag,
            self._open,
            self._oldest,
            self._oldest_age,
            self._buffered,
            self._spilled,
            self._load_figures(),
        )
