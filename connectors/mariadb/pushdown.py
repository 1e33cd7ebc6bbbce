"""MariaDB SQL for the database engine (``connectors.pushdown``): canonical payloads, field
framing and MD5 hashes computed by the server.

Every expression reproduces ``merkle.canonical`` exactly (tests replay the golden vectors
through it). Functions: https://mariadb.com/kb/en/built-in-functions/ . Strings are hashed
as UTF-8: a column in another character set is cast (``CAST ... CHARACTER SET utf8mb4``),
so a latin1 column hashes like its text.
A zero date is NULL; a date that is not a calendar date is flagged (``refused_when``) and
fails the comparison with the Python reader's error (``zero_dates``).
"""

from __future__ import annotations

import datetime as dt
import struct
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from connectors.mariadb.zero_dates import refused_sql, zero_sql
from connectors.model import Partition, SourceColumn, TableSchema
from connectors.pushdown import (
    DigestColumn,
    DigestDialect,
    Field,
    NotPushable,
    Payload,
    PayloadWriter,
)
from merkle import types as lt
from merkle.canonical import rounding_epoch
from merkle.options import ComparisonOptions

if TYPE_CHECKING:
    import pyarrow as pa


class MariaDBReads(Protocol):
    """What a digest session takes from the MariaDB connector (``connector.py`` imports this
    module, so the connector is described here by what it offers, not imported)."""

    def connect(self) -> Any: ...

    def begin_snapshot(self, connection: Any) -> int | None: ...

    def read_in(
        self,
        connection: Any,
        table: TableSchema,
        columns: Sequence[str],
        partition: Partition,
        position: int | None,
    ) -> Iterator[pa.RecordBatch]: ...


_INTEGER_NAMES = ("tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year")


def _native(column: SourceColumn) -> str:
    """The type's name: ``decimal(10,2) unsigned`` -> ``decimal``."""
    return column.native_type.lower().split("(")[0].split()[0]


def _precision(column: SourceColumn) -> int:
    """Fractional-second digits of a TIME, DATETIME or TIMESTAMP column (0 when not given)."""
    inside = column.native_type.partition("(")[2].partition(")")[0]
    return int(inside) if inside.isdigit() else 0


def _scale(column: SourceColumn) -> int:
    """The declared scale of a DECIMAL column (0 when not given)."""
    inside = column.native_type.partition("(")[2].partition(")")[0]
    return int(inside.split(",")[1]) if "," in inside else 0


def float_bits_sql(value: str) -> str:
    """The exact ``float`` payload of a DOUBLE: its bits as a signed decimal integer (MariaDB
    keeps neither NaN, infinities nor -0.0; zero is written apart so a -0.0 from arithmetic
    is ``0`` too).

    MariaDB has no function that returns a double's bits, but a dynamic column stores a
    DOUBLE as its 8 IEEE 754 bytes, little-endian, at the end of the blob
    (``dynamic_column_double_store``: ``float8store``, mysys/ma_dyncol.c;
    https://mariadb.com/kb/en/dynamic-columns/). Reversed, they are the big-endian bits,
    and ``CONV`` to base -10 reads them as a signed number
    (https://mariadb.com/kb/en/conv/). A NULL makes an empty blob, hence the NULL test.
    """
    stored = f"COLUMN_CREATE(1, {value} AS DOUBLE)"
    bits = f"CONV(HEX(REVERSE(RIGHT({stored}, 8))), 16, -10)"
    return f"CASE WHEN {value} = 0 THEN '0' WHEN {value} <> 0 THEN {bits} END"


def _double_of_bits(bits: int) -> str:
    """An exact SQL literal of the double with these bits (shortest round-trip digits)."""
    return repr(struct.unpack(">d", bits.to_bytes(8, "big"))[0])


