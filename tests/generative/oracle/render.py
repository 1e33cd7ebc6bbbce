"""Rendering a model's script as V$LOGMNR_CONTENTS rows, in the replay file format.

What LogMiner shows is rendered as it shows it (Oracle Database Utilities, "LogMiner",
"Interpreting Results of LogMiner Queries"): ``START``/``COMMIT``/``ROLLBACK`` rows, one
DML row per changed row located by ``ROW_ID`` (inserts list every column; updates set the
changed columns and put their old values -- and, with supplemental logging of the key, the
key -- in the where-clause; deletes list the whole old row, and their ``SQL_UNDO`` inserts
it back), values in the reader's NLS formats (zoned values with an offset or an upper-case
region), ``ROLLBACK = 1`` rows undoing changes in reverse order (a rollback to a savepoint,
or a whole rolled-back transaction), a row movement as a DELETE and an INSERT sharing SCN
and ``RS_ID``, statements over 4000 bytes in ``CSF`` continuation rows, DDL in a
transaction of its own. Transactions whose rows and keys are disjoint may interleave (row
locks keep others apart); commits stay in the model's order. With ``Features.unsupported``
a non-NULL value of a ``LONG`` column is ``Unsupported Type`` wherever it appears.

``Renderer.positions`` says, per script item, the SCN from which a snapshot shows it: its
commit SCN (``None`` for a transaction that rolled back; a DDL is a transaction of its own).
"""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal
from zoneinfo import ZoneInfo

from tests.generative.oracle.model import (
    Change,
    DdlScript,
    Script,
    TxnScript,
    Values,
    is_unrendered,
)
from tests.generative.oracle.tables import TABLES
from tests.generative.oracle.workload import Features

PIECE = 4000  # SQL_REDO and SQL_UNDO hold at most this much; the rest continues (CSF = 1)
LOB_INLINE = 1000  # a longer CLOB value comes in LOB fragments (``Features.lobs``)
LOB_FRAGMENT = 5000  # characters per LOB_WRITE row (its SQL_REDO then continues in CSF rows)
_LOCATOR, _LOB_WRITE, _LOB_TRIM = 9, 10, 11
MAX_WINDOW = 4
_INSERT, _DELETE, _UPDATE, _DDL, _START, _COMMIT, _ROLLBACK = 1, 2, 3, 5, 6, 7, 36
_OPERATIONS = {1: "INSERT", 2: "DELETE", 3: "UPDATE", 5: "DDL", 6: "START", 7: "COMMIT",
               36: "ROLLBACK", 9: "SEL_LOB_LOCATOR", 10: "LOB_WRITE", 11: "LOB_TRIM"}  # fmt: skip
_REGIONS = {"EUROPE/BERLIN": "Europe/Berlin", "AMERICA/NEW_YORK": "America/New_York",
            "ASIA/KOLKATA": "Asia/Kolkata", "UTC": "UTC"}  # fmt: skip
"""Regions as Oracle prints them (TZR), and their IANA names."""
_EPOCH = dt.datetime(2026, 5, 1, 8, 0, 0)

Unit = list[dict[str, object]]  # rows that must stay adjacent (CSF pieces, a movement pair)


# -- values as LogMiner renders them ----------------------------------------------------------


def literal(value: object, data_type: str, pick: int, regions: bool = True) -> str:
    """``value`` of a ``data_type`` column as LogMiner writes it in SQL_REDO."""
    if value is None:
        return "NULL"
    if isinstance(value, bytes):
        return f"HEXTORAW('{value.hex()}')"
    if isinstance(value, Decimal):
        return f"'{format(value.normalize(), 'f')}'"
    if isinstance(value, int):
        return f"'{value}'"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    assert isinstance(value, dt.datetime)
    if data_type == "DATE":
        return f"TO_DATE('{value:%Y-%m-%d %H:%M:%S}', 'YYYY-MM-DD HH24:MI:SS')"
    if value.tzinfo is None:
        return f"TO_TIMESTAMP('{value:%Y-%m-%d %H:%M:%S.%f}')"
    return f"TO_TIMESTAMP_TZ('{_zoned(value, pick, regions)}')"


