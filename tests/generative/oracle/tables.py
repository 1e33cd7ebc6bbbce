"""The tables of the Oracle generative tester, as ALL_TAB_COLUMNS describes them, and the
values their columns take.

``GEN.ACCOUNTS`` has a one-column primary key that is supplementally logged, dates, zoned
timestamps, text long enough to need CSF continuations and a ``CLOB`` (``DOC``) whose long
values LogMiner writes in LOB fragments; ``GEN.ITEMS`` a composite key,
and is partitioned by ``QTY`` with ROW MOVEMENT, so an update across the boundary moves a
row to a new ROWID; ``GEN.EVENTS`` has no key and is located by ROWID only. ``GEN.ACCOUNTS``
and ``GEN.EVENTS`` also have a ``LONG`` column (``MEMO``), whose values LogMiner may show
as ``Unsupported Type`` (``UNRENDERED_TYPES``).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal

LONG_TEXT = 4500  # longer than one 4000-byte SQL_REDO piece
LOB_TEXT = 9000  # a CLOB value this long comes in several LOB_WRITE fragments


@dataclass(frozen=True)
class Column:
    """An ALL_TAB_COLUMNS row: the replay tables file's column shape."""

    name: str
    data_type: str
    precision: int | None = None
    scale: int | None = None
    nullable: bool = True

    def record(self) -> list[object]:
        return [
            self.name,
            self.data_type,
            self.precision,
            self.scale,
            "Y" if self.nullable else "N",
        ]


@dataclass(frozen=True)
class TableSpec:
    name: str
    key: tuple[str, ...]
    columns: tuple[Column, ...]
    partition_column: str | None = None  # rows with a value below 50 live in partition 0
    key_logged: bool = False  # supplemental logging of the key: updates' where-clause has it


TABLES = (
    TableSpec("GEN.ACCOUNTS", ("ID",), (
        Column("ID", "NUMBER", 10, 0, False), Column("NAME", "VARCHAR2"),
        Column("BALANCE", "NUMBER", 12, 2), Column("OPENED", "DATE"), Column("NOTE", "VARCHAR2"),
        Column("SEEN", "TIMESTAMP(6) WITH TIME ZONE", None, 6), Column("MEMO", "LONG"),
        Column("DOC", "CLOB"),
    ), key_logged=True),
    TableSpec("GEN.ITEMS", ("ORD", "LINE"), (
        Column("ORD", "NUMBER", 10, 0, False), Column("LINE", "NUMBER", 5, 0, False),
        Column("QTY", "NUMBER", 5, 0), Column("PRICE", "NUMBER", 10, 2), Column("CODE", "CHAR"),
        Column("BIN", "RAW"),
    ), partition_column="QTY"),
    TableSpec("GEN.EVENTS", (), (
        Column("KIND", "VARCHAR2"), Column("AMOUNT", "NUMBER", 12, 3),
        Column("AT", "TIMESTAMP(6)", None, 6), Column("PAYLOAD", "RAW"), Column("MEMO", "LONG"),
    )),
)  # fmt: skip
ACCOUNTS, ITEMS, EVENTS = range(3)
UNRENDERED_TYPES = frozenset({"LONG"})
"""Column types whose values LogMiner may show as ``Unsupported Type`` instead of a literal
(Oracle Database Utilities, "Supported Data Types and Table Storage Attributes"): the
pipeline reads them from the source as of the commit (``PipelineConfig.fetch_unavailable``)."""


_WORDS = ("alice", "O'Brien", "Zoë", "a b", "x;y", "NULL", "quote''d", "tab\tend")
_BASE = dt.datetime(2026, 3, 1, 0, 0, 0)


def value(column: Column, pick: int, long_text: bool) -> object:
    """A value of ``column`` chosen by ``pick`` (NULL for about one pick in six; now and then
    text over 4000 bytes when ``long_text``)."""
    if column.nullable and pick % 6 == 0:
        return None
    kind = column.data_type
    if kind == "NUMBER":
        if not column.scale:
            return pick % 10**4
        return (Decimal(pick % 10**6) / (10**column.scale)).quantize(
            Decimal(1).scaleb(-column.scale)
        )
    if kind == "CLOB":
        if pick % 3 == 1:  # long: written in fragments (each over a SQL_REDO piece)
            return (f"doc{pick}-O'Brien " * 700)[: LOB_TEXT - pick % 3000]
        return f"{_WORDS[pick % len(_WORDS)]} doc{pick % 89}"
    if kind in ("VARCHAR2", "LONG"):
        if long_text and pick % 11 == 5:
            return ("n" * LONG_TEXT) + "O'Brien" + str(pick)
        return f"{_WORDS[pick % len(_WORDS)]}{pick % 97}"
    if kind == "CHAR":
        return f"C{pick % 1000}".ljust(8)
    if kind == "RAW":
        return bytes([pick % 256, (pick // 7) % 256, 0, 255])
    if kind == "DATE":
        return _BASE + dt.timedelta(seconds=pick * 7919 % 10**8)
    if kind.startswith("TIMESTAMP") and kind.endswith("TIME ZONE"):
        moment = _BASE + dt.timedelta(seconds=pick * 7919 % 10**8, microseconds=pick % 10**6)
        return moment.replace(tzinfo=dt.UTC)
    if kind.startswith("TIMESTAMP"):
        return _BASE + dt.timedelta(seconds=pick * 104729 % 10**8, microseconds=pick % 10**6)
    raise AssertionError(f"no values for {kind}")
