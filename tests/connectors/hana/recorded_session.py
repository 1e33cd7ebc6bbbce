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

Recording: ``RecordingHanaConnector`` wraps the connections of a live server and keeps every
statement, answer and call in that format; ``save`` writes them (the live capture tests do
so when REPLCHECK_HANA_RECORD names a directory).

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


def to_json(value: Any) -> Any:
    """A value hdbcli returned, as a recording holds it (the inverse of ``from_json``)."""
    if isinstance(value, Decimal):
        return {"decimal": str(value)}
    if isinstance(value, dt.datetime):
        return {"timestamp": value.isoformat()}
    if isinstance(value, dt.date):
        return {"date": value.isoformat()}
    if isinstance(value, dt.time):
        return {"time": value.isoformat()}
    if isinstance(value, bytes | bytearray | memoryview):
        return {"bytes": bytes(value).hex()}
    if isinstance(value, list | tuple):
        return [to_json(item) for item in value]
    return value


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


class _HeldRows:
    """The DB-API fetches of a cursor holding its result's rows (replayed or recorded)."""

    rows: list[tuple[Any, ...]]

    def fetchone(self) -> tuple[Any, ...] | None:
        return self.rows.pop(0) if self.rows else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        rows, self.rows = self.rows, []
        return rows

    def fetchmany(self, size: int) -> list[tuple[Any, ...]]:
        rows, self.rows = self.rows[:size], self.rows[size:]
        return rows


class RecordedCursor(_HeldRows):
    """A cursor of a recorded connection (hdbcli's methods the capture uses)."""

    def __init__(self, recording: Recording) -> None:
        self.recording = recording
        self.rows: list[tuple[Any, ...]] = []
        self.rowcount = -1
        self.description: list[tuple[str]] | None = None

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> None:
        exchange = self.recording.answer(sql, list(params or []))
        if "error" in exchange:
            raise RecordedError(exchange["error"])
        self.rows = [tuple(from_json(row)) for row in exchange.get("rows", [])]
        # DB-API: -1 where no count applies; a description only for a result set.
        self.rowcount = int(exchange.get("rowcount", len(self.rows) if self.rows else -1))
        self.description = [("recorded",)] if sql.lstrip().upper().startswith("SELECT") else None

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


class RecordingCursor(_HeldRows):
    """A cursor that runs on a real one and records each statement with its answer."""

    def __init__(self, cursor: Any, exchanges: list[dict[str, Any]]) -> None:
        self.cursor = cursor
        self.exchanges = exchanges
        self.rows: list[tuple[Any, ...]] = []

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> None:
        exchange: dict[str, Any] = {"sql": sql}
        if params:
            exchange["params"] = to_json(list(params))
        self.exchanges.append(exchange)
        if params:
            self.cursor.execute(sql, params)
        else:
            self.cursor.execute(sql)
        # DB-API: a statement without a result set has no description (fetching would fail).
        self.rows = (
            [tuple(row) for row in self.cursor.fetchall()] if self.cursor.description else []
        )
        if self.rows:
            exchange["rows"] = [to_json(list(row)) for row in self.rows]
        if not sql.lstrip().upper().startswith("SELECT") and self.cursor.rowcount >= 0:
            exchange["rowcount"] = self.cursor.rowcount

    @property
    def rowcount(self) -> int:
        return int(self.cursor.rowcount)

    def close(self) -> None:
        self.cursor.close()


class RecordingConnection:
    """A connection that runs on a real one and records its calls."""

    def __init__(self, connection: Any, exchanges: list[dict[str, Any]]) -> None:
        self.connection = connection
        self.exchanges = exchanges

    def cursor(self) -> RecordingCursor:
        return RecordingCursor(self.connection.cursor(), self.exchanges)

    def _call(self, name: str, *args: Any) -> None:
        self.exchanges.append({"call": name, "args": list(args)} if args else {"call": name})
        getattr(self.connection, name)(*args)

    def setautocommit(self, on: bool) -> None:
        self._call("setautocommit", on)

    def commit(self) -> None:
        self._call("commit")

    def rollback(self) -> None:
        self._call("rollback")

    def close(self) -> None:
        self.connection.close()


class RecordingHanaConnector(HanaConnector):
    """A connector whose connections record into ``exchanges`` (``inner`` opens them)."""

    def __init__(self, inner: HanaConnector, exchanges: list[dict[str, Any]]) -> None:
        super().__init__(inner.url, inner.password)
        self.inner = inner
        self.exchanges = exchanges

    def connect(self) -> RecordingConnection:
        return RecordingConnection(self.inner.connect(), self.exchanges)

    def driver_error(self) -> type[Exception]:
        return self.inner.driver_error()


def save(path: Path, description: str, exchanges: Sequence[dict[str, Any]]) -> None:
    """Write a recording file."""
    document = {"description": description, "exchanges": list(exchanges)}
    path.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
