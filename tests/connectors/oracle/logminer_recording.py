"""A recorded LogMiner session: a python-oracledb connection double that answers each
statement the reader sends with the answer recorded for it, in the recorded order, and
fails on any statement, bind or call the recording does not hold next.

Recording format (one JSON object, UTF-8)::

    {"origin": "hand-written" | "captured", "description": "...", "exchanges": [
        {"sql": "CURRENT_SCN", "rows": [[1004]]},
        {"sql": "ADD_FIRST_LOGFILE", "binds": {"name": "/u01/arch/1_11.arc"}},
        {"sql": "CONTENTS(1)", "binds": {...}, "rows": [{"SCN": 1001, "XID": "0A00..."}]},
        {"sql": "CONTENTS(1)", "binds": {...}, "rows": [...],
         "error": {"code": 310, "message": "..."}, "after_rows": true},
        {"call": "commit"}]}

``origin`` is required: ``hand-written`` (rows composed from the Oracle documentation, never
seen on a server) or ``captured`` (written by ``RecordingConnection`` from a live session).
``sql`` names the statement: a constant of ``connectors.oracle.logminer.sql``
(``CURRENT_SCN``), ``CONTENTS(n)`` / ``ARCHIVED_LOGS(n)`` / ``INDEX_ORGANIZED(n)`` for the
built ones, ``FLUSH_CREATE`` / ``FLUSH_SEED`` / ``FLUSH_UPDATE`` for the default flush
table; a statement with no name is recorded as ``{"text": "..."}``. ``binds`` are exact.
``rows`` of the V$LOGMNR_CONTENTS query are objects keyed by ``CONTENTS_COLUMNS`` (a missing
key is NULL; ``TIMESTAMP`` as ``YYYY-MM-DD HH24:MI:SS``, ``XID`` as hex), other rows lists.
``error`` raises ``oracledb.DatabaseError`` with that ORA- code, at ``execute`` or, with
``after_rows``, on the fetch after the rows (an error in the middle of a read).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from connectors.oracle.logminer import sql as lm
from connectors.oracle.logminer.contents import CONTENTS_COLUMNS

ORIGINS = ("hand-written", "captured")


def _names() -> dict[str, str]:
    names = {
        value: name
        for name, value in vars(lm).items()
        if name.isupper() and not name.startswith("_") and isinstance(value, str)
    }
    for count in range(1, 9):
        names[lm.contents_query(count)] = f"CONTENTS({count})"
        names[lm.archived_logs_query(count)] = f"ARCHIVED_LOGS({count})"
        names[lm.INDEX_ORGANIZED.format(pairs=lm.table_pairs(count))] = f"INDEX_ORGANIZED({count})"
    create, seed, update = lm.flush_statements("REPLCHECK_LOGMNR_FLUSH")
    names |= {create: "FLUSH_CREATE", seed: "FLUSH_SEED", update: "FLUSH_UPDATE"}
    return names


NAMES = _names()
"""Statement text -> its name in a recording."""


class UnrecordedStatement(AssertionError):
    """The reader sent a statement, binds or call that the recording does not hold next."""


def to_json(value: Any) -> Any:
    """A value the driver returned, as a recording holds it."""
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, bytes):
        return value.hex().upper()
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else str(value)
    return value


class Recording:
    """The exchanges of one recording, answered once each, in order."""

    def __init__(self, path: Path, document: dict[str, Any] | None = None) -> None:
        document = document or json.loads(path.read_text(encoding="utf-8"))
        if document.get("origin") not in ORIGINS:
            raise ValueError(f"{path.name}: 'origin' must be one of {ORIGINS}")
        self.path = path
        self.origin: str = document["origin"]
        self.exchanges: list[dict[str, Any]] = list(document["exchanges"])
        self.next = 0

    def answer(self, statement: str, binds: dict[str, object]) -> dict[str, Any]:
        """The next exchange, which must be ``statement`` with ``binds``."""
        sent = {"sql": NAMES[statement]} if statement in NAMES else {"text": statement}
        expected = self._take(f"{sent} with binds {binds}")
        recorded = {key: expected[key] for key in ("sql", "text") if key in expected}
        if recorded != sent or expected.get("binds", {}) != binds:
            raise UnrecordedStatement(
                f"{self.path.name} exchange {self.next}: the reader sent {sent} with binds"
                f" {binds}; the recording holds {expected}"
            )
        return expected

    def call(self, name: str) -> None:
        """A connection method, which must be the next exchange."""
        expected = self._take(f"call {name}")
        if expected.get("call") != name:
            raise UnrecordedStatement(
                f"{self.path.name} exchange {self.next}: the reader called {name}; the"
                f" recording holds {expected}"
            )

    def unanswered(self) -> list[dict[str, Any]]:
        """The exchanges the reader never asked for."""
        return self.exchanges[self.next :]

    def _take(self, what: str) -> dict[str, Any]:
        if self.next >= len(self.exchanges):
            raise UnrecordedStatement(f"{self.path.name} ends; the reader sent {what}")
        self.next += 1
        return self.exchanges[self.next - 1]


def _error(recorded: dict[str, Any]) -> Exception:
    import oracledb

    return oracledb.DatabaseError(SimpleNamespace(**recorded))


class RecordedCursor:
    """A cursor answered from a ``Recording``."""

    def __init__(self, recording: Recording) -> None:
        self.recording = recording
        self.arraysize = 100
        self.rows: list[tuple[Any, ...]] = []
        self.error: dict[str, Any] | None = None
        self.description: list[tuple[str]] | None = None

    def __enter__(self) -> RecordedCursor:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def close(self) -> None:
        return None

    def execute(self, statement: str, binds: dict[str, object] | None = None, **named: Any) -> None:
        exchange = self.recording.answer(statement, dict(binds or {}) | named)
        self.error = exchange.get("error")
        if self.error is not None and not exchange.get("after_rows"):
            raise _error(self.error)
        self.rows = [_row(row) for row in exchange.get("rows", [])]
        # A statement with rows has a result's description (python-oracledb: None without).
        self.description = [("ROW",)] if "rows" in exchange else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self.fetchmany(len(self.rows) + 1)

    def fetchone(self) -> tuple[Any, ...] | None:
        rows = self.fetchmany(1)
        return rows[0] if rows else None

    def fetchmany(self, size: int | None = None) -> list[tuple[Any, ...]]:
        count = size or self.arraysize
        if not self.rows and self.error is not None:
            raise _error(self.error)
        rows, self.rows = self.rows[:count], self.rows[count:]
        return rows


def _row(row: Sequence[Any] | dict[str, Any]) -> tuple[Any, ...]:
    if isinstance(row, dict):
        unknown = set(row) - set(CONTENTS_COLUMNS)
        assert not unknown, f"not a V$LOGMNR_CONTENTS column: {sorted(unknown)}"
        return tuple(row.get(column) for column in CONTENTS_COLUMNS)
    return tuple(row)


class RecordedConnection:
    """A python-oracledb connection answered from a ``Recording``."""

    def __init__(self, recording: Recording) -> None:
        self.recording = recording
        self.closed = False

    def cursor(self) -> RecordedCursor:
        return RecordedCursor(self.recording)

    def commit(self) -> None:
        self.recording.call("commit")

    def close(self) -> None:
        self.closed = True


class RecordingCursor:
    """A cursor that runs on a real one and records each statement with its answer."""

    def __init__(self, cursor: Any, exchanges: list[dict[str, Any]]) -> None:
        self.cursor = cursor
        self.exchanges = exchanges
        self._held: list[tuple[Any, ...]] = []
        self._failed: Exception | None = None

    def __enter__(self) -> RecordingCursor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cursor.close()

    @property
    def arraysize(self) -> int:
        return int(self.cursor.arraysize)

    @arraysize.setter
    def arraysize(self, size: int) -> None:
        self.cursor.arraysize = size

    def execute(self, statement: str, binds: dict[str, object] | None = None, **named: Any) -> None:
        import oracledb

        sent = dict(binds or {}) | named
        name = NAMES.get(statement)
        exchange: dict[str, Any] = {"sql": name} if name else {"text": statement}
        if sent:
            exchange["binds"] = {key: to_json(value) for key, value in sent.items()}
        self.exchanges.append(exchange)
        self._held, self._failed = [], None
        try:
            self.cursor.execute(statement, sent)
        except oracledb.DatabaseError as exc:
            exchange["error"] = _error_of(exc)
            raise
        if not self.cursor.description:
            return  # no result: no "rows"
        try:
            while batch := self.cursor.fetchmany(self.cursor.arraysize or 100):
                self._held.extend(tuple(row) for row in batch)
        except oracledb.DatabaseError as exc:  # mid-read: the rows, then the error
            self._failed = exc
            exchange |= {"error": _error_of(exc), "after_rows": True}
        contents = name is not None and name.startswith("CONTENTS(")
        exchange["rows"] = [
            _contents_row(row) if contents else list(map(to_json, row)) for row in self._held
        ]

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self.fetchmany(len(self._held) + 1)

    def fetchone(self) -> tuple[Any, ...] | None:
        rows = self.fetchmany(1)
        return rows[0] if rows else None

    def fetchmany(self, size: int | None = None) -> list[tuple[Any, ...]]:
        if not self._held and self._failed is not None:
            failed, self._failed = self._failed, None
            raise failed
        count = size or self.arraysize
        rows, self._held = self._held[:count], self._held[count:]
        return rows


def _contents_row(row: Sequence[Any]) -> dict[str, Any]:
    """A V$LOGMNR_CONTENTS row as the format holds it: NULL columns left out."""
    values = zip(CONTENTS_COLUMNS, map(to_json, row), strict=True)
    return {column: value for column, value in values if value is not None}


def _error_of(exc: Exception) -> dict[str, Any]:
    (error,) = exc.args
    return {"code": error.code, "message": error.message}


def recording_connect(connect: Any, exchanges: list[dict[str, Any]]) -> Any:
    """``connect`` whose connections record every statement and call into ``exchanges``."""
    return lambda: RecordingConnection(connect(), exchanges)


class RecordingConnection:
    """A live python-oracledb connection whose statements and calls are recorded."""

    def __init__(self, connection: Any, exchanges: list[dict[str, Any]]) -> None:
        self.connection = connection
        self.exchanges = exchanges

    def cursor(self) -> RecordingCursor:
        return RecordingCursor(self.connection.cursor(), self.exchanges)

    def commit(self) -> None:
        self.exchanges.append({"call": "commit"})
        self.connection.commit()

    def close(self) -> None:
        self.connection.close()


def save(path: Path, description: str, exchanges: Sequence[dict[str, Any]]) -> None:
    """Write a captured recording (``origin: captured``)."""
    document = {"origin": "captured", "description": description, "exchanges": list(exchanges)}
    path.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
