"""What a running pipeline reports about itself: throughput, lag and what it holds open.

Lag is how far the target is from the source's log end, in time: 0 once the reader has
caught up with the log (an ``Idle``, or the end ``run_until`` was given), else the age of
the newest commit written while the log holds more. It does not grow while the pipeline is
caught up and the source is quiet. The events/s figure is the rate over the last
``RATE_WINDOW_S`` seconds, so it falls to 0 when the source goes quiet.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from cdc_core.buffer.transaction_buffer import TransactionBuffer
from cdc_core.capture.events import CommittedTransaction
from cdc_core.capture.position import Position


@dataclass(frozen=True, slots=True)
class PipelineMetrics:
    """A pipeline's figures at one moment.

    Args:
        position: The position the lake has reached (``None`` before the first batch).
        transactions: Committed transactions written since the pipeline started.
        events: Row events written since the pipeline started.
        events_per_second: Events written per second over the last ``RATE_WINDOW_S``.
        lag_seconds: 0 when caught up with the source's log end; else now minus the commit
            time of the newest transaction written (None: nothing written, not caught up).
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


RATE_WINDOW_S = 30.0  # the events/s figure is the rate over this many recent seconds


class MetricsTracker:
    """Accumulates the pipeline's figures as it goes (private to the pipeline).

    Args:
        clock: Monotonic seconds (tests pass their own).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._started = clock()
        self._transactions = 0
        self._events = 0
        self._recent: deque[tuple[float, int]] = deque()  # (when, events) within the window
        self._recent_lock = threading.Lock()  # the progress thread reads what the loop adds
        self._newest_commit: datetime | None = None
        self._caught_up = False
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
        with self._recent_lock:
            self._recent.append((self._clock(), events))
            self._forget_old()
        self._newest_commit = transaction.commit_ts
        self._caught_up = False  # the log held more than the last known end

    def caught_up(self) -> None:
        """The reader has reached the source's log end (an idle log, or ``run_until``'s end)
        and everything read is written: the lag is 0 until the next commit."""
        self._caught_up = True

    @property
    def newest_commit(self) -> datetime | None:
        """When the source committed the newest transaction handed to the sink."""
        return self._newest_commit

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

    def _rate(self) -> float:
        """Events per second over the last ``RATE_WINDOW_S`` (less just after the start)."""
        with self._recent_lock:
            self._forget_old()
            events = sum(count for _, count in self._recent)
        span = max(min(self._clock() - self._started, RATE_WINDOW_S), 1e-9)
        return events / span

    def _forget_old(self) -> None:
        """Drop what fell out of the window (memory stays bounded by the window's commits)."""
        horizon = self._clock() - RATE_WINDOW_S
        while self._recent and self._recent[0][0] < horizon:
            self._recent.popleft()

    def _lag(self) -> float | None:
        if self._caught_up:
            return 0.0
        if self._newest_commit is None:
            return None
        return max((datetime.now(UTC) - self._newest_commit).total_seconds(), 0.0)

    def snapshot(self) -> PipelineMetrics:
        """The figures as of now."""
        return PipelineMetrics(
            self._position,
            self._transactions,
            self._events,
            self._rate(),
            self._lag(),
            self._open,
            self._oldest,
            self._oldest_age,
            self._buffered,
            self._spilled,
            self._load_figures(),
        )