# Doubles whose bits have 19 decimal digits: positive ones from the double with bits 10**18;
# negative ones (bits 2**63 + m, written m - 2**63) while 2**63 - m >= 10**18. Bits of a
# positive double grow with its value, so one comparison each tells the payload's length.
_NINETEEN_DIGITS_FROM = _double_of_bits(10**18)
_TWENTY_CHARACTERS_FROM = "-" + _double_of_bits(2**63 - 10**18)


def float_length_sql(value: str, payload: str) -> str:
    """The length of ``float_bits_sql(value)``: 19 or 20 for all but tiny and huge
    magnitudes (below about 2**-801, above about 2**802), measured for those."""
    return (
        f"CASE WHEN {value} >= {_NINETEEN_DIGITS_FROM} THEN 19"
        f" WHEN {value} < 0 AND {value} >= {_TWENTY_CHARACTERS_FROM} THEN 20"
        f" ELSE LENGTH({payload}) END"
    )


def _text(sql: str) -> str:
    return f"CAST({sql} AS CHAR CHARACTER SET utf8mb4)"


def _number(sql: str) -> str:
    """The decimal text of an integer or DECIMAL expression: the expression itself.

    ``CONCAT``, ``LENGTH`` and ``TRIM`` read a number as its text (``val_str``, the text
    ``CAST(... AS CHAR)`` returns too: ASCII digits, which read alike in any character
    set), and without the cast each use costs about 0.03 s less per 1M rows. Never a
    DOUBLE: its text is not the contract's.
    """
    return sql


def _null_when(ref: str, column: DigestColumn) -> str:
    """The payload is NULL exactly when the column is (``""``: never)."""
    return f"{ref} IS NULL" if column.column.nullable else ""


def _unpadded(ref: str, column: DigestColumn) -> str:
    """The number of a column whose text is padded, without the padding, as the readers
    (drivers, the binlog, JDBC's ``CAST ... AS SIGNED``) give it; arithmetic gives it.

    A ZEROFILL column's text is ``00042``
    (https://mariadb.com/kb/en/numeric-data-type-overview/), and a YEAR's is always four
    digits: YEAR 0000 is the text ``'0000'`` but the number 0
    (https://mariadb.com/kb/en/year-data-type/).
    """
    padded = "zerofill" in column.column.native_type.lower() or _native(column.column) == "year"
    return f"({ref} + 0)" if padded else ref


def _whole_number(ref: str, column: DigestColumn) -> str | None:
    """The decimal text of an integer, YEAR or BIT column (None: another type)."""
    native = _native(column.column)
    if native == "bit":  # a BIT's value is a binary string; as a number it is unsigned
        return _number(f"CAST({ref} AS UNSIGNED)")
    if native in _INTEGER_NAMES:
        return _number(_unpadded(ref, column))
    return None


def _integer(ref: str, column: DigestColumn, *_: Any) -> Payload:
    number = _whole_number(ref, column)
    if number is None:
        raise NotPushable(f"column {column.name}: {column.column.native_type} as integer")
    return Payload(number, null_when=_null_when(ref, column))


def _decimal(ref: str, column: DigestColumn, *_: Any) -> Payload:
    native = _native(column.column)
    null_when = _null_when(ref, column)
    number = _whole_number(ref, column)  # BIGINT UNSIGNED, BIT(64): DECIMAL(20,0) elsewhere
    if number is not None:
        return Payload(number, null_when=null_when)
    if native not in ("decimal", "numeric", "dec", "fixed"):
        raise NotPushable(f"column {column.name}: {column.column.native_type} as decimal")
    if _scale(column.column) == 0:
        return Payload(_number(_unpadded(ref, column)), null_when=null_when)
    # Plain text with the declared scale: drop trailing fractional zeros and a bare point.
    text = _number(_unpadded(ref, column))
    trimmed = f"TRIM(TRAILING '.' FROM TRIM(TRAILING '0' FROM {text}))"
    return Payload(f"IF({ref} = 0, '0', {trimmed})", null_when=null_when)