def _zoned(value: dt.datetime, pick: int, regions: bool) -> str:
    """An instant as an offset or, for some picks, as an upper-case region's wall clock
    (never a time a DST overlap shows twice: that one LogMiner cannot pin down)."""
    region = list(_REGIONS)[pick % len(_REGIONS)]
    if regions and pick % 2 == 0:
        local = value.astimezone(ZoneInfo(_REGIONS[region]))
        if local.replace(fold=1 - local.fold).utcoffset() == local.utcoffset():
            return f"{local:%Y-%m-%d %H:%M:%S.%f} {region}"
    offset = dt.timezone(dt.timedelta(minutes=(pick % 27 - 13) * 30))
    local = value.astimezone(offset)
    sign = "-" if local.utcoffset() < dt.timedelta(0) else "+"  # type: ignore[operator]
    minutes = abs(int(local.utcoffset().total_seconds())) // 60  # type: ignore[union-attr]
    return f"{local:%Y-%m-%d %H:%M:%S.%f} {sign}{minutes // 60:02d}:{minutes % 60:02d}"


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _table(table: int) -> str:
    owner, name = TABLES[table].name.split(".")
    return f"{_quoted(owner)}.{_quoted(name)}"


# -- statements ----------------------------------------------------------------------------


class Statements:
    """SQL_REDO / SQL_UNDO texts of changes, with the columns the table has then."""

    def __init__(self, columns: list[tuple[str, str]], seed: int, features: Features) -> None:
        self.types = dict(columns)
        self.order = [name for name, _ in columns]
        self.seed, self.features = seed, features

    def value(self, name: str, value: object) -> str:
        if value is not None and is_unrendered(self.types[name], self.features):
            return "Unsupported Type"
        if self.fragmented(name, value):
            return "EMPTY_CLOB()"  # the value follows in LOB_WRITE rows (``lob_rows``)
        return literal(value, self.types[name], self.seed + len(name), self.features.region_zones)

    def fragmented(self, name: str, value: object) -> bool:
        """Whether LogMiner writes ``value`` of column ``name`` in LOB fragments."""
        long = isinstance(value, str) and len(value) > LOB_INLINE
        return self.features.lobs and self.types.get(name) == "CLOB" and long

    def lobs(self, change: Change) -> list[str]:
        """The columns whose new values ``change`` writes in LOB fragments."""
        if change.op not in ("c", "u") or change.after is None:
            return []
        written = self.order if change.op == "c" else change.changed
        return [c for c in written if self.fragmented(c, change.after[c])]

    def insert(self, table: int, row: Values, mode: str = "redo") -> str:
        """An insert of ``row``: ``redo`` (long LOB values follow in fragments), ``inline``
        (every value in the statement: a row movement's insert) or ``undo`` (without LOB
        columns, as a delete's SQL_UNDO is)."""
        order = [c for c in self.order if mode != "undo" or self.types[c] != "CLOB"]
        names = ",".join(_quoted(c) for c in order)
        values = ",".join(self._literal(c, row[c], mode == "redo") for c in order)
        return f"insert into {_table(table)}({names}) values ({values});"

    def _literal(self, name: str, value: object, fragments: bool) -> str:
        if fragments or not self.fragmented(name, value):
            return self.value(name, value)
        return literal(value, "CLOB", 0)

    def where(self, row: Values, columns: list[str]) -> str:
        terms = []
        for column in [c for c in columns if self.types[c] != "CLOB"]:  # LOBs never there
            if row[column] is None:
                terms.append(f"{_quoted(column)} IS NULL")
            else:
                terms.append(f"{_quoted(column)} = {self.value(column, row[column])}")
        return " and ".join(terms)

    def delete(self, table: int, row: Values) -> str:
        return f"delete from {_table(table)} where {self.where(row, self.order)};"

    def update(self, table: int, change: Change, undo: bool = False) -> str | None:
        """The UPDATE row's text (None: only LOB columns change, in fragments alone);
        ``undo``: the undo of the forward ``change``'s row, its old values inline."""
        assert change.before is not None and change.after is not None
        inline = [c for c in change.changed if c not in self.lobs(change)]
        if not inline:
            return None
        image = change.before if undo else change.after
        sets = ", ".join(f"{_quoted(c)} = {self._literal(c, image[c], not undo)}" for c in inline)
        logged = list(change.changed)
        if TABLES[table].key_logged:
            logged += [c for c in TABLES[table].key if c not in logged]
        return f"update {_table(table)} set {sets} where {self.where(change.before, logged)};"


