"""LOB fragments joined to the row changes they complete, per transaction, in log order.

LogMiner writes a long LOB value as rows after the row's INSERT or UPDATE: a
``SEL_LOB_LOCATOR`` for one column of the row, then ``LOB_WRITE``/``LOB_TRIM``/``LOB_ERASE``
fragments (``lob_redo``: a run). The statement's change is emitted when its row comes, as
every change is (the transaction buffer takes changes in log order, other transactions'
rows interleaving). A run ends when its transaction's next other row comes; then, at that
row's position, the statement's change is undone (``PartialRollback``) and emitted again
with the run's value, so one statement stays one change, whose value starts from the one
the statement gave (``EMPTY_CLOB()``). A run with no change of its row just before it (a
LOB-only update) ends as an update of its own.

Undoing (``ROLLBACK = 1``) comes in reverse: a change's LOB undo rows, then the undo of its
DML row, which undoes the joined change as a whole. LOB undo rows not followed by the undo
of their row's DML undo a LOB-only update: one ``PartialRollback`` of it.

A run's value is ``UNAVAILABLE`` (read as of the commit) where the value it starts from is
not in the redo (``lob_redo.LobValue``), and so are all the row's LOB columns for fragments
whose locator was not read: a restarted pipeline re-reads the log from its last change,
which may fall inside a run.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

from cdc_core.capture.events import UNAVAILABLE, PartialRollback, RawChange, RowChange
from connectors.model import TableSchema
from connectors.oracle.errors import UnsupportedRedoError
from connectors.oracle.logminer.lob_redo import LobValue, has_locator, parse_locator
from connectors.oracle.position import position_of
from connectors.oracle.types import LOB_TYPES

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
    """LOB ``columns`` of one row being written by fragments (one, or for a run whose
    locator was not read, every LOB column of the table: ``value`` is then not known);
    ``joins``: the change of the row it completes (None: a LOB-only update)."""

    table: str
    row_id: str
    columns: tuple[str, ...]
    value: LobValue
    joins: RowChange | None
    located: bool = True  # False: its locator was not read, its fragments are not applied


@dataclass
class _Undo:
    """LOB undo rows of one row, awaiting the transaction's next row."""

    table: str
    row_id: str