def _float(ref: str, column: DigestColumn, *_: Any) -> Payload:
    native = _native(column.column)
    ltype = column.ltype
    assert isinstance(ltype, lt.FloatType)
    null_when = _null_when(ref, column)
    if native == "float" and ltype.bits == 32:  # widening is exact
        value = f"CAST({ref} AS DOUBLE)"
    elif native in ("double", "real") and ltype.bits == 64:
        value = ref
    else:
        raise NotPushable(f"column {column.name}: {column.column.native_type} as {ltype}")
    payload = float_bits_sql(value)
    return Payload(payload, null_when=null_when, length=float_length_sql(value, payload))


_TEXT_NAMES = ("char", "varchar", "tinytext", "text", "mediumtext", "longtext")
# https://mariadb.com/kb/en/supported-character-sets-and-collations/: utf8 is utf8mb3.
_UTF8_CHARSETS = ("utf8mb4", "utf8mb3", "utf8")


def _is_utf8_text(column: DigestColumn) -> bool:
    """Whether the column's own characters are UTF-8 bytes already, so its text needs no
    ``CAST(... CHARACTER SET utf8mb4)`` (which copies it: 0.06 s per field per 1M rows)."""
    source = column.column
    return _native(source) in _TEXT_NAMES and (source.charset or "").lower() in _UTF8_CHARSETS


def _string(ref: str, column: DigestColumn, options: ComparisonOptions, *_: Any) -> Payload:
    native = _native(column.column)
    ltype = column.ltype
    assert isinstance(ltype, lt.StringType)
    if native in ("binary", "varbinary") or native.endswith("blob"):
        raise NotPushable(f"column {column.name}: bytes compared as text")
    # CHAR comes back without its padding, as the text protocol reads it.
    value = ref if _is_utf8_text(column) else _text(ref)
    if options.trim_char and ltype.padded:
        value = f"TRIM(TRAILING ' ' FROM {value})"
    if options.empty_string_is_null:  # by length: PAD SPACE collations say ' ' = ''
        return Payload(f"IF(LENGTH({value}) = 0, NULL, {value})")
    return Payload(value, null_when=_null_when(ref, column))


def _bytes(ref: str, column: DigestColumn, options: ComparisonOptions, *_: Any) -> Payload:
    native = _native(column.column)
    if not (native in ("binary", "varbinary") or native.endswith("blob")):
        raise NotPushable(f"column {column.name}: {column.column.native_type} as bytes")
    if options.empty_string_is_null:
        return Payload(f"IF(LENGTH({ref}) = 0, NULL, {ref})", binary=True)
    return Payload(ref, binary=True, null_when=_null_when(ref, column))


def _boolean(ref: str, column: DigestColumn, *_: Any) -> Payload:
    native = _native(column.column)
    if native != "bit" and native not in _INTEGER_NAMES:
        raise NotPushable(f"column {column.name}: {column.column.native_type} as boolean")
    value = f"CASE WHEN {ref} <> 0 THEN '1' WHEN {ref} = 0 THEN '0' END"
    return Payload(value, null_when=_null_when(ref, column))


_EPOCH = dt.datetime(1970, 1, 1)


def _date(ref: str, column: DigestColumn, *_: Any) -> Payload:
    native = _native(column.column)
    if native != "date":
        raise NotPushable(f"column {column.name}: {column.column.native_type} as date")
    days = _number(_unless_zero(ref, f"DATEDIFF({ref}, '1970-01-01')"))
    # 10,000 to 99,999 days: from 1997-05-19 to 2243-10-16
    within = _within_digits(ref, _EPOCH.date(), dt.timedelta(days=1), 5)
    return Payload(days, refused_when=refused_sql(ref), length=_length(within, 5, days))


def _within_digits(ref: str, epoch: dt.date, unit: dt.timedelta, digits: int) -> str:
    """SQL true where the count of ``unit`` from ``epoch`` to the DATE or DATETIME ``ref``
    has ``digits`` digits (a zero or refused value's payload is NULL whatever its length)."""
    low, high = epoch + unit * 10 ** (digits - 1), epoch + unit * 10**digits
    return f"{ref} >= '{low}' AND {ref} < '{high}'"


