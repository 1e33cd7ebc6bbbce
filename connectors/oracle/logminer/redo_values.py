"""Typing LogMiner's value expressions by the table's columns, and the row images they give.

LogMiner renders values in the mining session's NLS formats (the reader sets them, see
``logminer_sql.SESSION_SETUP``): numbers as text (``'12.50'``, NUMBER becomes ``Decimal``),
DATE as ``TO_DATE('2026-05-01 10:00:00', 'YYYY-MM-DD HH24:MI:SS')``, TIMESTAMP as
``TO_TIMESTAMP('2026-05-01 10:00:00.123')``, zoned values as ``TO_TIMESTAMP_TZ(...)`` with an
offset, a region or both (every mask ``datetimes`` reads), intervals as
``TO_YMINTERVAL('+01-02')`` / ``TO_DSINTERVAL('+01 02:03:04.5')``, RAW as
``HEXTORAW('0e')``, national text as ``UNISTR('\\0412')`` pieces joined with ``||``.
Fractions beyond microseconds are truncated, as python-oracledb does for values it
fetches, so a change and a snapshot read of the same value agree.

Row images (``row_images``): an insert carries every column (a column it does not name is
NULL); an update carries the columns it sets plus what its where-clause holds (the changed
columns' old values and the supplementally logged columns); a delete carries what its
where-clause holds. Every other column is ``ABSENT``: the core's rebuild completes them
from the row image store by ROWID.

A value the text does not pin down (LogMiner's ``Unsupported Type``; a zone region's time
inside a DST overlap, without the abbreviation saying which side) is ``UNAVAILABLE`` where
it is a new value (insert values, update ``set`` terms): the row may have changed it, so the
stored image would be stale, and the rebuild reads it from the source as of the commit
(``cdc_core.rebuild.full_width``; Oracle: ``unavailable_columns``). Where it is an old value (the
where-clause, a SQL_UNDO), it is ``ABSENT``: the stored image holds exactly that value.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from cdc_core.capture.events import ABSENT, UNAVAILABLE
from connectors.model import TableSchema
from connectors.oracle.errors import DictionaryMismatchError, RedoParseError
from connectors.oracle.logminer.datetimes import (
    DATE_FORMAT,
    TIMESTAMP_FORMAT,
    TIMESTAMP_TZ_FORMAT,
    AmbiguousLocalTimeError,
    parse_datetime,
)
from connectors.oracle.logminer.redo_parser import (
    Call,
    Concat,
    Expr,
    Null,
    RedoStatement,
    Text,
    Unsupported,
)
from merkle import types as lt
from merkle.canonical import Interval

_YM = re.compile(r"^\s*(?P<sign>[-+]?)(?P<years>\d+)-(?P<months>\d+)\s*$")
_DS = re.compile(
    r"^\s*(?P<sign>[-+]?)(?P<days>\d+) (?P<h>\d+):(?P<m>\d+):(?P<s>\d+)(?:\.(?P<f>\d*))?\s*$"
)
_UNISTR = re.compile(r"\\\\|\\([0-9A-Fa-f]{4})|[^\\]+")


class _ValueError(RedoParseError):
    """A value that does not fit its column's type (names the column, never the value)."""


def unistr(text: str) -> str:
    """Oracle ``UNISTR``: ``\\XXXX`` is one UTF-16 code unit, ``\\\\`` a backslash."""
    units = bytearray()
    for match in _UNISTR.finditer(text):
        if match.group(1):
            units += bytes.fromhex(match.group(1))
        else:
            literal = "\\" if match.group() == "\\\\" else match.group()
            units += literal.encode("utf-16-be", "surrogatepass")
    return units.decode("utf-16-be", "surrogatepass")


# -- expressions to text, bytes and numbers --------------------------------------------------


def _text(expr: Expr) -> str | None:
    """The character value of ``expr`` (NULL parts of a concatenation count as '')."""
    if isinstance(expr, Null):
        return None
    if isinstance(expr, Text):
        return expr.value
    if isinstance(expr, Concat):
        return "".join(_text(part) or "" for part in expr.parts)
    if isinstance(expr, Call) and expr.name == "UNISTR":
        return unistr(_argument(expr, 0))
    if isinstance(expr, Call) and expr.name == "EMPTY_CLOB":
        return ""  # an empty LOB, not NULL
    raise _ValueError(f"a {_kind(expr)} is not a character value")


