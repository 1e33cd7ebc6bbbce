"""V$LOGMNR_CONTENTS rows to raw changes: the code the live reader and the replay share.

``ContentsRow`` is one row of the view (the columns ``CONTENTS_COLUMNS`` lists; Oracle
Database Reference, "V$LOGMNR_CONTENTS"). ``ChangeAssembler`` turns rows, in the order the
view returns them (redo order, so SCNs never decrease), into ``cdc_core.capture.events`` raw
changes:

- ``OPERATION_CODE`` 6 START -> ``Begin``; 7 COMMIT -> ``Commit`` at the commit's SCN, its
  ``TIMESTAMP`` (server wall clock) as ``commit_ts``; 36 ROLLBACK -> ``Rollback``.
- 1 INSERT, 2 DELETE, 3 UPDATE -> ``RowChange`` located by ``ROW_ID``, images typed by
  ``redo_values.row_images``; a delete's before-image also takes its ``SQL_UNDO`` (an
  insert of the whole old row, whatever the supplemental logging).
- ``ROLLBACK = 1`` on a DML row: the redo of undoing an earlier change of the same
  transaction (rollback to savepoint, failed statement, or a full rollback replayed row by
  row) -> ``PartialRollback`` of the latest change to that ROWID.
- ``CSF = 1``: SQL_REDO/SQL_UNDO longer than 4000 bytes continue in the next row(s); the
  pieces are joined into one statement ("CSF: Continuation SQL flag", same reference).
- Row movement (an update of a partitioned table's partition key with ROW MOVEMENT
  enabled) is redone as a delete from the old partition and an insert into the new one in
  one redo record: a DELETE immediately followed by an INSERT of the same table, transaction,
  SCN and ``RS_ID`` becomes one update with ``new_locator`` = the new ROWID.
- 5 DDL of a captured table, classified by ``ddl.classify_ddl``: ``TRUNCATE`` -> a ``t``
  change; DDL that changes columns or stored values -> ``TableChanged`` at the DDL row's
  position (``schema``, ``refresh`` or ``stop``), and the table's columns in ``tables``
  follow it, so later SQL_REDO parses with them; other DDL (indexes, constraints, grants)
  changes nothing.
- 34 MISSING_SCN -> ``MissingLogError``; 255 UNSUPPORTED rows of a captured table, and
  ``STATUS = 2`` rows -> errors naming the table and the SCN.
- LOB operations of a captured table (``lob_runs``, ``lob_redo``): the fragments of a long
  LOB value are joined to the INSERT or UPDATE they complete (undone and emitted again with
  the value when the run ends), or make an update of their own; a value not in the redo is
  ``UNAVAILABLE`` (read as of the commit). A fragment without its locator is an error naming
  the table and the SCN, as are LOB operations of a table without LOB columns.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from cdc_core.capture.events import Begin, Commit, PartialRollback, RawChange, Rollback, RowChange
from cdc_core.capture.source import TableChanged, TableDescription
from cdc_core.names import format_table
from connectors.base import arrow_type_of
from connectors.model import SourceColumn, TableSchema, carried_columns
from connectors.oracle.ddl import classify_ddl
from connectors.oracle.errors import (
    DictionaryMismatchError,
    MissingLogError,
    RedoParseError,
    UnsupportedRedoError,
)
from connectors.oracle.logminer.lob_runs import LOB_OPERATIONS, LobRuns
from connectors.oracle.logminer.redo_parser import parse_redo
from connectors.oracle.logminer.redo_values import row_images
from connectors.oracle.position import position_of
from connectors.oracle.types import LOB_TYPES, OracleColumn, logical_type, refusal

logger = logging.getLogger(__name__)

CONTENTS_COLUMNS = (
    "SCN", "TIMESTAMP", "XID", "OPERATION_CODE", "OPERATION", "SEG_OWNER", "TABLE_NAME",
    "ROW_ID", "CSF", "ROLLBACK", "RS_ID", "SSN", "STATUS", "INFO", "SQL_REDO", "SQL_UNDO",
)  # fmt: skip
"""The V$LOGMNR_CONTENTS columns read, in query order (also the replay file's keys)."""

INSERT, DELETE, UPDATE, DDL, START, COMMIT = 1, 2, 3, 5, 6, 7
MISSING_SCN, ROLLBACK, UNSUPPORTED = 34, 36, 255
_DML = {INSERT: "c", DELETE: "d", UPDATE: "u"}
_TIMESTAMP_TEXT = "%Y-%m-%d %H:%M:%S"
NULL_ROWID = "AAAAAAAAAAAAAAAAAA"  # what LogMiner shows where a row has no ROWID (IOTs)


@dataclass(frozen=True, slots=True)
class ContentsRow:
    """One V$LOGMNR_CONTENTS row, as much of it as replcheck reads."""

    scn: int
    timestamp: dt.datetime
    xid: str
    operation_code: int
    operation: str | None = None
    seg_owner: str | None = None
    table_name: str | None = None
    row_id: str | None = None
    csf: int = 0
    rollback: int = 0
    rs_id: str | None = None
    ssn: int | None = None
    status: int = 0
    info: str | None = None
    sql_redo: str | None = None
    sql_undo: str | None = None

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> ContentsRow:
        """A row from ``{column: value}`` (a cursor row zipped with ``CONTENTS_COLUMNS``, or a
        replay file line). ``XID`` may be bytes (RAW) or hex text; ``TIMESTAMP`` a datetime
        or ``YYYY-MM-DD HH24:MI:SS`` text."""
        unknown = set(record) - set(CONTENTS_COLUMNS) - {"COMMIT_SCN", "THREAD#"}
        if unknown:
            raise RedoParseError(f"unknown V$LOGMNR_CONTENTS columns {sorted(unknown)}")
        stamp, xid = record["TIMESTAMP"], record["XID"]
        texts = ("OPERATION", "SEG_OWNER", "TABLE_NAME", "ROW_ID", "RS_ID", "INFO")
        return cls(
            scn=int(record["SCN"]),
            timestamp=stamp if isinstance(stamp, dt.datetime) else _timestamp(stamp),
            xid=xid.hex().upper() if isinstance(xid, bytes) else str(xid).upper(),
            operation_code=int(record["OPERATION_CODE"]),
            **{name.lower(): record.get(name) for name in texts},
            csf=int(record.get("CSF") or 0),
            rollback=int(record.get("ROLLBACK") or 0),
            ssn=None if record.get("SSN") is None else int(record["SSN"]),
            status=int(record.get("STATUS") or 0),
            sql_redo=record.get("SQL_REDO"),
            sql_undo=record.get("SQL_UNDO"),
        )

    def to_record(self) -> dict[str, object]:
        """The replay file's JSON object for this row (the inverse of ``from_record``)."""
        record: dict[str, object] = {name: getattr(self, name.lower()) for name in CONTENTS_COLUMNS}
        record["TIMESTAMP"] = self.timestamp.strftime(_TIMESTAMP_TEXT)
        return record

    @property
    def table(self) -> str:
        """``OWNER.TABLE``, the name ``RowChange.table`` carries."""
        return format_table(self.seg_owner, self.table_name or "")


def _timestamp(text: object) -> dt.datetime:
    try:
        return dt.datetime.strptime(str(text), _TIMESTAMP_TEXT)
    except ValueError as exc:
        raise RedoParseError(f"TIMESTAMP {text!r} is not YYYY-MM-DD HH24:MI:SS") from exc


def schema_from_dictionary(
    table: str, rows: Iterable[tuple[str, str, int | None, int | None, str]], key: tuple[str, ...]
) -> TableSchema:
    """A ``TableSchema`` from ALL_TAB_COLUMNS rows ``(name, data_type, precision, scale,
    nullable)`` in column order, as ``sql.COLUMNS`` selects them."""
    columns = []
    for name, data_type, precision, scale, nullable in rows:
        column = OracleColumn(name, data_type, precision, scale)
        columns.append(
            SourceColumn(name, column.native_type, logical_type(column), nullable == "Y")
        )
    return TableSchema(table, tuple(columns), key)


class ChangeAssembler:
    """Turns V$LOGMNR_CONTENTS rows into raw changes (see the module docstring).

    Args:
        tables: The captured tables by ``OWNER.TABLE``; rows of other tables are skipped.
            The assembler follows DDL in this dictionary, in place: a reader describing
            tables from the same dictionary describes them as of the rows read so far.
        server_zone: The zone of the server's wall clock, which ``TIMESTAMP`` is in.

    Feed rows in view order with ``feed``; call ``flush`` at the end of each mining window
    (a held DELETE waits for the row after it, which may be the INSERT of a row movement).
    """

    def __init__(self, tables: dict[str, TableSchema], server_zone: dt.tzinfo) -> None:
        self.tables = tables
        self.server_zone = server_zone
        self._pieces: list[ContentsRow] = []
        self._held: tuple[ContentsRow, RowChange] | None = None
        self._lobs = LobRuns()
        self._lobs_of: dict[str, bool] = {}  # whether a table has LOB columns, per table

    def feed(self, row: ContentsRow) -> list[RawChange | TableChanged]:
        """The raw changes ``row`` completes (none while a CSF statement continues), and the
        classified DDL of a captured table."""
        whole = self._join(row)
        if whole is None:
            return []
        held, self._held = self._held, None
        if held is not None and _moves(held[0], whole):
            return [self._moved(held[1], whole)]
        out: list[RawChange | TableChanged] = [held[1]] if held is not None else []
        out.extend(self._lobs.before(whole))
        change = self._change(whole)
        if isinstance(change, RowChange) and change.op == "d" and whole.rollback == 0:
            self._held = (whole, change)
        elif change is not None:
            out.append(change)
        return out

    def flush(self) -> list[RawChange]:
        """The change still held back, if any (call at the end of a mining window)."""
        held, self._held = self._held, None
        return [] if held is None else [held[1]]

    # -- CSF continuations -----------------------------------------------------------------
    def _join(self, row: ContentsRow) -> ContentsRow | None:
        if self._pieces and not _continues(self._pieces[0], row):
            raise UnsupportedRedoError(
                f"a CSF continuation of SCN {self._pieces[0].scn} is followed by an unrelated"
                " row; mine whole SCN ranges (the contents query must not split a statement)",
                {"scn": row.scn, "xid": row.xid},
            )
        if row.csf:
            self._pieces.append(row)
            return None
        if not self._pieces:
            return row
        pieces, self._pieces = [*self._pieces, row], []
        return replace(
            row,
            sql_redo="".join(piece.sql_redo or "" for piece in pieces),
            sql_undo="".join(piece.sql_undo or "" for piece in pieces),
        )

    # -- one whole row -----------------------------------------------------------------------
    def _change(self, row: ContentsRow) -> RawChange | TableChanged | None:
        position = position_of(row.scn)
        code = row.operation_code
        if code == START:
            return Begin(row.xid, position)
        if code == COMMIT:
            self._lobs.forget(row.xid)
            return Commit(row.xid, position, self._commit_ts(row))
        if code == ROLLBACK:
            self._lobs.forget(row.xid)
            return Rollback(row.xid, position)
        if code == MISSING_SCN:
            raise MissingLogError(row.scn, "LogMiner reports MISSING_SCN: a redo log is missing")
        schema = self.tables.get(row.table)
        if schema is None:
            return None
        if code in _DML:
            change = self._dml(row, schema)
            if isinstance(change, RowChange) and change.op in ("c", "u") and self._lob_table(row):
                self._lobs.emitted(change)  # its LOB fragments may follow (``lob_runs``)
            return change
        if code == DDL:
            return self._ddl(row, schema)
        if code in LOB_OPERATIONS and self._lob_table(row):
            self._lobs.feed(row, schema)
            return None  # joined to the change it completes (``lob_runs``)
        if code in LOB_OPERATIONS or code == UNSUPPORTED:
            raise _unsupported(row, f"operation {row.operation or code}")
        return None  # INTERNAL, SELECT_FOR_UPDATE ...: no row change

    def _lob_table(self, row: ContentsRow) -> bool:
        """Whether ``row``'s table has LOB columns (asked per row: kept until its DDL)."""
        found = self._lobs_of.get(row.table)
        if found is None:
            found = self._lobs_of[row.table] = _has_lobs(self.tables[row.table])
        return found

    def _commit_ts(self, row: ContentsRow) -> dt.datetime:
        return row.timestamp.replace(tzinfo=self.server_zone).astimezone(dt.UTC)

    def _dml(self, row: ContentsRow, schema: TableSchema) -> RawChange:
        _check_status(row)
        if not row.row_id or row.row_id == NULL_ROWID:
            raise _unsupported(row, "a row without ROWID (index-organized table)")
        position = position_of(row.scn)
        if row.rollback:
            return PartialRollback(row.xid, position, row.table, row.row_id)
        op = _DML[row.operation_code]
        redo = _statement(row.sql_redo, row, op)
        images = row_images(redo, schema, row.scn)
        before = images.before
        if op == "d" and row.sql_undo:
            undo = row_images(_statement(row.sql_undo, row, "c"), schema, row.scn, undo=True)
            before = (before or {}) | (undo.after or {})
        return RowChange(row.xid, position, op, row.table, row.row_id, images.after, before)  # type: ignore[arg-type]

    def _ddl(self, row: ContentsRow, schema: TableSchema) -> RawChange | TableChanged | None:
        statement = (row.sql_redo or "").strip()
        outcome = classify_ddl(statement, schema)
        position = position_of(row.scn)
        if outcome.truncate:
            return RowChange(row.xid, position, "t", row.table, None)
        self.tables[row.table] = outcome.schema
        self._lobs_of.pop(row.table, None)
        if outcome.action is None:
            logger.debug("DDL on table %s at SCN %s changes no stored value", row.table, row.scn)
            return None
        logger.info(
            "DDL on table %s at SCN %s: %s (%s)", row.table, row.scn, outcome.action, outcome.reason
        )
        return TableChanged(position, row.table, outcome.action, statement, outcome.reason)

    def _moved(self, delete: RowChange, insert: ContentsRow) -> RowChange:
        _check_status(insert)
        statement = _statement(insert.sql_redo, insert, "c")
        images = row_images(statement, self.tables[insert.table], insert.scn)
        return replace(delete, op="u", after=images.after, new_locator=insert.row_id)


def _has_lobs(schema: TableSchema) -> bool:
    return any(column.native_type in LOB_TYPES for column in schema.columns)


def _moves(delete: ContentsRow, row: ContentsRow) -> bool:
    """Whether ``row`` is the INSERT half of the row movement whose DELETE is ``delete``."""
    return (
        row.operation_code == INSERT
        and row.rollback == 0
        and (row.xid, row.scn, row.table) == (delete.xid, delete.scn, delete.table)
        and row.rs_id is not None
        and row.rs_id == delete.rs_id
    )


def _continues(first: ContentsRow, row: ContentsRow) -> bool:
    return (row.scn, row.xid, row.rs_id, row.ssn) == (first.scn, first.xid, first.rs_id, first.ssn)


def _statement(text: str | None, row: ContentsRow, op: str) -> Any:
    if not text:
        raise _unsupported(row, "a row change without SQL text")
    statement = parse_redo(text)
    if statement.op != op:
        raise RedoParseError(
            f"LogMiner SQL of table {row.table} at SCN {row.scn} is not the expected {op!r}",
            {"table": row.table, "scn": row.scn},
        )
    return statement


def _check_status(row: ContentsRow) -> None:
    # STATUS 2: "the SQL is not valid"; INFO/SQL_REDO then say why (Oracle Database Utilities,
    # "LogMiner", "Supplemental Logging" and "Options for DDL_DICT_TRACKING").
    if row.status != 2:
        return
    if "dictionary" in (row.info or "").lower() or (row.sql_redo or "").startswith("Dictionary"):
        raise DictionaryMismatchError(row.table, row.scn, f"LogMiner INFO: {row.info}")
    raise _unsupported(row, f"a redo record LogMiner cannot render (INFO: {row.info})")


def _unsupported(row: ContentsRow, what: str) -> UnsupportedRedoError:
    return UnsupportedRedoError(
        f"table {row.table} has {what} at SCN {row.scn}; replcheck cannot capture it: exclude"
        " the table, or re-snapshot it after the change",
        {"table": row.table, "scn": row.scn, "xid": row.xid},
    )


def description_of(schema: TableSchema) -> TableDescription:
    """The lake's view of a captured table, for the stream and the snapshot alike: the
    columns both can carry, its primary key, and the columns it refuses by name (XMLTYPE,
    whose redo shows no value, and INTERVAL: ``types.refusal``).

    Every field is nullable, NOT NULL columns too: a truncate's event carries no row, and
    events from before a column was added carry none for it (as the snapshot's fields)."""
    import pyarrow as pa

    columns, refused = carried_columns(schema, refusal)
    fields = []
    for name in columns:
        ltype = schema.column(name).ltype
        assert ltype is not None  # refused otherwise
        fields.append(pa.field(name, arrow_type_of(ltype)))
    return TableDescription(schema.table, pa.schema(fields), schema.primary_key, refused=refused)
