"""A parser for the DML text LogMiner puts in ``SQL_REDO`` and ``SQL_UNDO``.

LogMiner reconstructs each row change as one statement (Oracle Database Utilities,
"LogMiner", "Interpreting Results of LogMiner Queries")::

    insert into "OWNER"."TABLE"("A","B") values ('1',TO_DATE('...', 'YYYY-MM-DD HH24:MI:SS'));
    update "OWNER"."TABLE" set "B" = 'x' where "B" = 'y' and ROWID = 'AAAS...';
    delete from "OWNER"."TABLE" where "A" = '1' and "B" IS NULL and ROWID = 'AAAS...';

Shapes seen in real output and handled here (several from Debezium's LogMinerDmlParser
tests): quoted identifiers with spaces and special characters (``"COL 1"``, ``"OBJ# 74858"``),
``''`` escapes, ``NULL`` both as a value and as ``= NULL`` in a where-clause, ``IS NULL``,
function calls (``TO_DATE``, ``TO_TIMESTAMP[_TZ]``, ``TO_[YM|DS]INTERVAL``, ``HEXTORAW``,
``UNISTR``, ``EMPTY_[CB]LOB()``) joined with ``||``, ``Unsupported Type``, table aliases
(``update "T" a set a."C" = ...``), statements with or without ``;`` and ``ROWID =`` terms,
and values of any length (CSF continuations joined by the caller).

The parser only builds an expression tree; ``redo_values`` types it by the table's columns.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Literal, NamedTuple, TypeVar

from connectors.oracle.errors import RedoParseError


@dataclass(frozen=True, slots=True)
class Text:
    """A string literal (``quoted``) or a bare number, exactly as written (escapes undone)."""

    value: str
    quoted: bool = True


@dataclass(frozen=True, slots=True)
class Call:
    """A function call such as ``TO_DATE('...', 'fmt')``; ``name`` is upper case."""

    name: str
    args: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Concat:
    """``a || b || ...``."""

    parts: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Null:
    """SQL ``NULL`` (also what ``IS NULL`` in a where-clause says about a column)."""


@dataclass(frozen=True, slots=True)
class Unsupported:
    """LogMiner's ``Unsupported Type``: the value exists but the redo does not show it."""


Expr = Text | Call | Concat | Null | Unsupported
DmlOp = Literal["c", "u", "d"]
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class RedoStatement:
    """One parsed LogMiner DML statement.

    Args:
        op: ``c`` insert, ``u`` update, ``d`` delete.
        owner: The schema, or ``None`` when the statement names none.
        table: The table name, exact case.
        values: Insert values or update ``set`` assignments, in statement order.
        where: Where-clause terms ``column = value`` (``IS NULL`` gives ``Null()``).
        rowid: The ``ROWID = '...'`` term of the where-clause, if any.
    """

    op: DmlOp
    owner: str | None
    table: str
    values: tuple[tuple[str, Expr], ...] = ()
    where: tuple[tuple[str, Expr], ...] = ()
    rowid: str | None = None


_TOKEN = re.compile(
    r"""\s*(?:
      (?P<string>'[^']*(?:''[^']*)*')
    | (?P<quoted>"[^"]*(?:""[^"]*)*")
    | (?P<number>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)
    | (?P<concat>\|\|)
    | (?P<punct>[(),.=;])
    | (?P<word>[A-Za-z_][A-Za-z0-9_$#]*)
    )""",
    re.VERBOSE,
)


class _Token(NamedTuple):
    # A NamedTuple, not a frozen dataclass: tokens are made by the million and a frozen
    # dataclass's __init__ costs several times more (bench/bench_oracle_redo.py).
    kind: str
    text: str
    at: int


def _tokens(sql: str) -> Iterator[_Token]:
    position, end = 0, len(sql.rstrip())
    while position < end:
        match = _TOKEN.match(sql, position)
        if match is None or match.lastgroup is None:
            raise RedoParseError(f"unexpected character at offset {position} of a statement")
        kind = match.lastgroup
        yield _Token(kind, match.group(kind), match.start(kind))
        position = match.end()


