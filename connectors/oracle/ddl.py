"""DDL of a captured table (V$LOGMNR_CONTENTS ``OPERATION_CODE`` 5), classified.

LogMiner shows a DDL statement as the session ran it, in ``SQL_REDO`` (Oracle Database
Utilities, "LogMiner", "DDL_DICT_TRACKING"). ``classify_ddl`` reads that text and says what
the pipeline must do (``cdc_core.capture.source.TableChanged``: DESIGN.md, "DDL that changes stored
rows") and what the table's columns are afterwards, so later SQL_REDO parses with them:

- ``schema`` (values stay): ``ADD`` of a nullable column without ``DEFAULT`` (existing rows
  are NULL in it), ``MODIFY`` of a column's default, nullability or visibility, or of a
  ``VARCHAR2``/``NVARCHAR2``/``RAW`` length (a shorter length fails on a value that does
  not fit, so no value changes).
- ``refresh`` (stored values may have changed without row events): ``ADD`` with a
  ``DEFAULT`` (Oracle 11g+ adds it as metadata only: existing rows show the default, and no
  redo says so -- SQL Language Reference, "ALTER TABLE", "ADD ... DEFAULT"), ``ADD ... NOT
  NULL``, virtual and identity columns, any other ``MODIFY`` of a type, ``DROP COLUMN``,
  ``SET UNUSED``, ``RENAME COLUMN``; partition maintenance that removes or swaps rows
  (``DROP``/``TRUNCATE``/``EXCHANGE PARTITION``) or gives rows new ROWIDs, which locate rows
  in the row image store (``MOVE``, ``SHRINK SPACE``, ``SPLIT``/``MERGE``/``MOVE``/
  ``COALESCE PARTITION``); ``CREATE TABLE`` and ``FLASHBACK TABLE`` of a captured name; any
  ``ALTER TABLE`` clause not known here.
- ``stop``: ``DROP TABLE`` and ``RENAME`` of a captured table: its changes no longer arrive
  under the captured name, so the pipeline cannot follow it on its own.
- ``TRUNCATE TABLE`` is a ``t`` change (``truncate``); constraints, indexes, grants,
  comments, supplemental logging and storage clauses change no stored value (``None``).

Re-reading a statement the dictionary already reflects (a live reader reflects the table as
it is now, then mines from an older position) changes nothing: adding a column it has,
dropping one it lacks.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import NamedTuple

from cdc_core.capture.source import DdlAction
from connectors.model import SourceColumn, TableSchema
from connectors.oracle.types import OracleColumn, declared_type, logical_type

_TOKEN = re.compile(
    r"""\s*(?:(?P<string>'(?:[^']|'')*')|(?P<quoted>"(?:[^"]|"")*")
    |(?P<word>[A-Za-z_][A-Za-z0-9_$#]*)|(?P<number>\d+)|(?P<other>\S))""",
    re.VERBOSE,
)
_SEVERITY: dict[DdlAction | None, int] = {None: 0, "schema": 1, "refresh": 2, "stop": 3}
_CONSTRAINT_HEADS = frozenset(
    {"CONSTRAINT", "PRIMARY", "UNIQUE", "FOREIGN", "CHECK", "SUPPLEMENTAL", "PERIOD", "SCOPE"}
)
_LENGTH_ONLY = frozenset({"VARCHAR2", "NVARCHAR2", "RAW"})
# ALTER TABLE clauses that change no stored value and no ROWID (storage, logging, state).
_HARMLESS = frozenset({
    "ENABLE", "DISABLE", "LOGGING", "NOLOGGING", "PARALLEL", "NOPARALLEL", "CACHE", "NOCACHE",
    "PCTFREE", "PCTUSED", "INITRANS", "MAXTRANS", "STORAGE", "READ", "COMPRESS", "NOCOMPRESS",
    "ROW", "DEALLOCATE", "ALLOCATE", "FLASHBACK", "NO", "MONITORING", "NOMONITORING",
    "INMEMORY", "RESULT_CACHE", "ANNOTATIONS", "UPGRADE",
})  # fmt: skip
_DROPPED_FIX = (
    "remove it from the pipeline's tables (the lake keeps what it replicated), or re-create"
    " it and re-snapshot it"
)
_RENAMED_FIX = (
    "its changes no longer come under this name: capture the new name (its initial load"
    " reads it) and remove the old one from the pipeline's tables"
)
_NOT_COLUMNS = frozenset({"PARTITION", "SUBPARTITION", "LOB", "DEFAULT", "NESTED", "VARRAY"})
"""What MODIFY may name instead of columns (partition attributes, LOB storage, ...)."""
_ROW_MAINTENANCE = {
    "TRUNCATE": "a partition's rows were removed without row events",
    "EXCHANGE": "a partition's rows were swapped with another table's without row events",
    "SPLIT": "rows moved to new partitions, so their ROWIDs changed",
    "MERGE": "rows moved to a merged partition, so their ROWIDs changed",
    "COALESCE": "rows moved between hash partitions, so their ROWIDs changed",
    "MOVE": "the table or a partition moved, so its rows' ROWIDs changed",
    "SHRINK": "SHRINK SPACE moved rows, so their ROWIDs changed",
}


@dataclass(frozen=True, slots=True)
class DdlOutcome:
    """What one DDL statement means for a captured table.

    Args:
        action: What the pipeline must do; ``None`` when no stored value changed.
        schema: The table's columns after the statement.
        reason: Why (for the log and for errors; with the fix when ``action`` is stop).
        truncate: The statement is ``TRUNCATE TABLE`` (a ``t`` change instead).
    """

    action: DdlAction | None
    schema: TableSchema
    reason: str = ""
    truncate: bool = False


def classify_ddl(text: str, schema: TableSchema) -> DdlOutcome:
    """Classify the DDL ``text`` LogMiner showed for the captured table ``schema``."""
    statement = _Statement(text, schema)
    statement.run()
    return statement.outcome()


class _Token(NamedTuple):
    kind: str
    text: str


def _tokens(text: str) -> list[_Token]:
    found = []
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup or "other"
        found.append(_Token(kind, match.group(kind)))
    return found


def _identifier(token: _Token) -> str:
    if token.kind == "quoted":
        return token.text[1:-1].replace('""', '"')
    return token.text.upper()  # unquoted identifiers are upper case in Oracle


class _Cursor:
    """Tokens of one statement with look-ahead; words compare in upper case."""

    def __init__(self, tokens: list[_Token]) -> None:
        self.tokens = tokens
        self.at = 0

    def done(self) -> bool:
        return self.at >= len(self.tokens)

    def word(self, offset: int = 0) -> str:
        index = self.at + offset
        if index >= len(self.tokens) or self.tokens[index].kind != "word":
            return ""
        return self.tokens[index].text.upper()

    def accept(self, *words: str) -> bool:
        """Consume ``words`` if they come next."""
        if all(self.word(i) == word for i, word in enumerate(words)):
            self.at += len(words)
            return True
        return False

    def is_text(self, text: str) -> bool:
        return not self.done() and self.tokens[self.at].text == text

    def take(self) -> _Token:
        token = self.tokens[self.at]
        self.at += 1
        return token

    def rest(self) -> list[_Token]:
        """Every token left (a clause without parentheses runs to the statement's end)."""
        rest = [t for t in self.tokens[self.at :] if t.text != ";"]
        self.at = len(self.tokens)
        return rest

    def items(self) -> list[list[_Token]]:
        """A parenthesized list, split at its top-level commas, or what is left."""
        if not self.is_text("("):
            return [self.rest()]
        self.take()
        items: list[list[_Token]] = [[]]
        depth = 0
        while not self.done():
            token = self.take()
            depth += {"(": 1, ")": -1}.get(token.text, 0)
            if depth < 0:
                break
            if depth == 0 and token.text == ",":
                items.append([])
            else:
                items[-1].append(token)
        return [item for item in items if item]


class _Statement:
    """One DDL statement applied to a working copy of the table's columns."""

    def __init__(self, text: str, schema: TableSchema) -> None:
        self.cursor = _Cursor(_tokens(text))
        self.schema = schema
        self.columns = list(schema.columns)
        self.action: DdlAction | None = None
        self.reasons: list[str] = []
        self.truncate = False

    def outcome(self) -> DdlOutcome:
        key = tuple(c for c in self.schema.primary_key if any(x.name == c for x in self.columns))
        schema = TableSchema(self.schema.table, tuple(self.columns), key)
        return DdlOutcome(self.action, schema, "; ".join(self.reasons), self.truncate)

    def note(self, action: DdlAction | None, reason: str) -> None:
        """Keep the strongest action; the reasons of that action explain it."""
        if _SEVERITY[action] > _SEVERITY[self.action]:
            self.action, self.reasons = action, []
        if action is not None and action == self.action:
            self.reasons.append(reason)

    # -- statements ------------------------------------------------------------------------
    def run(self) -> None:
        cursor, table = self.cursor, self.schema.table
        if cursor.accept("TRUNCATE", "TABLE"):
            self.truncate = True
        elif cursor.accept("ALTER", "TABLE"):
            self.table_name()
            self.alter_clauses()
        elif cursor.accept("DROP", "TABLE"):
            self.note("stop", f"table {table} was dropped; {_DROPPED_FIX}")
        elif cursor.accept("RENAME"):
            self.renamed()
        elif cursor.accept("CREATE", "TABLE"):
            self.note("refresh", f"table {table} was created again")
        elif cursor.accept("FLASHBACK", "TABLE"):
            self.note("refresh", "FLASHBACK TABLE changed rows without row events")

    def renamed(self) -> None:
        self.note("stop", f"table {self.schema.table} was renamed; {_RENAMED_FIX}")

    def table_name(self) -> None:
        self.cursor.take()
        if self.cursor.is_text("."):
            self.cursor.take()
            self.cursor.take()

    def alter_clauses(self) -> None:
        handlers: dict[str, Callable[[], None]] = {
            "ADD": self.add, "MODIFY": self.modify, "DROP": self.drop,
            "SET": self.set_unused, "RENAME": self.rename,
        }  # fmt: skip
        cursor = self.cursor
        while not cursor.done():
            if cursor.is_text(";"):
                cursor.take()
                continue
            word = cursor.word()
            cursor.take()
            if word in handlers:
                handlers[word]()
            elif word in _ROW_MAINTENANCE:
                self.note("refresh", _ROW_MAINTENANCE[word])
                cursor.rest()
            elif word not in _HARMLESS:
                self.note("refresh", f"unknown ALTER TABLE clause {word or '?'}")
                cursor.rest()
            else:
                cursor.rest()

    # -- ALTER TABLE clauses -----------------------------------------------------------------
    def add(self) -> None:
        if self.cursor.word() in _CONSTRAINT_HEADS | {"PARTITION", "SUBPARTITION"}:
            self.cursor.rest()  # a constraint, or a new (empty) partition
            return
        for item in self.cursor.items():
            if item[0].text.upper() not in _CONSTRAINT_HEADS:
                self.add_column(item)

    def add_column(self, item: list[_Token]) -> None:
        name = _identifier(item[0])
        data_type, properties = _datatype(item[1:])
        if data_type is not None and self.find(name) is None:
            self.columns.append(_column(name, data_type, "NOT NULL" not in properties))
        self.note(*_added(name, properties))

    def modify(self) -> None:
        if self.cursor.word() in _CONSTRAINT_HEADS | _NOT_COLUMNS:
            self.cursor.rest()  # constraint state, partition attributes, LOB storage
            return
        for item in self.cursor.items():
            self.modify_column(item)

    def modify_column(self, item: list[_Token]) -> None:
        name = _identifier(item[0])
        index = self.find(name)
        data_type, properties = _datatype(item[1:])
        if index is None:
            self.note("refresh", f"MODIFY of column {name}, which the dictionary lacks")
            return
        old = self.columns[index]
        if data_type is not None:
            nullable = "NOT NULL" not in properties and old.nullable
            self.columns[index] = _column(name, data_type, nullable)
            self.note(*_retyped(old, data_type))
        unknown = properties - {"DEFAULT", "NULL", "NOT NULL", "VISIBLE", "INVISIBLE"}
        if unknown:
            self.note("refresh", f"MODIFY of column {name} with {sorted(unknown)}")
        elif data_type is None:
            self.note("schema", f"column {name}'s default, nullability or visibility changed")

    def drop(self) -> None:
        cursor = self.cursor
        if cursor.accept("COLUMN") or cursor.is_text("("):
            names = [_identifier(item[0]) for item in cursor.items()]
            self.remove(names, "dropped")
        elif cursor.accept("UNUSED", "COLUMNS") or cursor.accept("COLUMNS", "CONTINUE"):
            cursor.rest()  # unused columns left the dictionary when they were set unused
        elif cursor.word() in ("PARTITION", "SUBPARTITION"):
            self.note("refresh", "a partition's rows were removed without row events")
            cursor.rest()
        elif cursor.word() in _CONSTRAINT_HEADS:
            cursor.rest()
        else:
            self.note("refresh", f"unknown DROP clause {cursor.word() or '?'}")
            cursor.rest()

    def set_unused(self) -> None:
        if not self.cursor.accept("UNUSED"):
            self.note("refresh", f"unknown SET clause {self.cursor.word() or '?'}")
            self.cursor.rest()
            return
        self.cursor.accept("COLUMN")
        self.remove([_identifier(item[0]) for item in self.cursor.items()], "set unused")

    def rename(self) -> None:
        cursor = self.cursor
        if cursor.accept("COLUMN"):
            old, new = _identifier(cursor.take()), ""
            if cursor.accept("TO") and not cursor.done():
                new = _identifier(cursor.take())
            self.rename_column(old, new)
        elif cursor.accept("TO"):
            self.renamed()
            cursor.rest()
        else:
            cursor.rest()  # RENAME CONSTRAINT / PARTITION: no stored value changes

    # -- the working dictionary ------------------------------------------------------------
    def find(self, name: str) -> int | None:
        for index, column in enumerate(self.columns):
            if column.name == name:
                return index
        return None

    def remove(self, names: list[str], how: str) -> None:
        self.columns = [column for column in self.columns if column.name not in names]
        self.note("refresh", f"columns {names} {how}")

    def rename_column(self, old: str, new: str) -> None:
        index = self.find(old)
        if index is not None and new:
            self.columns[index] = replace(self.columns[index], name=new)
        self.note("refresh", f"column {old} renamed to {new or '?'}")


def _added(name: str, properties: frozenset[str]) -> tuple[DdlAction, str]:
    if properties & {"AS", "GENERATED"}:
        return "refresh", f"column {name} added as a virtual or identity column"
    if "DEFAULT" in properties:
        return "refresh", (
            f"column {name} added with a DEFAULT: existing rows show it without redo"
        )
    if "NOT NULL" in properties:
        return "refresh", f"column {name} added NOT NULL"
    return "schema", f"nullable column {name} added without a default"


def _retyped(old: SourceColumn, data_type: OracleColumn) -> tuple[DdlAction, str]:
    base = old.native_type.split("(")[0]
    if base in _LENGTH_ONLY and data_type.data_type == base:
        return "schema", f"column {old.name}'s length changed"
    return "refresh", f"column {old.name} changed type from {old.native_type}"


def _column(name: str, data_type: OracleColumn, nullable: bool) -> SourceColumn:
    column = OracleColumn(name, data_type.data_type, data_type.precision, data_type.scale)
    return SourceColumn(name, column.native_type, logical_type(column), nullable)


def _datatype(tokens: list[_Token]) -> tuple[OracleColumn | None, frozenset[str]]:
    """The declared type at the start of a column definition (``None`` when it has none)
    and the definition's properties (``_properties``)."""
    words = [t.text.upper() if t.kind == "word" else t.text for t in tokens]
    declared, used = declared_type(words)
    return declared, _properties(words[used:])


_AFTER_DEFAULT = frozenset({
    "NOT", "NULL", "CONSTRAINT", "PRIMARY", "UNIQUE", "CHECK", "REFERENCES", "VISIBLE",
    "INVISIBLE", "ENCRYPT", "DECRYPT", "GENERATED", "ENABLE", "DISABLE",
})  # fmt: skip
"""Words that end a DEFAULT expression: the column definition's next property."""


def _properties(words: list[str]) -> frozenset[str]:
    """The property words of a column definition after its type, outside parentheses:
    ``DEFAULT`` (unless ``DEFAULT NULL``, which is no default), ``NOT NULL`` as one, and
    every other word but the names of inline constraints."""
    found: set[str] = set()
    at = 0
    while at < len(words):
        word = words[at]
        if word == "(":
            at = _after_group(words, at)
        elif word == "DEFAULT":
            at = _after_default(words, at + 1, found)
        elif word == "NOT" and words[at + 1 : at + 2] == ["NULL"]:
            found.add("NOT NULL")
            at += 2
        elif word == "CONSTRAINT":
            at += 2  # and its name
        else:
            if word[:1].isalpha():
                found.add(word)
            at += 1
    return frozenset(found)


def _after_group(words: list[str], at: int) -> int:
    depth = 0
    for index in range(at, len(words)):
        depth += {"(": 1, ")": -1}.get(words[index], 0)
        if depth == 0:
            return index + 1
    return len(words)


def _after_default(words: list[str], at: int, found: set[str]) -> int:
    """Skip a DEFAULT expression (noting it, unless it is a bare NULL)."""
    if words[at : at + 2] == ["ON", "NULL"]:
        at += 2
    if words[at : at + 1] == ["NULL"] and (at + 1 == len(words) or words[at + 1] in _AFTER_DEFAULT):
        return at + 1
    found.add("DEFAULT")
    while at < len(words) and words[at] not in _AFTER_DEFAULT:
        at = _after_group(words, at) if words[at] == "(" else at + 1
    return at