def _bytes(expr: Expr) -> bytes | None:
    if isinstance(expr, Null):
        return None
    if isinstance(expr, Concat):
        return b"".join(_bytes(part) or b"" for part in expr.parts)
    if isinstance(expr, Call) and expr.name == "HEXTORAW":
        try:
            return bytes.fromhex(_argument(expr, 0))
        except ValueError as exc:
            raise _ValueError("HEXTORAW holds something other than hex digits") from exc
    if isinstance(expr, Call) and expr.name == "EMPTY_BLOB":
        return b""
    raise _ValueError(f"a {_kind(expr)} is not a binary value")


def _argument(call: Call, index: int) -> str:
    if len(call.args) <= index:
        raise _ValueError(f"{call.name} lacks argument {index + 1}")
    value = _text(call.args[index])
    if value is None:
        raise _ValueError(f"{call.name} has a NULL argument")
    return value


def _kind(expr: Expr) -> str:
    return f"call of {expr.name}" if isinstance(expr, Call) else type(expr).__name__.lower()


def _decimal(expr: Expr) -> Decimal:
    text = _argument(expr, 0) if isinstance(expr, Call) else _text(expr)
    try:
        return Decimal((text or "").strip())
    except InvalidOperation as exc:
        raise _ValueError("a number is not a decimal number") from exc


# -- typed values ------------------------------------------------------------------------------


def _integer(expr: Expr, ltype: lt.LogicalType) -> object:
    number = _decimal(expr)
    if number != number.to_integral_value():
        raise _ValueError("an integer column holds a fraction")
    return int(number)


def _float(expr: Expr, ltype: lt.LogicalType) -> object:
    text = _argument(expr, 0) if isinstance(expr, Call) else _text(expr)
    try:
        return float((text or "").strip())
    except ValueError as exc:
        raise _ValueError("a floating-point column holds something else") from exc


def _timestamp(expr: Expr, ltype: lt.LogicalType) -> object:
    if not isinstance(expr, Call) or expr.name not in ("TO_DATE", "TO_TIMESTAMP"):
        raise _ValueError(f"a {_kind(expr)} is not a timestamp")
    default = DATE_FORMAT if expr.name == "TO_DATE" else TIMESTAMP_FORMAT
    model = _argument(expr, 1) if len(expr.args) > 1 else default
    return parse_datetime(_argument(expr, 0), model).replace(tzinfo=None)


def _timestamp_tz(expr: Expr, ltype: lt.LogicalType) -> object:
    if isinstance(expr, Call) and expr.name == "TO_TIMESTAMP":
        # WITH LOCAL TIME ZONE renders in the session's zone, which the reader sets to UTC.
        model = _argument(expr, 1) if len(expr.args) > 1 else TIMESTAMP_FORMAT
        return parse_datetime(_argument(expr, 0), model).replace(tzinfo=dt.UTC)
    if not isinstance(expr, Call) or expr.name != "TO_TIMESTAMP_TZ":
        raise _ValueError(f"a {_kind(expr)} is not a zoned timestamp")
    model = _argument(expr, 1) if len(expr.args) > 1 else TIMESTAMP_TZ_FORMAT
    value = parse_datetime(_argument(expr, 0), model)
    if value.tzinfo is None:
        raise _ValueError("a zoned timestamp has no zone")
    return value.astimezone(dt.UTC)


def _interval(expr: Expr, ltype: lt.LogicalType) -> object:
    if isinstance(expr, Call) and expr.name == "TO_YMINTERVAL":
        match = _YM.match(_argument(expr, 0))
        if match:
            months = int(match["years"]) * 12 + int(match["months"])
            return Interval(months=-months if match["sign"] == "-" else months)
    if isinstance(expr, Call) and expr.name == "TO_DSINTERVAL":
        match = _DS.match(_argument(expr, 0))
        if match:
            micros = int((match["f"] or "")[:6].ljust(6, "0"))
            value = dt.timedelta(
                days=int(match["days"]), hours=int(match["h"]), minutes=int(match["m"]),
                seconds=int(match["s"]), microseconds=micros,
            )  # fmt: skip
            return -value if match["sign"] == "-" else value
    raise _ValueError(f"a {_kind(expr)} is not an interval")


