"""LOB fragments joined to the row changes they complete, per transaction.

LogMiner writes a long LOB value as rows after the row's INSERT or UPDATE: a
``SEL_LOB_LOCATOR`` for one column of the row, then ``LOB_WRITE``/``LOB_TRIM``/``LOB_ERASE``
fragments (``lob_redo``: a run). So that one statement stays one change, a transaction's
latest INSERT or UPDATE of a table with LOB columns is held until its next row: the runs of
that row that follow are applied to the held change's after-image (``EMPTY_CLOB()`` there is
the value they start from), then it is released. Runs with no change of their row just
before them (a LOB-only update) make an update of their own, held the same way.

Undoing (``ROLLBACK = 1``) comes in reverse: a change's LOB undo rows, then the undo of its
DML row, which undoes the joined change as a whole. LOB undo rows not followed by the undo
of their row's DML undo a LOB-only update: one ``PartialRollback`` of it.

A run's value is ``UNAVAILABLE`` (read as of the commit) where the value it starts from is
not in the redo (``lob_redo.LobValue``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

from cdc_core.capture.events import UNAVAILABLE, PartialRollback, RawChange, RowChange
from connectors.model import TableSchema
from connectors.oracle.errors import UnsupportedRedoError
from connectors.oracle.logminer.lob_redo import LobValue, has_locator, parse_locator
from connectors.oracle.position import position_of

SEL_LOB_LOCATOR = 9
FRAGMENT_NAMES = {10: "LOB_WRITE", 11: "LOB_TRIM", 29: "LOB_ERASE"}
LOB_OPERATIONS = frozenset({SEL_LOB_LOCATOR, *FRAGMENT_NAMES})
_DML = frozenset({1, 2, 3})  # INSERT, DELETE, UPDATE


class Row(Protocol):
    """What a V$LOGMNR_CONTENTS row (``contents.ContentsRow``) gives this module."""

    @property
    def scn(self) -> int: ...

    @property
    def xid(self) -> str: ...

    @property
    def operation_code(self) -> int: ...

    @property
    def row_id(self) -> str | None: ...

    @property
    def rollback(self) -> int: ...

    @property
    def sql_redo(self) -> str | None: ...

    @property
    def table(self) -> str: ...


@dataclass
class _Run:
    """One LOB column of one row being written by fragments."""

    row_id: str
    column: str
    value: LobValue


@dataclass
class _Undo:
    """LOB undo rows of one row, awaiting the transaction's next row."""

    table: str
    row_id: str
    scn: int


class LobRuns:
    """The held change, open run and pending LOB undo of each transaction."""

    def __init__(self) -> None:
        self._held: dict[str, RowChange] = {}
        self._runs: dict[str, _Run] = {}
        self._undo: dict[str, _Undo] = {}

    def before(self, row: Row) -> list[RawChange]:
        """What ``row``'s arrival completes in its transaction: a run it does not continue
        ends, a held change it does not add to is released, and LOB undo rows it does not
        continue undo a LOB-only update unless ``row`` undoes their row's DML."""
        xid, out = row.xid, list[RawChange]()
        undo = self._undo.get(xid)
        if undo is not None and not _same_row(row, undo.table, undo.row_id, LOB_OPERATIONS, 1):
            del self._undo[xid]
            if not _same_row(row, undo.table, undo.row_id, _DML, 1):
                out.append(PartialRollback(xid, position_of(undo.scn), undo.table, undo.row_id))
        continues = row.operation_code in FRAGMENT_NAMES and not row.rollback
        if xid in self._runs and not continues:
            self._end_run(xid)
        held = self._held.get(xid)
        if held is not None and not _same_row(row, held.table, held.locator, LOB_OPERATIONS, 0):
            out.append(self._held.pop(xid))
        return out

    def hold(self, change: RowChange) -> None:
        """Hold an INSERT or UPDATE of a table with LOB columns until its next row."""
        self._held[change.txid] = change

    def feed(self, row: Row, schema: TableSchema) -> None:
        """A LOB operation of captured table ``schema``.

        Raises:
            UnsupportedRedoError: A fragment without its locator, or a locator of a column
                the table does not have.
        """
        if row.rollback:
            self._undo.setdefault(row.xid, _Undo(row.table, row.row_id or "", row.scn))
            return
        if row.operation_code == SEL_LOB_LOCATOR or (
            row.xid not in self._runs and has_locator(row.sql_redo or "")
        ):
            self._start(row, schema)
        if row.operation_code == SEL_LOB_LOCATOR:
            return
        run = self._runs.get(row.xid)
        if run is None:
            raise unsupported(
                row, f"a {FRAGMENT_NAMES[row.operation_code]} fragment without its locator"
            )
        run.value.apply(FRAGMENT_NAMES[row.operation_code], row.sql_redo or "")

    def forget(self, xid: str) -> None:
        """Drop what a rolled back transaction held."""
        for kept in (self._held, self._runs, self._undo):
            kept.pop(xid, None)

    def _start(self, row: Row, schema: TableSchema) -> None:
        locator = parse_locator(row.sql_redo or "")
        if locator.column not in {column.name for column in schema.columns}:
            raise unsupported(row, f"a LOB locator of unknown column {locator.column}")
        row_id = row.row_id or ""
        held = self._held.get(row.xid)
        if held is None:  # a LOB-only update: a change of its own (``before`` released others)
            held = RowChange(row.xid, position_of(row.scn), "u", row.table, row_id, {})
            self._held[row.xid] = held
        known = (held.after or {}).get(locator.column)
        base = known if isinstance(known, str | bytes) else None
        self._runs[row.xid] = _Run(row_id, locator.column, LobValue(locator.binary, base))

    def _end_run(self, xid: str) -> None:
        run, held = self._runs.pop(xid), self._held[xid]
        value = UNAVAILABLE if run.value.value is None else run.value.value
        self._held[xid] = replace(held, after=dict(held.after or {}) | {run.column: value})


def _same_row(row: Row, table: str, row_id: object, codes: frozenset[int], rollback: int) -> bool:
    """Whether ``row`` is one of ``codes`` (with that ``ROLLBACK`` flag) of the same row."""
    return (
        row.operation_code in codes
        and bool(row.rollback) == bool(rollback)
        and (row.table, row.row_id or row_id) == (table, row_id)
    )


def unsupported(row: Row, what: str) -> UnsupportedRedoError:
    """The error for a LOB row replcheck cannot read, naming the table and the SCN."""
    return UnsupportedRedoError(
        f"table {row.table} has {what} at SCN {row.scn}; replcheck cannot capture it: exclude"
        " the table, or re-snapshot it after the change",
        {"table": row.table, "scn": row.scn, "xid": row.xid},
    )
