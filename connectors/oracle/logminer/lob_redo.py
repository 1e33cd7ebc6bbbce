"""The PL/SQL LogMiner writes for LOB changes, and the LOB values they make.

A LOB value too long for a DML statement reaches the redo as a sequence of rows of one
transaction after the row's INSERT or UPDATE (Oracle Database Utilities, "LogMiner",
"Supported Data Types"; the shapes as Debezium's ``SelectLobParser``/``LobWriteParser``
read them)::

    SEL_LOB_LOCATOR  DECLARE loc_c CLOB; buf_c VARCHAR2(6216); BEGIN
                     select "DOC" into loc_c from "SHOP"."NOTES" where "ID" = '1' and
                     ROWID = 'AAAR3s...' for update;
    LOB_WRITE        buf_c := 'first part'; dbms_lob.write(loc_c, 10, 1, buf_c);
    LOB_WRITE        buf_c := 'second part'; dbms_lob.write(loc_c, 11, 11, buf_c);
    LOB_TRIM         dbms_lob.trim(loc_c, 21);
    LOB_ERASE        dbms_lob.erase(loc_c, 5, 3);

``loc_c``/``buf_c`` are a CLOB's (``loc_nc`` an NCLOB's), ``loc_b``/``buf_b`` with
``HEXTORAW('..')`` a BLOB's. Offsets count from 1, in characters (CLOB) or bytes (BLOB).
``LobValue`` applies them to the value the column held in the transaction; where that value
is not known (a LOB of a row this transaction did not write), the column is ``UNAVAILABLE``
and read as of the commit instead (``unavailable_columns``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from connectors.oracle.errors import RedoParseError
from connectors.oracle.logminer.redo_parser import parse_expression
from connectors.oracle.logminer.redo_values import to_value
from merkle import types as lt

_NAME = r'"((?:[^"]|"")+)"'
_LOCATOR = re.compile(
    rf"select\s+{_NAME}\s+into\s+loc_(\w+)\s+from\s+{_NAME}\.{_NAME}\s.*?for\s+update",
    re.IGNORECASE | re.DOTALL,
)
_WRITE = re.compile(
    r"buf_(\w+)\s*:=\s*(?P<value>.*?)\s*;\s*dbms_lob\.write\(\s*loc_\w+\s*,\s*(?P<amount>\d+)"
    r"\s*,\s*(?P<offset>\d+)\s*,\s*buf_\w+\s*\)\s*;",
    re.IGNORECASE | re.DOTALL,
)
_TRIM = re.compile(r"dbms_lob\.trim\(\s*loc_\w+\s*,\s*(?P<length>\d+)\s*\)", re.IGNORECASE)
_ERASE = re.compile(
    r"dbms_lob\.erase\(\s*loc_\w+\s*,\s*(?P<amount>\d+)\s*,\s*(?P<offset>\d+)\s*\)",
    re.IGNORECASE,
)
# The longest LOB value assembled in memory (characters or bytes); a longer one is read as
# of its commit, like a value whose start is not in the redo.
MAX_LOB_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class LobLocator:
    """A ``SEL_LOB_LOCATOR`` row: the column the following fragments write, and whether it
    is binary (a BLOB)."""

    column: str
    binary: bool


def has_locator(sql_redo: str) -> bool:
    """Whether a row's PL/SQL selects a LOB locator (``LOB_TRIM`` rows may)."""
    return _LOCATOR.search(sql_redo) is not None


def parse_locator(sql_redo: str) -> LobLocator:
    """The column a ``SEL_LOB_LOCATOR`` row selects.

    Raises:
        RedoParseError: Not the ``select ... into loc_x ... for update`` LogMiner writes.
    """
    found = _LOCATOR.search(sql_redo)
    if found is None:
        raise RedoParseError("a SEL_LOB_LOCATOR row without its select ... for update")
    return LobLocator(found[1].replace('""', '"'), found[2].lower().startswith("b"))


@dataclass
class LobValue:
    """A LOB column's value while its fragments are applied (None: not known: the value
    the column held before this transaction's fragments is not in the redo read).

    Over a value not known, writes from offset 1 on still make a known prefix; a trim to
    no more than that prefix makes the whole value known (a client rewriting a LOB in place
    writes it from the start, then trims the old tail)."""

    binary: bool
    value: str | bytes | None
    prefix: str | bytes = ""

    def apply(self, operation: str, sql_redo: str) -> None:
        """Apply one ``LOB_WRITE``, ``LOB_TRIM`` or ``LOB_ERASE`` row.

        Raises:
            RedoParseError: The text is not the PL/SQL LogMiner writes for it.
        """
        if operation == "LOB_WRITE":
            for found in _WRITE.finditer(sql_redo):
                self._write(int(found["offset"]), self._buffer(found["value"]))
            if _WRITE.search(sql_redo) is None:
                raise RedoParseError("a LOB_WRITE row without its dbms_lob.write")
        elif operation == "LOB_TRIM":
            trimmed = _TRIM.search(sql_redo)
            if trimmed is None:
                raise RedoParseError("a LOB_TRIM row without its dbms_lob.trim")
            length = int(trimmed["length"])
            self.value = self._empty() if length == 0 else self._cut(length)
            self.prefix = self.prefix[:length]
        elif operation == "LOB_ERASE":
            erased = _ERASE.search(sql_redo)
            if erased is None:
                raise RedoParseError("a LOB_ERASE row without its dbms_lob.erase")
            amount, offset = int(erased["amount"]), int(erased["offset"])
            self._write(offset, self._fill(amount))  # CLOB: spaces, BLOB: zero bytes
        else:
            raise RedoParseError(f"{operation} is not a LOB fragment operation")

    def _buffer(self, text: str) -> str | bytes:
        ltype = lt.BytesType() if self.binary else lt.StringType()
        value = to_value(parse_expression(text), ltype)
        if not isinstance(value, str | bytes):
            raise RedoParseError("a LOB_WRITE buffer that is no value")
        return value

    def _write(self, offset: int, data: str | bytes) -> None:
        if self.value is None:  # over a value not known: only a prefix from offset 1 is
            known = self.prefix or self._empty()
            covered = offset - 1 <= len(known) and len(known) + len(data) <= MAX_LOB_BYTES
            start = offset - 1
            self.prefix = known[:start] + data + known[start + len(data) :] if covered else ""  # type: ignore[operator]
            return
        start = offset - 1
        head = self.value[:start]
        head = head + self._fill(start - len(head))  # type: ignore[operator]
        self.value = head + data + self.value[start + len(data) :]  # type: ignore[operator]
        if len(self.value) > MAX_LOB_BYTES:
            self.value = None  # too long to hold here: read as of the commit instead

    def _cut(self, length: int) -> str | bytes | None:
        if self.value is None:  # known when the prefix written reaches the new end
            return self.prefix[:length] if len(self.prefix) >= length else None
        return self.value[:length]

    def _empty(self) -> str | bytes:
        return b"" if self.binary else ""

    def _fill(self, count: int) -> str | bytes:
        return b"\0" * count if self.binary else " " * count
