"""The SQL of HANA's trigger capture, as pure functions (tested without a server).

Every object lives in schema ``REPLCHECK_CAPTURE`` except the triggers, which HANA creates
in their table's schema. Names are the catalog's exact spelling, always delimited.

Idempotence: HANA has no ``IF [NOT] EXISTS`` for tables, sequences or triggers, so each
statement that creates or drops one is an anonymous block (``DO BEGIN ... END``, SAP HANA
SQLScript Reference, "Anonymous Block") that counts the object in the catalog view
(``SYS.SCHEMAS``, ``SYS.TABLES``, ``SYS.SEQUENCES``, ``SYS.TRIGGERS``) and runs the DDL
with ``EXEC`` only when needed: the printed plan runs alike a second time.

Parameters use hdbcli's ``qmark`` style; anonymous blocks carry their names as literals.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cdc_core.errors import ConfigError
from connectors.hana.sql import quote
from connectors.hana.types import HanaColumn

SCHEMA = "REPLCHECK_CAPTURE"
SEQUENCE = "CAPTURE_SEQ"
LOG_PREFIX = "LOG_"
TRIGGER_PREFIX = "REPLCHECK_"
MAX_NAME_CHARS = 127  # HANA's identifier length limit (SQL Reference, "Identifiers")
IN_LIST_CHUNK = 1000  # transaction ids bound per IN list
# The bookkeeping columns of every logging table, before the copied columns.
SEQ, TXID, OP, WRITTEN = "_RC_SEQ", "_RC_TXID", "_RC_OP", "_RC_AT"
META_DECLARATIONS = (
    f"{quote(SEQ)} BIGINT NOT NULL",
    f"{quote(TXID)} BIGINT NOT NULL",
    f"{quote(OP)} VARCHAR(1) NOT NULL",
    f"{quote(WRITTEN)} TIMESTAMP NOT NULL",
)
QUALIFIED_SEQUENCE = f"{quote(SCHEMA)}.{quote(SEQUENCE)}"

SEQUENCE_VALUE = (
    "SELECT CURRENT_VALUE FROM SYS.M_SEQUENCES WHERE SCHEMA_NAME = ? AND SEQUENCE_NAME = ?"
)
SEQUENCE_PARAMS = (SCHEMA, SEQUENCE)
# Every transaction that has written (``UPDATE_TRANSACTION_ID`` is set at its first write,
# the id ``CURRENT_UPDATE_TRANSACTION()`` returns in it) and has not ended.
RUNNING_TRANSACTIONS = (
    "SELECT UPDATE_TRANSACTION_ID FROM SYS.M_TRANSACTIONS WHERE UPDATE_TRANSACTION_ID > 0"
)
BEGIN_SNAPSHOT = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"
DDL_IN_TRANSACTION = "SET TRANSACTION AUTOCOMMIT DDL OFF"
LOG_TABLES = (
    "SELECT TABLE_NAME FROM SYS.TABLES WHERE SCHEMA_NAME = ?"
    " AND TABLE_NAME LIKE 'LOG\\_%' ESCAPE '\\' ORDER BY TABLE_NAME"
)
TABLE_EXISTS = "SELECT COUNT(*) FROM SYS.TABLES WHERE SCHEMA_NAME = ? AND TABLE_NAME = ?"
TRIGGERS_OF = (
    "SELECT TRIGGER_NAME FROM SYS.TRIGGERS WHERE SUBJECT_TABLE_SCHEMA = ?"
    " AND SUBJECT_TABLE_NAME = ? ORDER BY TRIGGER_NAME"
)
SCHEMA_TABLES = (
    "SELECT SCHEMA_NAME, TABLE_NAME FROM SYS.TABLES WHERE SCHEMA_NAME = ? ORDER BY TABLE_NAME"
)


@dataclass(frozen=True, slots=True)
class Located:
    """A table's schema and name, as the catalog spells them."""

    schema: str
    name: str

    @property
    def quoted(self) -> str:
        """``"SCHEMA"."NAME"``."""
        return f"{quote(self.schema)}.{quote(self.name)}"


def log_table(source: Located) -> Located:
    """The logging table of a captured table: ``REPLCHECK_CAPTURE."LOG_<schema>.<table>"``
    (the dot keeps ``A_B.C`` and ``A.B_C`` apart)."""
    return Located(SCHEMA, _short_enough(f"{LOG_PREFIX}{source.schema}.{source.name}", source))


def trigger_names(source: Located) -> tuple[str, str, str]:
    """The insert, update and delete triggers of a captured table (in its schema)."""
    return tuple(  # type: ignore[return-value]
        _short_enough(f"{TRIGGER_PREFIX}{source.name}_{event}", source)
        for event in ("INS", "UPD", "DEL")
    )


def _short_enough(name: str, source: Located) -> str:
    if len(name) > MAX_NAME_CHARS:
        raise ConfigError(
            f"table {source.schema}.{source.name}: its name is too long for trigger capture's"
            f" {name!r} (HANA allows {MAX_NAME_CHARS} characters); rename the table"
        )
    return name


