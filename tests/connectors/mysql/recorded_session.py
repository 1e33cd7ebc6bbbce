"""Recorded MySQL sessions: the statements replcheck sends and what the server answered,
replayed by ``fake_server`` statement by statement (test level 2 of issue 40).

Recording format (one JSON object, UTF-8)::

    {"captured": "hand-written from the MySQL 8.0 reference manual, not from a server",
     "description": "...",
     "exchanges": [
        {"sql": "SELECT VERSION(), @@version_comment",
         "columns": ["VERSION()", "@@version_comment"],
         "rows": [["8.0.36", "MySQL Community Server - GPL"]]},
        {"sql": "UNLOCK TABLES"},
        {"sql": "FLUSH TABLES WITH READ LOCK", "error": [1205, "Lock wait timeout ..."]}]}

``captured`` says where the recording comes from: ``hand-written ...`` (written from the
reference manual: it proves what replcheck sends and what it does with the documented
answers, not that a server answers so), or ``captured from <VERSION()> ...`` (written by
``record_session`` from a live server). ``sql`` is the statement exactly as the client
sends it (parameters already in it); ``columns`` and ``rows`` a result set, ``error`` the
server's error number and message; neither: an OK. Values are JSON's own; others are
tagged as text (``{"decimal": "1.50"}``, ``{"datetime": ...}``, ``{"bytes": "00ff"}``) and
are replayed as text.

Replay: each exchange is answered once, by the first unanswered exchange with the same SQL;
a statement with none fails (the fake server answers it with an error and lists it in
``unanswered``), and ``Recording.unasked()`` lists what the code never sent.

Recording: ``record_session`` wraps pymysql's ``Connection.query`` while it is open and
keeps every statement and answer in that format (the live tests do so when
REPLCHECK_MYSQL_RECORD names a directory; see ``test_live``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.connectors.mysql.fake_server import ResultSet, ServerError, Value

DATA = Path(__file__).parent / "data"
HAND_WRITTEN = "hand-written"


class UnrecordedStatement(LookupError):
    """The code sent a statement the recording does not hold (once more than recorded)."""


@dataclass
class Recording:
    """A recorded session, answered once per exchange.

    Args:
        path: Where it was read from (for messages).
        captured: Where it comes from (``hand-written ...`` or ``captured from ...``).
        exchanges: The statements and answers, in the order they were sent.
    """

    path: Path
    captured: str
    exchanges: list[dict[str, Any]]

    def __post_init__(self) -> None:
        if not self.captured.startswith((HAND_WRITTEN, "captured from")):
            raise ValueError(f"{self.path.name}: 'captured' must say how it was recorded")
        self._asked = [False] * len(self.exchanges)

    @classmethod
    def load(cls, name: str) -> Recording:
        """The recording ``data/<name>``."""
        path = DATA / name
        found = json.loads(path.read_text(encoding="utf-8"))
        return cls(path, found["captured"], list(found["exchanges"]))

    @property
    def hand_written(self) -> bool:
        """Whether it was written by hand rather than captured from a server."""
        return self.captured.startswith(HAND_WRITTEN)

    def sqls(self) -> list[str]:
        """Every recorded statement, in order."""
        return [exchange["sql"] for exchange in self.exchanges]

    def answer(self, sql: str) -> ResultSet | ServerError | None:
        """The answer of the first unasked exchange of ``sql``.

        Raises:
            UnrecordedStatement: There is none.
        """
        for index, exchange in enumerate(self.exchanges):
            if not self._asked[index] and exchange["sql"] == sql.strip():
                self._asked[index] = True
                return _answer_of(exchange)
        raise UnrecordedStatement(f"{self.path.name} holds no unasked {sql!r}")

    def unasked(self) -> list[str]:
        """The recorded statements the code never sent."""
        return [e["sql"] for e, asked in zip(self.exchanges, self._asked, strict=True) if not asked]

    def first(self, sql: str) -> dict[str, Any]:
        """The first exchange of ``sql`` (tests read expected values from it).

        Raises:
            KeyError: The recording has none.
        """
        for exchange in self.exchanges:
            if exchange["sql"] == sql:
                return exchange
        raise KeyError(sql)


def _answer_of(exchange: dict[str, Any]) -> ResultSet | ServerError | None:
    if "error" in exchange:
        code, message = exchange["error"]
        return ServerError(int(code), str(message))
    if "columns" not in exchange:
        return None
    rows = tuple(tuple(_replayed(value) for value in row) for row in exchange.get("rows", []))
    return ResultSet(tuple(exchange["columns"]), rows)


def _replayed(value: Any) -> Value:
    """A recorded value as the fake server sends it (ints as BIGINT, the rest as text)."""
    if isinstance(value, dict):
        ((tag, text),) = value.items()
        return bytes.fromhex(text).decode("latin-1") if tag == "bytes" else str(text)
    if value is None or isinstance(value, int | str):
        return value
    return str(value)


def to_json(value: Any) -> Any:
    """A value pymysql returned, as a recording holds it."""
    if isinstance(value, bool):
        return int(value)
    if value is None or isinstance(value, int | str | float):
        return value
    if isinstance(value, decimal.Decimal):
        return {"decimal": str(value)}
    if isinstance(value, dt.datetime | dt.date | dt.time | dt.timedelta):
        return {type(value).__name__: str(value)}
    if isinstance(value, bytes | bytearray):
        return {"bytes": bytes(value).hex()}
    return {"text": str(value)}


@contextlib.contextmanager
def record_session(path: Path, description: str) -> Iterator[list[dict[str, Any]]]:
    """Record every statement pymysql sends, and its answer, while open; then write them to
    ``path`` in the replay format, ``captured from`` the server's ``VERSION()``."""
    import pymysql.connections

    exchanges: list[dict[str, Any]] = []
    original = pymysql.connections.Connection.query

    def query(self: Any, sql: Any, unbuffered: bool = False) -> int:
        text = sql.decode() if isinstance(sql, bytes) else str(sql)
        exchange: dict[str, Any] = {"sql": text.strip()}
        exchanges.append(exchange)
        try:
            affected = original(self, sql, unbuffered)
        except pymysql.err.MySQLError as exc:
            exchange["error"] = [exc.args[0], str(exc.args[-1])]
            raise
        _keep_result(self._result, exchange, unbuffered)
        return int(affected or 0)

    pymysql.connections.Connection.query = query
    try:
        yield exchanges
    finally:
        pymysql.connections.Connection.query = original
        version = _version_of(exchanges)
        captured = f"captured from MySQL {version} on {dt.date.today()} (REPLCHECK_MYSQL_RECORD)"
        document = {"captured": captured, "description": description, "exchanges": exchanges}
        path.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")


def _keep_result(result: Any, exchange: dict[str, Any], unbuffered: bool) -> None:
    """The result set of a query, kept in ``exchange`` (as the rows are read, unbuffered)."""
    if result is None or not result.description:
        return
    exchange["columns"] = [column[0] for column in result.description]
    if not unbuffered:
        exchange["rows"] = [[to_json(value) for value in row] for row in result.rows or ()]
        return
    rows: list[list[Any]] = []
    exchange["rows"] = rows
    read = result._read_rowdata_packet_unbuffered

    def read_kept() -> Any:
        row = read()
        if row is not None:
            rows.append([to_json(value) for value in row])
        return row

    result._read_rowdata_packet_unbuffered = read_kept


def _version_of(exchanges: list[dict[str, Any]]) -> str:
    for exchange in exchanges:
        if exchange["sql"].startswith("SELECT VERSION()") and exchange.get("rows"):
            return " ".join(str(value) for value in exchange["rows"][0])
    return "(VERSION() not asked)"
