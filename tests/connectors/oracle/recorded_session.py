"""A recorded python-oracledb session: a connection stand-in that answers each statement
with the rows recorded for it, in order, and keeps what was sent, so tests can compare the
statements and binds with the exact expected ones."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any


@dataclass(frozen=True)
class Exchange:
    """One statement the code under test sends and the rows the server returned."""

    statement: str
    binds: dict[str, object] = field(default_factory=dict)
    rows: Sequence[tuple[Any, ...]] = ()


class RecordedSession:
    """Answers from ``exchanges`` in order; ``sent`` holds (statement, binds) as sent."""

    def __init__(self, exchanges: Sequence[Exchange]) -> None:
        self.recorded = tuple(exchanges)
        self.exchanges = list(exchanges)
        self.sent: list[tuple[str, dict[str, object]]] = []

    def cursor(self) -> RecordedCursor:
        return RecordedCursor(self)

    def expected(self) -> list[tuple[str, dict[str, object]]]:
        """What the recording says must be sent (compare with ``sent`` once done)."""
        return [(exchange.statement, exchange.binds) for exchange in self.recorded]

    def close(self) -> None:
        """Readers close their connection after each read; the recording stays."""


class RecordedCursor:
    """A cursor of a ``RecordedSession``."""

    def __init__(self, session: RecordedSession) -> None:
        self.session = session
        self.arraysize = 100
        self.rows: list[tuple[Any, ...]] = []

    def __enter__(self) -> RecordedCursor:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None

    def execute(
        self, statement: str, binds: dict[str, object] | None = None, **named: object
    ) -> None:
        self.session.sent.append((statement, dict(binds or {}) | named))
        exchange = self.session.exchanges.pop(0) if self.session.exchanges else Exchange("")
        self.rows = list(exchange.rows)

    def fetchone(self) -> tuple[Any, ...] | None:
        return self.rows.pop(0) if self.rows else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        rows, self.rows = self.rows, []
        return rows

    def fetchmany(self, size: int | None = None) -> list[tuple[Any, ...]]:
        count = size or self.arraysize
        rows, self.rows = self.rows[:count], self.rows[count:]
        return rows