def literal(text: str) -> str:
    """An SQL string literal (anonymous blocks take no bound parameters here)."""
    return "'" + text.replace("'", "''") + "'"


def _counted(view: str, conditions: dict[str, str]) -> str:
    where = " AND ".join(f"{column} = {literal(value)}" for column, value in conditions.items())
    return f"SYS.{view} WHERE {where}"


def _guarded(check: str, wanted: str, statements: Sequence[str]) -> str:
    """An anonymous block running ``statements`` when ``COUNT(*)`` of ``check`` is
    ``wanted`` (``= 0``: missing, ``> 0``: present)."""
    body = "\n".join(f"    EXEC {literal(statement)};" for statement in statements)
    return (
        "DO BEGIN\n  DECLARE OBJECT_COUNT INTEGER;\n"
        f"  SELECT COUNT(*) INTO OBJECT_COUNT FROM {check};\n"
        f"  IF :OBJECT_COUNT {wanted} THEN\n{body}\n  END IF;\nEND"
    )


def create_schema() -> str:
    """The capture schema, unless it exists."""
    check = _counted("SCHEMAS", {"SCHEMA_NAME": SCHEMA})
    return _guarded(check, "= 0", [f"CREATE SCHEMA {quote(SCHEMA)}"])


def create_sequence() -> str:
    """The capture sequence, unless it exists; its first value is taken at once, so that
    ``M_SEQUENCES.CURRENT_VALUE`` is always a value given out (before the first ``NEXTVAL``
    the view's value is not documented). ``NO CACHE``: values are given out in the order
    they are asked for."""
    check = _counted("SEQUENCES", {"SCHEMA_NAME": SCHEMA, "SEQUENCE_NAME": SEQUENCE})
    create = f"CREATE SEQUENCE {QUALIFIED_SEQUENCE} START WITH 1 INCREMENT BY 1 NO CACHE NO CYCLE"
    first = f"SELECT {QUALIFIED_SEQUENCE}.NEXTVAL FROM DUMMY"
    return (
        "DO BEGIN\n  DECLARE OBJECT_COUNT INTEGER;\n  DECLARE TAKEN_VALUE BIGINT;\n"
        f"  SELECT COUNT(*) INTO OBJECT_COUNT FROM {check};\n"
        f"  IF :OBJECT_COUNT = 0 THEN\n    EXEC {literal(create)};\n"
        f"    EXEC {literal(first)} INTO TAKEN_VALUE;\n  END IF;\nEND"
    )


def create_log_table(source: Located, columns: Sequence[HanaColumn]) -> str:
    """The logging table of ``source``, unless it exists: the bookkeeping, then a nullable
    copy of every column (a delete's old row and a new row alike fit)."""
    log = log_table(source)
    copied = [f"{quote(column.name)} {column.declaration}" for column in columns]
    create = f"CREATE COLUMN TABLE {log.quoted} ({', '.join([*META_DECLARATIONS, *copied])})"
    check = _counted("TABLES", {"SCHEMA_NAME": log.schema, "TABLE_NAME": log.name})
    return _guarded(check, "= 0", [create])


def add_log_columns(source: Located, columns: Sequence[HanaColumn]) -> list[str]:
    """The columns added to ``source`` since its logging table was created."""
    log = log_table(source)
    return [
        f"ALTER TABLE {log.quoted} ADD ({quote(column.name)} {column.declaration})"
        for column in columns
    ]


def drop_trigger(source: Located, name: str) -> str:
    """Drop one capture trigger of ``source`` if it exists."""
    check = _counted("TRIGGERS", {"SCHEMA_NAME": source.schema, "TRIGGER_NAME": name})
    return _guarded(check, "> 0", [f"DROP TRIGGER {quote(source.schema)}.{quote(name)}"])


def drop_table(table: Located) -> str:
    """Drop ``table`` if it exists."""
    check = _counted("TABLES", {"SCHEMA_NAME": table.schema, "TABLE_NAME": table.name})
    return _guarded(check, "> 0", [f"DROP TABLE {table.quoted}"])


def drop_schema() -> str:
    """Drop the capture schema (and its sequence) if it exists."""
    check = _counted("SCHEMAS", {"SCHEMA_NAME": SCHEMA})
    return _guarded(check, "> 0", [f"DROP SCHEMA {quote(SCHEMA)} CASCADE"])