def _length(condition: str, length: int, payload: str) -> str:
    """``length`` where ``condition`` holds, else the payload's measured length."""
    return f"IF({condition}, {length}, LENGTH({payload}))"


def _unless_zero(ref: str, value: str) -> str:
    """``value``, or NULL for the zero date or TIMESTAMP (``zero_dates``)."""
    return f"IF({zero_sql(ref)}, NULL, {value})"


# Exact microsecond counts of each temporal column (https://mariadb.com/kb/en/date-time-functions/):
# TIME_TO_SEC keeps the fraction and the sign of a TIME; TO_SECONDS counts whole seconds
# from year 0 (cheaper than TIMESTAMPDIFF); UNIX_TIMESTAMP of a TIMESTAMP column is its
# stored instant, whatever the session's time zone.
_TO_SECONDS_EPOCH = 62167219200  # TO_SECONDS('1970-01-01')
_MICROS: dict[tuple[type, str], Callable[[str], str]] = {
    (lt.TimeType, "time"): lambda ref: f"CAST(TIME_TO_SEC({ref}) * 1000000 AS SIGNED)",
    (lt.TimestampType, "datetime"): (
        lambda ref: f"(TO_SECONDS({ref}) - {_TO_SECONDS_EPOCH}) * 1000000 + MICROSECOND({ref})"
    ),
    (lt.TimestampTzType, "timestamp"): (
        lambda ref: f"CAST(UNIX_TIMESTAMP({ref}) * 1000000 AS SIGNED)"
    ),
}


def _temporal(
    ref: str, column: DigestColumn, options: ComparisonOptions, dialect: DigestDialect
) -> Payload:
    native = _native(column.column)
    ltype = column.ltype
    to_micros = _MICROS.get((type(ltype), native))
    if to_micros is None:
        raise NotPushable(f"column {column.name}: {column.column.native_type} as {ltype}")
    digits = options.fraction_digits(ltype)
    micros = to_micros(ref) if native == "time" else _unless_zero(ref, to_micros(ref))
    reduced = digits < _precision(column.column)  # else every stored value is a whole unit
    if reduced:
        rounding = options.rounding
        epoch = rounding_epoch(rounding, ltype)
        micros = dialect.reduce_micros(micros, digits, rounding, epoch)
    refused = refused_sql(ref) if native == "datetime" else ""  # a TIMESTAMP is never partial
    payload = _number(micros)
    return Payload(
        payload,
        refused_when=refused,
        length="" if reduced else _micros_length(ref, native, payload),
    )


def _micros_length(ref: str, native: str, payload: str) -> str:
    """The length of an unreduced microsecond payload: 16 digits from 2001-09-09 01:46:40
    UTC to 2286 (every TIMESTAMP from then on), measured otherwise."""
    if native == "datetime":
        within = _within_digits(ref, _EPOCH, dt.timedelta(microseconds=1), 16)
        return _length(within, 16, payload)
    if native == "timestamp":
        return _length(f"UNIX_TIMESTAMP({ref}) >= 1000000000", 16, payload)
    return ""


def _uuid(ref: str, column: DigestColumn, *_: Any) -> Payload:
    native = _native(column.column)
    if native == "uuid":
        return Payload(f"REPLACE({_text(ref)}, '-', '')", null_when=_null_when(ref, column))
    if native in ("char", "varchar"):  # as merkle.spark reads UUID text
        return Payload(f"REGEXP_REPLACE(LOWER(TRIM({_text(ref)})), '^urn:uuid:|[{{}}-]', '')")
    raise NotPushable(f"column {column.name}: {column.column.native_type} as uuid")