_TYPED: dict[type[lt.LogicalType], Callable[[Expr, lt.LogicalType], object]] = {
    lt.IntegerType: _integer,
    lt.DecimalType: lambda expr, _: _decimal(expr),
    lt.FloatType: _float,
    lt.StringType: lambda expr, _: _text(expr),
    lt.JsonType: lambda expr, _: _text(expr),
    lt.BytesType: lambda expr, _: _bytes(expr),
    lt.TimestampType: _timestamp,
    lt.TimestampTzType: _timestamp_tz,
    lt.IntervalType: _interval,
}


def to_value(expr: Expr, ltype: lt.LogicalType) -> object:
    """The Python value of ``expr`` in a column of logical type ``ltype``.

    Returns ``None`` for NULL, and ``UNAVAILABLE`` for a value the text does not pin down:
    ``Unsupported Type``, or a region's wall-clock time inside a DST overlap without a
    daylight abbreviation (either instant could be meant).

    Raises:
        RedoParseError: The expression does not fit the type (e.g. text in a NUMBER).
    """
    if isinstance(expr, Null):
        return None
    if isinstance(expr, Unsupported):
        return UNAVAILABLE
    typed = _TYPED.get(type(ltype))
    if typed is None:
        raise _ValueError(f"replcheck cannot read {ltype.name} values from LogMiner")
    try:
        return typed(expr, ltype)
    except AmbiguousLocalTimeError:
        return UNAVAILABLE


# -- row images --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RowImages:
    """The typed images of one statement: ``after`` for inserts and updates, ``before`` for
    updates and deletes; each has every hashable column of the table, ``ABSENT`` if unknown."""

    after: dict[str, object] | None
    before: dict[str, object] | None


def row_images(
    statement: RedoStatement, schema: TableSchema, scn: int = 0, *, undo: bool = False
) -> RowImages:
    """Type ``statement``'s values by ``schema`` (see the module docstring for the rules).

    ``undo``: the statement is a SQL_UNDO, whose values are the row *before* the change.

    Raises:
        DictionaryMismatchError: The statement names a column the table does not have (the
            shape LogMiner falls back to when the table changed after the redo: ``"COL 1"``).
        RedoParseError: A value does not fit its column (names the column only).
    """
    values = _typed(statement.values, schema, scn, ABSENT if undo else UNAVAILABLE)
    where = _typed(statement.where, schema, scn, ABSENT)
    unknown = dict.fromkeys(_columns(schema), ABSENT)
    if statement.op == "c":
        return RowImages(dict.fromkeys(_columns(schema)) | values, None)
    before = unknown | where
    if statement.op == "d":
        return RowImages(None, before)
    return RowImages(before | values, before)


def _columns(schema: TableSchema) -> list[str]:
    return [column.name for column in schema.columns if column.ltype is not None]


def _typed(
    terms: tuple[tuple[str, Expr], ...], schema: TableSchema, scn: int, unrendered: object
) -> dict[str, object]:
    """The typed values of ``terms``; a value the text does not pin down is ``unrendered``."""
    typed: dict[str, object] = {}
    for name, expr in terms:
        try:
            column = schema.column(name)
        except KeyError:
            raise DictionaryMismatchError(
                schema.table, scn, f"the redo names column {name!r}, which the table lacks"
            ) from None
        if column.ltype is None:
            # No value to type (XMLTYPE, LONG RAW ...): the table's description refuses the
            # column by name (``contents.description_of``), so only a pipeline that lists
            # it in ignore_columns reads this table, and drops the column anyway.
            continue
        try:
            value = to_value(expr, column.ltype)
        except RedoParseError as exc:
            raise RedoParseError(
                f"column {name} of table {schema.table} at SCN {scn}: {exc.message}",
                {"table": schema.table, "column": name, "scn": scn},
            ) from exc
        typed[name] = unrendered if value is UNAVAILABLE else value
    return typed