class LobRuns:
    """Per transaction: its latest change of a table with LOB columns, its open run, and
    LOB undo rows awaiting the next row."""

    def __init__(self) -> None:
        self._last: dict[str, RowChange] = {}
        self._runs: dict[str, _Run] = {}
        self._undo: dict[str, _Undo] = {}
        # Per transaction and row: the statement's change before runs joined it, and the
        # LOB columns they set (what undoing only the runs leaves).
        self._joined: dict[tuple[str, str, str], tuple[RowChange, set[str]]] = {}

    def before(self, row: Row) -> list[RawChange]:
        """What ``row``'s arrival completes in its transaction, at ``row``'s position: a
        run it does not continue ends; LOB undo rows it does not continue undo a LOB-only
        update, unless ``row`` undoes their row's DML (which undoes the joined change)."""
        if not (self._last or self._runs or self._undo):
            return []  # no table with LOB columns written: the common case, per row
        xid, out = row.xid, list[RawChange]()
        undo = self._undo.get(xid)
        if undo is not None and not _same_row(row, undo.table, undo.row_id, LOB_OPERATIONS, 1):
            del self._undo[xid]
            if not _same_row(row, undo.table, undo.row_id, _DML, 1):
                out.extend(self._undo_runs(xid, undo, row.scn))
        continues = row.operation_code in FRAGMENT_NAMES and not row.rollback
        if xid in self._runs and not continues:
            out.extend(self._end(xid, row.scn))
        last = self._last.get(xid)
        if last is not None and not _same_row(row, last.table, last.locator, LOB_OPERATIONS, 0):
            del self._last[xid]  # the next run of the row would not follow its statement
        return out

    def emitted(self, change: RowChange) -> None:
        """An INSERT or UPDATE of a table with LOB columns: runs of its row may follow."""
        self._last[change.txid] = change

    def feed(self, row: Row, schema: TableSchema) -> None:
        """A LOB operation of captured table ``schema``.

        Raises:
            UnsupportedRedoError: A locator of a column the table does not have.
        """
        if row.rollback:
            self._undo.setdefault(row.xid, _Undo(row.table, row.row_id or ""))
            return
        if row.operation_code == SEL_LOB_LOCATOR or (
            row.xid not in self._runs and has_locator(row.sql_redo or "")
        ):
            self._start(row, schema)
        if row.operation_code == SEL_LOB_LOCATOR:
            return
        run = self._runs.get(row.xid)
        if run is None:
            # Its locator was not read: the pipeline re-reads from its last change after a
            # restart, which may fall inside a run. Which column it writes is not known, so
            # every LOB column of the row is read as of the commit.
            lobs = tuple(c.name for c in schema.columns if c.native_type in LOB_TYPES)
            value = LobValue(False, None)
            self._runs[row.xid] = _Run(row.table, row.row_id or "", lobs, value, None, False)
            return
        if run.located:
            run.value.apply(FRAGMENT_NAMES[row.operation_code], row.sql_redo or "")

    def forget(self, xid: str) -> None:
        """Drop what an ended transaction left (its commit or rollback came)."""
        for kept in (self._last, self._runs, self._undo):
            kept.pop(xid, None)
        for key in [key for key in self._joined if key[0] == xid]:
            del self._joined[key]

    def _undo_runs(self, xid: str, undo: _Undo, scn: int) -> list[RawChange]:
        """LOB undo rows with no undo of their row's statement after them: the runs alone
        are undone. A LOB-only update goes; a statement's change is emitted again, its LOB
        columns read as of the commit (what they hold after the undo is not in the redo)."""
        at = position_of(scn)
        out: list[RawChange] = [PartialRollback(xid, at, undo.table, undo.row_id)]
        joined = self._joined.pop((xid, undo.table, undo.row_id), None)
        if joined is not None:
            statement, columns = joined
            after = dict(statement.after or {}) | dict.fromkeys(columns, UNAVAILABLE)
            out.append(replace(statement, position=at, after=after))
        return out

    def _start(self, row: Row, schema: TableSchema) -> None:
        locator = parse_locator(row.sql_redo or "")
        if locator.column not in {column.name for column in schema.columns}:
            raise unsupported(row, f"a LOB locator of unknown column {locator.column}")
        row_id = row.row_id or ""
        last = self._last.get(row.xid)
        joins = (
            last if last is not None and (last.table, last.locator) == (row.table, row_id) else None
        )
        known = (joins.after or {}).get(locator.column) if joins is not None else None
        base = known if isinstance(known, str | bytes) else None
        value = LobValue(locator.binary, base)
        self._runs[row.xid] = _Run(row.table, row_id, (locator.column,), value, joins)

    def _end(self, xid: str, scn: int) -> list[RawChange]:
        """The run's change at SCN ``scn``: its statement's change undone and emitted again
        with the value, or an update of its own."""
        run = self._runs.pop(xid)
        value = UNAVAILABLE if run.value.value is None else run.value.value
        values = dict.fromkeys(run.columns, value)
        at = position_of(scn)
        if run.joins is None:
            change = RowChange(xid, at, "u", run.table, run.row_id, values)
            out: list[RawChange] = []
        else:
            change = replace(run.joins, position=at, after=dict(run.joins.after or {}) | values)
            out = [PartialRollback(xid, at, run.table, run.row_id)]
            key = (xid, run.table, run.row_id)
            statement, columns = self._joined.get(key, (run.joins, set()))
            self._joined[key] = (statement, columns | set(run.columns))
        self._last[xid] = change  # a run of another LOB column of the row joins it too
        return [*out, change]


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