_WRITERS: tuple[tuple[type, PayloadWriter], ...] = (
    (lt.IntegerType, _integer),
    (lt.DecimalType, _decimal),
    (lt.FloatType, _float),
    (lt.StringType, _string),
    (lt.BytesType, _bytes),
    (lt.BooleanType, _boolean),
    (lt.DateType, _date),
    (lt.TimeType, _temporal),
    (lt.TimestampType, _temporal),
    (lt.TimestampTzType, _temporal),
    (lt.UuidType, _uuid),
)


class MariaDBDigestDialect(DigestDialect):
    """MariaDB (tested on 10.11; MySQL is left to the Spark engine)."""

    product = "MariaDB"
    writers = _WRITERS

    def __init__(self, qualify: Callable[[str], str]) -> None:
        self._qualify = qualify

    def quote(self, name: str) -> str:
        return "`" + name.replace("`", "``") + "`"

    def table(self, name: str) -> str:
        return self._qualify(name)

    def field(self, ref: str, payload: Payload) -> str:
        length = payload.length or f"LENGTH({ref})"
        if payload.null_when == "":
            return f"{length}, ':', {ref}"
        if payload.null_when is None:  # CONCAT is NULL when the payload is
            return f"IFNULL(CONCAT({length}, ':', {ref}), 'N')"
        return f"IF({payload.null_when}, 'N', CONCAT({length}, ':', {ref}))"

    def hash64(self, fields: Sequence[Field]) -> str:
        return f"CAST(CONV(LEFT(MD5({self.key_bytes(fields)}), 16), 16, 10) AS UNSIGNED)"

    def hash_leaf(self, fields: Sequence[Field], depth: int) -> str:
        top = f"CAST(CONV(LEFT(MD5({self.key_bytes(fields)}), 8), 16, 10) AS UNSIGNED)"
        return f"({top} >> {32 - depth})"

    def key_bytes(self, fields: Sequence[Field]) -> str:
        # CONCAT of text and binary strings is a binary string of their bytes.
        return f"CONCAT({', '.join(sql for sql, _ in fields)})"

    def int_div(self, dividend: str, divisor: int) -> str:
        return f"(({dividend}) DIV {divisor})"


class MariaDBDigestSession:
    """One connection in ``START TRANSACTION WITH CONSISTENT SNAPSHOT``, at its position."""

    def __init__(self, connector: MariaDBReads, table: TableSchema, connection: Any) -> None:
        self._connector = connector
        self._table = table
        self._connection = connection
        self.position: int | None = None

    def iter_rows(self, sql: str) -> Iterator[tuple[Any, ...]]:
        import pymysql.cursors

        with self._connection.cursor(pymysql.cursors.SSCursor) as cursor:
            cursor.execute(sql)
            while rows := cursor.fetchmany(10_000):
                yield from rows

    def read_rows(self, columns: Sequence[str], partition: Partition) -> Iterator[pa.RecordBatch]:
        return self._connector.read_in(self._connection, self._table, columns, partition, None)


# The in-memory table a digest's GROUP BY leaf may grow to before MariaDB moves it to disk
# (the server's default is 16 MB): a million leaves in 10M rows took 70 s on disk against
# 8 s in memory. A session setting; the table only grows as far as the leaves need.
GROUP_BY_MEMORY = 256 * 1024 * 1024


@contextmanager
def digest_session(connector: MariaDBReads, table: TableSchema) -> Iterator[MariaDBDigestSession]:
    """A session in a consistent snapshot of its own (InnoDB cannot share one)."""
    with connector.connect() as connection:
        with connection.cursor() as cursor:  # see GROUP_BY_MEMORY
            cursor.execute(
                f"SET SESSION max_heap_table_size = GREATEST(@@max_heap_table_size,"
                f" {GROUP_BY_MEMORY}), tmp_table_size = GREATEST(@@tmp_table_size,"
                f" {GROUP_BY_MEMORY})"
            )
        session = MariaDBDigestSession(connector, table, connection)
        session.position = connector.begin_snapshot(connection)
        try:
            yield session
        finally:
            connection.rollback()
