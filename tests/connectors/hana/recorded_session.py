"""A recorded hdbcli session: a connection double answering each statement with the rows
recorded for it, and failing on anything the recording does not hold.

Recording format (one JSON object, UTF-8)::

    {"description": "...", "exchanges": [
        {"sql": "SELECT ...", "params": [10, "SHOP"], "rows": [[1, {"decimal": "1.50"}]]},
        {"sql": "DELETE ...", "params": [...], "rowcount": 3},
        {"call": "setautocommit", "args": [false]},
        {"call": "commit"}, {"call": "rollback"}, ...]}

``sql`` and ``params`` are what the code sends (exactly; ``params`` may be left out for a
statement without any), ``rows`` what the server answered (default none), ``rowcount`` the
count of a DML statement. ``call`` records a connection method (``setautocommit``,
``commit``, ``rollback``). Values other than JSON's own are tagged: ``{"decimal": "1.50"}``,
``{"timestamp": "2024-02-29T10:00:00.123456"}`` (naive, as hdbcli returns them),
``{"date": "2024-02-29"}``, ``{"time": "23:59:59"}``, ``{"bytes": "00ff"}``.

Replay: each exchange is answered once. A statement is answered by the first unanswered
exchange with the same SQL and parameters, so the same statement asked again gets the next
answer recorded for it (a sequence read at each poll), while statements on separate
connections (catalog reads between a session's queries) need not interleave exactly as
recorded. Connection calls are counted alike: each recorded call is answered once. A
statement or call the recording does not hold fails the test, naming it and the next
unanswered exchange; ``unanswered()`` lists what the code never asked.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from connectors.hana.connector import HanaConnector

_TAGS: dict[str, Callable[[str], Any]] = {
    "decimal": Decimal,
    "timestamp": dt.datetime.fromisoformat,
    "date": dt.date.fromisoformat,
    "time": dt.time.fromisoformat,
    "bytes": bytes.fromhex,
}


class RecordedError(Exception):
    """What a recorded statement raised (``{"sql": ..., "error": "text"}``)."""


class UnrecordedStatement(AssertionError):
    """The code sent a statement or call that the recording does not hold."""


def from_json(value: Any) -> Any:
    """A recorded value as hdbcli returns it."""
    if isinstance(value, dict):
        ((tag, text),) = value.items()
        return _TAGS[tag](text)
    if isinstance(value, list):
        return [from_json(item) for item in value]
    return value


class Recording:
    """The exchanges of one recording file (or given, named ``path``), answered once each."""

    def __init__(self, path: Path, exchanges: Sequence[dict[str, Any]] | None = None) -> None:
        if exchanges is None:
            exchanges = json.loads(path.read_text(encoding="utf-8"))["exchanges"]
        self.path = path
        self.exchanges: list[dict[str, Any]] = list(exchanges)
        self.answered = [False] * len(self.exchanges)

    def answer(self, sql: str, params: Sequence[Any]) -> dict[str, Any]:
        """The first unanswered exchange of ``sql`` with ``params``."""
        wanted = [from_json(p) for p in params]
        for index, exchange in enumerate(self.exchanges):
            if self.answered[index] or exchange.get("sql") != sql:
                continue
            if from_json(exchange.get("params", [])) == wanted:
                self.answered[index] = True
                return exchange
        raise UnrecordedStatement(
            f"{self.path.name} holds no unanswered {sql!r} with parameters {wanted!r};"
            f" next unanswered: {self._next()!r}"
        )

    def call(self, name: str, args: Sequence[Any]) -> None:
        """Answer connection method ``name`` with the first unanswered such call."""
        for index, exchange in enumerate(self.exchanges):
            if self.answered[index] or exchange.get("call") != name:
                continue
            if exchange.get("args", []) == list(args):
                self.answered[index] = True
                return
        raise UnrecordedStatement(
            f"{self.path.name}: the code called {name}{tuple(args)} once more than recorded"
        )

    def unanswered(self) -> list[dict[str, Any]]:
        """The exchanges the code never asked for."""
        return [e for e, done in zip(self.exchanges, self.answered, strict=True) if not done]

    def _next(self) -> dict[str, Any] | None:
        for exchange in self.unanswered():
            if "sql" in exchange:
                return exchange
        return None


class RecordedCursor:
    """A cursor of a recorded connection (hdbcli's methods the capture uses)."""

    def __init__(self, recording: Recording) -> None:
        self.recording = recording
        self.rows: list[tuple[Any, ...]] = []
        self.rowcount = -1

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> None:
        exchange = self.recording.answer(sql, list(params or []))
        if "error" in exchange:
            raise RecordedError(exchange["error"])
        self.rows = [tuple(from_json(row)) for row in exchange.get("rows", [])]
        self.rowcount = int(exchange.get("rowcount", len(self.rows)))

    def fetchone(self) -> tuple[Any, ...] | None:
        return self.rows.pop(0) if self.rows else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        rows, self.rows = self.rows, []
        return rows

    def fetchmany(self, size: int) -> list[tuple[Any, ...]]:
        rows, self.rows = self.rows[:size], self.rows[size:]
        return rows

    def close(self) -> None:
        """Nothing to release."""


class RecordedConnection:
    """An hdbcli connection answered from a recording."""

    def __init__(self, recording: Recording) -> None:
        self.recording = recording

    def cursor(self) -> RecordedCursor:
        return RecordedCursor(self.recording)

    def setautocommit(self, on: bool) -> None:
        self.recording.call("setautocommit", [on])

    def commit(self) -> None:
        self.recording.call("commit", [])

    def rollback(self) -> None:
        self.recording.call("rollback", [])

    def close(self) -> None:
        """Connections close after each use; the recording stays."""


class RecordedHanaConnector(HanaConnector):
    """The HANA connector of a URL whose connections are answered from ``recording``."""

    def __init__(self, url: str, recording: Recording) -> None:
        super().__init__(url, None)
        self.recording = recording

    def connect(self) -> RecordedConnection:
        return RecordedConnection(self.recording)

    def driver_error(self) -> type[Exception]:
        return RecordedError