class _Parser:
    """Recursive descent over the tokens of one statement."""

    def __init__(self, sql: str) -> None:
        self.tokens = list(_tokens(sql))
        self.index = 0

    # -- token helpers ----------------------------------------------------------------
    def peek(self, offset: int = 0) -> _Token | None:
        at = self.index + offset
        return self.tokens[at] if at < len(self.tokens) else None

    def next(self) -> _Token:
        token = self.peek()
        if token is None:
            raise RedoParseError("a LogMiner statement ends too early")
        self.index += 1
        return token

    def is_word(self, word: str, offset: int = 0) -> bool:
        token = self.peek(offset)
        return token is not None and token.kind == "word" and token.text.upper() == word

    def is_punct(self, text: str) -> bool:
        token = self.peek()
        return token is not None and token.kind in ("punct", "concat") and token.text == text

    def expect_word(self, word: str) -> None:
        token = self.next()
        if token.kind != "word" or token.text.upper() != word:
            raise RedoParseError(f"expected {word} at offset {token.at}, found {token.kind}")

    def expect(self, text: str) -> None:
        token = self.next()
        if token.text != text:
            raise RedoParseError(f"expected {text!r} at offset {token.at}, found {token.kind}")

    # -- grammar ----------------------------------------------------------------------
    def statement(self) -> RedoStatement:
        head = self.next()
        verb = head.text.upper() if head.kind == "word" else ""
        if verb == "INSERT":
            statement = self.insert()
        elif verb == "UPDATE":
            statement = self.update()
        elif verb == "DELETE":
            statement = self.delete()
        else:
            raise RedoParseError("a LogMiner DML statement starts with insert, update or delete")
        if self.is_punct(";"):
            self.next()
        trailing = self.peek()
        if trailing is not None:
            raise RedoParseError(f"unexpected text after the statement at offset {trailing.at}")
        return statement

    def insert(self) -> RedoStatement:
        self.expect_word("INTO")
        owner, table = self.table_name()
        self.expect("(")
        columns = self.separated(self.identifier)
        self.expect(")")
        self.expect_word("VALUES")
        self.expect("(")
        values = self.separated(self.expression)
        self.expect(")")
        if len(columns) != len(values):
            raise RedoParseError(
                f"an insert names {len(columns)} columns but has {len(values)} values"
            )
        return RedoStatement("c", owner, table, tuple(zip(columns, values, strict=True)))

    def update(self) -> RedoStatement:
        owner, table = self.table_name()
        self.skip_alias("SET")
        self.expect_word("SET")
        values = self.separated(self.assignment)
        where, rowid = self.where()
        return RedoStatement("u", owner, table, tuple(values), where, rowid)

    def delete(self) -> RedoStatement:
        self.expect_word("FROM")
        owner, table = self.table_name()
        self.skip_alias("WHERE")
        where, rowid = self.where()
        return RedoStatement("d", owner, table, (), where, rowid)

    def table_name(self) -> tuple[str | None, str]:
        first = self.identifier()
        if self.is_punct("."):
            self.next()
            return first, self.identifier()
        return None, first

    def skip_alias(self, keyword: str) -> None:
        token = self.peek()
        if token is not None and token.kind == "word" and not self.is_word(keyword):
            self.next()  # ``update "T" a set a."C" = ...``: the alias adds nothing

    def identifier(self) -> str:
        token = self.next()
        if token.kind == "quoted":
            return token.text[1:-1].replace('""', '"')
        if token.kind == "word":
            return token.text.upper()  # unquoted identifiers are upper case in Oracle
        raise RedoParseError(f"expected an identifier at offset {token.at}, found {token.kind}")

    def column(self) -> str:
        name = self.identifier()
        if self.is_punct("."):  # alias-qualified: a."COL"
            self.next()
            name = self.identifier()
        return name

    def assignment(self) -> tuple[str, Expr]:
        name = self.column()
        self.expect("=")
        return name, self.expression()

    def where(self) -> tuple[tuple[tuple[str, Expr], ...], str | None]:
        if self.peek() is None or self.is_punct(";"):
            return (), None
        self.expect_word("WHERE")
        terms, rowid = [], None
        while True:
            name, value = self.condition()
            if name == "ROWID" and isinstance(value, Text):
                rowid = value.value
            else:
                terms.append((name, value))
            if not self.is_word("AND"):
                return tuple(terms), rowid
            self.next()

    def condition(self) -> tuple[str, Expr]:
        name = self.column()
        if self.is_word("IS"):
            self.next()
            self.expect_word("NULL")
            return name, Null()
        self.expect("=")
        return name, self.expression()

    def separated(self, item: Callable[[], _T]) -> list[_T]:
        items = [item()]
        while self.is_punct(","):
            self.next()
            items.append(item())
        return items

    def expression(self) -> Expr:
        parts = [self.term()]
        while self.is_punct("||"):
            self.next()
            parts.append(self.term())
        return parts[0] if len(parts) == 1 else Concat(tuple(parts))

    def term(self) -> Expr:
        token = self.next()
        if token.kind == "string":
            return Text(token.text[1:-1].replace("''", "'"))
        if token.kind == "number":
            return Text(token.text, quoted=False)
        if token.kind != "word":
            raise RedoParseError(f"expected a value at offset {token.at}, found {token.kind}")
        word = token.text.upper()
        if word == "NULL":
            return Null()
        if word == "UNSUPPORTED" and self.is_word("TYPE"):
            self.next()
            return Unsupported()
        if self.is_punct("("):
            return self.call(word)
        raise RedoParseError(f"unexpected word at offset {token.at} where a value belongs")

    def call(self, name: str) -> Call:
        self.expect("(")
        if self.is_punct(")"):
            self.next()
            return Call(name, ())
        args = self.separated(self.expression)
        self.expect(")")
        return Call(name, tuple(args))


def parse_redo(sql: str) -> RedoStatement:
    """Parse one LogMiner ``SQL_REDO`` or ``SQL_UNDO`` DML statement.

    Raises:
        RedoParseError: The text is not an insert, update or delete of the shape LogMiner
            generates (the message gives the offset, never the statement's values).
    """
    return _Parser(sql).statement()


def parse_expression(text: str) -> Expr:
    """Parse one value expression as LogMiner writes it (a literal, a call, a ``||`` chain):
    a LOB fragment's buffer (``lob_redo``).

    Raises:
        RedoParseError: The text is not one such expression.
    """
    parser = _Parser(text)
    expr = parser.expression()
    trailing = parser.peek()
    if trailing is not None:
        raise RedoParseError(f"unexpected text after a value at offset {trailing.at}")
    return expr