# -- rows ----------------------------------------------------------------------------------------


def _row(xid: str, code: int, **fields: object) -> dict[str, object]:
    return {"XID": xid, "OPERATION_CODE": code, "OPERATION": _OPERATIONS[code], **fields}


def _dml(xid: str, code: int, table: int, rowid: str, redo: str, undo: str | None = None,
         rollback: int = 0) -> dict[str, object]:  # fmt: skip
    owner, name = TABLES[table].name.split(".")
    return _row(xid, code, SEG_OWNER=owner, TABLE_NAME=name, ROW_ID=rowid, ROLLBACK=rollback,
                SQL_REDO=redo, SQL_UNDO=undo)  # fmt: skip


def _pieces(row: dict[str, object]) -> Unit:
    """One row, or its CSF continuation rows when SQL_REDO or SQL_UNDO exceeds a piece."""
    redo, undo = str(row.get("SQL_REDO") or ""), str(row.get("SQL_UNDO") or "")
    count = max(1, -(-len(redo) // PIECE), -(-len(undo) // PIECE))
    if count == 1:
        return [row]
    pieces = []
    for index in range(count):
        part = slice(index * PIECE, (index + 1) * PIECE)
        pieces.append(row | {"SQL_REDO": redo[part] or None, "SQL_UNDO": undo[part] or None,
                             "CSF": 1 if index < count - 1 else 0})  # fmt: skip
    return pieces


class TxnRows:
    """The units of one transaction's rows, rendered with the columns each table has."""

    def __init__(
        self,
        script: TxnScript,
        columns: list[list[tuple[str, str]]],
        features: Features,
        index: int,
    ) -> None:
        self.script, self.index = script, index
        self.statements = [Statements(c, script.seed, features) for c in columns]
        self.units: list[Unit] = [
            [_row(script.xid, _START, SQL_REDO="set transaction read write;")]
        ]
        for kind, changes in script.steps:
            for change in changes:
                if kind in ("do", "undone"):
                    self.units += self._done(change)
                if kind == "undo":
                    self.units += self._undone(change)
        self.units += self._end()

    def _done(self, change: Change) -> list[Unit]:
        sql, xid = self.statements[change.table], self.script.xid
        if change.op == "c":
            assert change.after is not None
            row = _dml(
                xid, _INSERT, change.table, change.rowid, sql.insert(change.table, change.after)
            )
        elif change.op == "d":
            assert change.before is not None
            redo, undo = (
                sql.delete(change.table, change.before),
                sql.insert(change.table, change.before, "undo"),
            )
            row = _dml(xid, _DELETE, change.table, change.rowid, redo, undo)
        elif change.op == "u":
            text = sql.update(change.table, change)
            units = (
                []
                if text is None
                else [_pieces(_dml(xid, _UPDATE, change.table, change.rowid, text))]
            )
            return units + self._lob_rows(change)
        else:
            return [self._moved(change)]
        return [_pieces(row), *self._lob_rows(change)]

    def _lob_rows(self, change: Change, rollback: int = 0) -> list[Unit]:
        """The LOB rows after ``change``'s row: per column written in fragments, its locator,
        the LOB_WRITE rows and, after an update, a trim to the new length (undo: the
        locators alone, marked ``ROLLBACK = 1``)."""
        sql, xid, t = self.statements[change.table], self.script.xid, change.table
        units: list[Unit] = []
        for column in sql.lobs(change):
            assert change.after is not None
            locator = (
                "DECLARE \n loc_c CLOB; \n buf_c VARCHAR2(6216); \nBEGIN\n select"
                f" {_quoted(column)} into loc_c from {_table(t)} where ROWID ="
                f" '{change.rowid}' for update;"
            )
            units.append([_dml(xid, _LOCATOR, t, change.rowid, locator, rollback=rollback)])
            if rollback:
                continue
            text = str(change.after[column])
            for start in range(0, len(text), LOB_FRAGMENT):
                piece = text[start : start + LOB_FRAGMENT]
                write = (
                    f" buf_c := '{piece.replace(chr(39), chr(39) * 2)}'; \n"
                    f"  dbms_lob.write(loc_c, {len(piece)}, {start + 1}, buf_c);"
                )
                units.append(_pieces(_dml(xid, _LOB_WRITE, t, change.rowid, write)))
            if change.op == "u":
                trim = f"dbms_lob.trim(loc_c, {len(text)});"
                units.append([_dml(xid, _LOB_TRIM, t, change.rowid, trim)])
        return units

    def _moved(self, change: Change) -> Unit:
        assert change.before is not None and change.after is not None and change.new_rowid
        sql, xid = self.statements[change.table], self.script.xid
        redo, undo = (
            sql.delete(change.table, change.before),
            sql.insert(change.table, change.before, "undo"),
        )
        delete = _dml(xid, _DELETE, change.table, change.rowid, redo, undo)
        insert = _dml(
            xid,
            _INSERT,
            change.table,
            change.new_rowid,
            sql.insert(change.table, change.after, "inline"),
        )
        return [*_pieces(delete), *_pieces(insert)]

    def _undone(self, change: Change) -> list[Unit]:
        """``ROLLBACK = 1`` rows: the redo of undoing ``change`` (an insert undone is a delete
        of its ROWID, and so on); a movement is undone in two rows, insert half first."""
        sql, xid, t = self.statements[change.table], self.script.xid, change.table
        lobs = self._lob_rows(change, rollback=1)  # undone before the row's statement
        if change.op == "c":
            assert change.after is not None
            delete = _dml(xid, _DELETE, t, change.rowid, sql.delete(t, change.after), rollback=1)
            return [*lobs, [delete]]
        if change.op == "d":
            assert change.before is not None
            insert = sql.insert(t, change.before, "inline")
            return [[_dml(xid, _INSERT, t, change.rowid, insert, rollback=1)]]
        if change.op == "u":
            text = sql.update(t, change, undo=True)
            update = (
                [] if text is None else [[_dml(xid, _UPDATE, t, change.rowid, text, rollback=1)]]
            )
            return [*lobs, *update]
        assert change.new_rowid is not None and change.after and change.before
        return [
            [_dml(xid, _DELETE, t, change.new_rowid, sql.delete(t, change.after), rollback=1)],
            [
                _dml(
                    xid,
                    _INSERT,
                    t,
                    change.rowid,
                    sql.insert(t, change.before, "inline"),
                    rollback=1,
                )
            ],
        ]

    def _end(self) -> list[Unit]:
        if self.script.commit:
            return [[_row(self.script.xid, _COMMIT, SQL_REDO="commit;")]]
        undo = []
        if self.script.seed % 2:  # LogMiner may show the undo of each change before it
            for kind, changes in reversed(self.script.steps):
                if kind == "do":
                    for change in reversed(changes):
                        undo += self._undone(change)
        return [*undo, [_row(self.script.xid, _ROLLBACK, SQL_REDO="rollback;")]]


# -- the whole log ---------------------------------------------------------------------------


class Renderer:
    """Turns a ``Script`` into contents records, assigning SCNs and timestamps."""

    def __init__(self, script: Script, features: Features) -> None:
        self.script, self.features = script, features
        self.columns = [[(c.name, c.data_type) for c in spec.columns] for spec in script.initial]
        self.scn = 1000
        self.records: list[dict[str, object]] = []
        self.window: list[TxnRows] = []
        self.positions: list[int | None] = [None] * len(script.items)
        self.lagged = 0  # rows rendered with a newer dictionary (``Features.ddl_lag``)

    def render(self) -> list[dict[str, object]]:
        for index, item in enumerate(self.script.items):
            if isinstance(item, DdlScript):
                self._flush()
                self._ddl(item, index)
            else:
                self._join(item, index)
        self._flush()
        if self.features.ddl_lag:
            self.lagged = _as_of_newer_dictionary(self.records, self.script)
        return self.records

    def _join(self, script: TxnScript, index: int) -> None:
        rows = TxnRows(script, self.columns, self.features, index)
        clash = any(script.footprint & other.script.footprint for other in self.window)
        if not script.overlap or clash or len(self.window) >= MAX_WINDOW:
            self._flush()
        self.window.append(rows)

    def _flush(self) -> None:
        """Emit the window's transactions interleaved, each in order, commits in order."""
        if not self.window:
            return
        rng = random.Random(self.window[0].script.seed)
        pending = [list(rows.units) for rows in self.window]
        while any(pending):
            # A transaction's last unit (its commit) waits for the commits before it.
            ready = [
                i
                for i, units in enumerate(pending)
                if len(units) > 1 or (units and not any(pending[:i]))
            ]
            chosen = rng.choice(ready)
            self._emit(pending[chosen].pop(0))
            if not pending[chosen] and self.window[chosen].script.commit:
                self.positions[self.window[chosen].index] = self.scn  # its commit
        self.window = []

    def _emit(self, unit: Unit) -> None:
        self.scn += 1
        stamp = _EPOCH + dt.timedelta(seconds=self.scn // 3)
        for row in unit:
            record = {"SCN": self.scn, "TIMESTAMP": f"{stamp:%Y-%m-%d %H:%M:%S}", "CSF": 0,
                      "ROLLBACK": 0, "STATUS": 0, "SSN": 0} | row  # fmt: skip
            record["RS_ID"] = f" 0x{self.scn:06x}.{len(self.records):08x}.0010 "
            self.records.append(record)
        if len(unit) > 1:  # continuation pieces and a movement pair share one RS_ID
            for record in self.records[-len(unit) :]:
                record["RS_ID"] = self.records[-len(unit)]["RS_ID"]

    def _ddl(self, ddl: DdlScript, index: int) -> None:
        xid = f"DD{self.scn:014X}"
        owner, name = TABLES[ddl.table].name.split(".")
        self._emit([_row(xid, _START)])
        self._emit([_row(xid, _DDL, SEG_OWNER=owner, TABLE_NAME=name, SQL_REDO=ddl.text)])
        self._emit([_row(xid, _COMMIT)])
        self.positions[index] = self.scn
        self.columns[ddl.table] = [(c.name, c.data_type) for c in ddl.columns]


def _as_of_newer_dictionary(records: list[dict[str, object]], script: Script) -> int:
    """Mark the rows a reader mining with the online catalog after a DROP or RENAME COLUMN
    cannot render: the table's DML rows before the DDL, which LogMiner shows with STATUS 2
    (Oracle Database Utilities, "LogMiner", DDL_DICT_TRACKING and "Dictionary Version
    Mismatch"). How many were marked."""
    changed: dict[str, int] = {}
    for record in records:
        text = str(record.get("SQL_REDO") or "")
        if record["OPERATION_CODE"] == _DDL and (
            " drop column " in text or " rename column " in text
        ):
            table = str(record["TABLE_NAME"])
            changed[table] = max(changed.get(table, 0), int(str(record["SCN"])))
    marked = 0
    for record in records:
        table, code = str(record.get("TABLE_NAME")), record["OPERATION_CODE"]
        if code in (_INSERT, _DELETE, _UPDATE) and int(str(record["SCN"])) < changed.get(table, 0):
            record |= {"STATUS": 2, "INFO": "Dictionary Version Mismatch"}
            marked += 1
    return marked