def create_triggers(source: Located, columns: Sequence[str], key: Sequence[str]) -> list[str]:
    """The AFTER INSERT, UPDATE and DELETE row triggers of ``source`` (SAP HANA SQL
    Reference, "CREATE TRIGGER": ``REFERENCING NEW ROW ... OLD ROW ... FOR EACH ROW``).

    Inserts record the new row, deletes the old row; an update that keeps the key records
    the new row, one that changes it the old row's delete and the new row's insert (key
    columns are NOT NULL, so ``=`` compares them exactly)."""
    insert, update, delete = trigger_names(source)
    record = _recorder(log_table(source), columns)
    same_key = " AND ".join(f":OLDROW.{quote(k)} = :NEWROW.{quote(k)}" for k in key)
    head = f"CREATE TRIGGER {quote(source.schema)}.{{}} AFTER {{}} ON {source.quoted}"
    return [
        f"{head.format(quote(insert), 'INSERT')} REFERENCING NEW ROW NEWROW FOR EACH ROW\n"
        f"BEGIN\n  {record('c', 'NEWROW')}\nEND",
        f"{head.format(quote(update), 'UPDATE')} REFERENCING NEW ROW NEWROW, OLD ROW OLDROW"
        f" FOR EACH ROW\nBEGIN\n  IF {same_key} THEN\n    {record('u', 'NEWROW')}\n"
        f"  ELSE\n    {record('d', 'OLDROW')}\n    {record('c', 'NEWROW')}\n  END IF;\nEND",
        f"{head.format(quote(delete), 'DELETE')} REFERENCING OLD ROW OLDROW FOR EACH ROW\n"
        f"BEGIN\n  {record('d', 'OLDROW')}\nEND",
    ]


def _recorder(log: Located, columns: Sequence[str]) -> Callable[[str, str], str]:
    """``record(op, row)``: the INSERT of one logging row from transition variable ``row``.
    The sequence value is taken in the writing transaction, at the write."""
    listed = ", ".join(quote(c) for c in [SEQ, TXID, OP, WRITTEN, *columns])

    def record(op: str, row: str) -> str:
        values = ", ".join(f":{row}.{quote(c)}" for c in columns)
        return (
            f"INSERT INTO {log.quoted} ({listed}) VALUES ({QUALIFIED_SEQUENCE}.NEXTVAL,"
            f" CURRENT_UPDATE_TRANSACTION(), '{op}', CURRENT_UTCTIMESTAMP, {values});"
        )

    return record


def _union(logs: Sequence[Located], columns: str) -> str:
    """``columns`` of the rows above a position in every logging table (one ``?`` each)."""
    return " UNION ALL ".join(
        f"SELECT {columns} FROM {log.quoted} WHERE {quote(SEQ)} > ?" for log in logs
    )


def visible_values(logs: Sequence[Located]) -> str:
    """Every visible capture value above ``?`` (one per table), ascending: each row's, so
    that a transaction's values before its last are visible too, not gaps to wait for."""
    return f"{_union(logs, quote(SEQ))} ORDER BY 1"


def committed_transactions(logs: Sequence[Located]) -> str:
    """(transaction, position) of the visible transactions whose position is in
    ``(? [per table], ?]``, by position."""
    union = _union(logs, f"{quote(TXID)}, {quote(SEQ)}")
    return (
        f"SELECT {quote(TXID)}, MAX({quote(SEQ)}) FROM ({union}) AS CAPTURED GROUP BY {quote(TXID)}"
        f" HAVING MAX({quote(SEQ)}) <= ? ORDER BY 2"
    )


def purgeable_transactions(logs: Sequence[Located], limit: int) -> str:
    """Up to ``limit`` transactions whose position is at or below ``?`` (all their rows are:
    a transaction above it keeps its rows at or below it)."""
    union = _union(logs, f"{quote(TXID)}, {quote(SEQ)}")
    return (
        f"SELECT {quote(TXID)} FROM ({union}) AS CAPTURED GROUP BY {quote(TXID)}"
        f" HAVING MAX({quote(SEQ)}) <= ? ORDER BY MAX({quote(SEQ)}) LIMIT {int(limit)}"
    )


def transaction_rows(log: Located, columns: Sequence[str], transactions: int) -> str:
    """The logging rows of ``transactions`` transactions (``?`` each) at or below ``?``."""
    listed = ", ".join(quote(c) for c in [SEQ, TXID, OP, WRITTEN, *columns])
    marks = ", ".join(["?"] * transactions)
    return (
        f"SELECT {listed} FROM {log.quoted} WHERE {quote(SEQ)} <= ?"
        f" AND {quote(TXID)} IN ({marks}) ORDER BY {quote(SEQ)}"
    )


def delete_transactions(log: Located, transactions: int) -> str:
    """Delete the rows of ``transactions`` transactions (``?`` each) at or below ``?``."""
    marks = ", ".join(["?"] * transactions)
    return f"DELETE FROM {log.quoted} WHERE {quote(SEQ)} <= ? AND {quote(TXID)} IN ({marks})"


def count_rows(log: Located) -> str:
    """The rows of one logging table."""
    return f"SELECT COUNT(*) FROM {log.quoted}"


def lock_exclusive(source: Located) -> str:
    """The table lock the initial snapshot takes for an instant (SAP HANA SQL Reference,
    "LOCK TABLE"): it conflicts with the intention lock every writer of the table holds to
    its transaction's end, so it is granted only when none runs, and keeps new writers out
    until released. NOWAIT: an error at once rather than a wait."""
    return f"LOCK TABLE {source.quoted} IN EXCLUSIVE MODE NOWAIT"


def chunks(values: Sequence[int]) -> list[Sequence[int]]:
    """``values`` in IN-list sized pieces."""
    return [values[i : i + IN_LIST_CHUNK] for i in range(0, len(values), IN_LIST_CHUNK)]
