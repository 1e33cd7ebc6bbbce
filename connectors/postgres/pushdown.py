"""PostgreSQL SQL for the database engine (``connectors.pushdown``): canonical payloads,
field framing and MD5 hashes computed by the server.

Every expression reproduces ``merkle.canonical`` exactly (tests replay the golden vectors
through it). It needs PostgreSQL 14 or later (``extract`` returns exact ``numeric``) and a
UTF8 database (``md5(text)`` then hashes the text's UTF-8 bytes); ``digest_dialect`` of
the connector checks both. Functions:
https://www.postgresql.org/docs/current/functions.html .
"""

from __future__ import annotations

import contextlib
import itertools
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

from connectors.model import Partition, Snapshot, TableSchema
from connectors.postgres.types import money_numeric, quote
from connectors.pushdown import (
    DigestColumn,
    DigestDialect,
    Field,
    NotPushable,
    Payload,
    PayloadWriter,
)
from merkle import types as lt
from merkle.canonical import CANONICAL_NAN_BITS, rounding_epoch
from merkle.options import ComparisonOptions

if TYPE_CHECKING:
    import psycopg
    import pyarrow as pa


class PostgresReads(Protocol):
    """What a digest session takes from the PostgreSQL connector (``connector.py`` imports
    this module, so the connector is described here by what it offers, not imported)."""

    def read_transaction(
        self, snapshot: Snapshot | None
    ) -> AbstractContextManager[psycopg.Connection[Any]]: ...

    def read_in(
        self,
        connection: psycopg.Connection[Any],
        table: TableSchema,
        columns: Sequence[str],
        partition: Partition,
        position: int | None,
    ) -> Iterator[pa.RecordBatch]: ...


_INTEGERS = ("smallint", "integer", "bigint")
_LENGTH = re.compile(r"^character\((\d+)\)$")


# Builtin types the writers below read, by name without modifiers (``format_type``).
_BUILTINS = frozenset(
    {
        *_INTEGERS,
        "numeric",
        "money",
        "real",
        "double precision",
        "text",
        "character varying",
        "character",
        "bpchar",
        "bytea",
        "boolean",
        "date",
        "time without time zone",
        "timestamp without time zone",
        "timestamp with time zone",
        "uuid",
        "json",
        "jsonb",
    }
)
# A domain is named by its own name (``amount``, ``information_schema.cardinal_number``);
# its values are its base type's, whose logical type the column carries
# (``connectors.postgres.types.logical_type`` reads the base). The writers only tell the
# bases of one logical type apart where they differ (never between integer widths), so one
# builtin of each logical type stands for the base, and the base's functions and operators
# take a domain's values (https://www.postgresql.org/docs/current/domains.html).
_DOMAIN_BASES: dict[type, str] = {
    lt.IntegerType: "bigint",
    lt.DecimalType: "numeric",
    lt.BytesType: "bytea",
    lt.BooleanType: "boolean",
    lt.DateType: "date",
    lt.TimeType: "time without time zone",
    lt.TimestampType: "timestamp without time zone",
    lt.TimestampTzType: "timestamp with time zone",
    lt.UuidType: "uuid",
    lt.IntervalType: "interval",
}


def _base(column: DigestColumn) -> str:
    """The native type without its modifier (``numeric(10,2)`` -> ``numeric``); for a
    domain, a builtin type its values are (``_DOMAIN_BASES``)."""
    native = re.sub(r"\(.*?\)", "", column.column.native_type).strip()
    if native in _BUILTINS or native.startswith("interval"):
        return native
    own = column.column.ltype
    if isinstance(own, lt.FloatType):
        return "real" if own.bits == 32 else "double precision"
    if isinstance(own, lt.StringType):
        return "character" if own.padded else "text"
    return _DOMAIN_BASES.get(type(own), native)


def _null_when(column: DigestColumn) -> str | None:
    return None if column.column.nullable else ""


def float_bits_sql(value: str) -> str:
    """The exact ``float`` payload of a float8: its IEEE bits as a signed decimal integer
    (``float8send`` gives them big-endian; adding +0.0 turns -0.0 into 0.0, and every NaN
    gets Java's canonical NaN bits, as ``merkle.canonical.float_bits`` does)."""
    bits = f"('x' || encode(float8send({value} + 0.0::float8), 'hex'))::bit(64)::bigint"
    return f"CASE WHEN {value} = 'NaN' THEN '{CANONICAL_NAN_BITS}' ELSE ({bits})::text END"


def _integer(ref: str, column: DigestColumn, *_: Any) -> Payload:
    if _base(column) not in _INTEGERS:
        raise NotPushable(f"column {column.name}: {column.column.native_type} as integer")
    return Payload(f"{ref}::text", null_when=_null_when(column))


def _decimal(ref: str, column: DigestColumn, *_: Any) -> Payload:
    base = _base(column)
    if base in _INTEGERS:
        return Payload(f"{ref}::text", null_when=_null_when(column))
    if base == "money":
        return Payload(f"trim_scale({money_numeric(ref)})::text", null_when=_null_when(column))
    if base != "numeric":
        raise NotPushable(f"column {column.name}: {column.column.native_type} as decimal")
    # numeric text is plain notation with the value's own scale; trim_scale (PostgreSQL 13,
    # https://www.postgresql.org/docs/current/functions-math.html) drops trailing fractional
    # zeros, so zero of any scale is 0. NaN and infinities stay text no value matches.
    return Payload(f"trim_scale({ref})::text", null_when=_null_when(column))


def _float(ref: str, column: DigestColumn, *_: Any) -> Payload:
    ltype = column.ltype
    assert isinstance(ltype, lt.FloatType)
    base = _base(column)
    if base == "real" and ltype.bits == 32:  # widening to float8 is exact
        return Payload(float_bits_sql(f"{ref}::float8"), null_when=_null_when(column))
    if base == "double precision" and ltype.bits == 64:
        return Payload(float_bits_sql(ref), null_when=_null_when(column))
    raise NotPushable(f"column {column.name}: {column.column.native_type} as {ltype}")


def _string(ref: str, column: DigestColumn, options: ComparisonOptions, *_: Any) -> Payload:
    ltype = column.ltype
    assert isinstance(ltype, lt.StringType)
    value = f"{ref}::text"  # drops character(n)'s padding, which the driver keeps
    native = column.column.native_type
    trim = options.trim_char and ltype.padded
    if not trim:
        padded = _LENGTH.match(native)
        if padded:
            value = f"rpad({value}, {padded.group(1)})"  # character(n) holds n characters
        elif native == "bpchar" or _base(column) == "character":  # bpchar, or a domain
            raise NotPushable(f"column {column.name}: {native} has no length to pad to here")
    else:
        value = f"rtrim({value}, ' ')"
    if options.empty_string_is_null:
        return Payload(f"NULLIF({value}, '')")
    return Payload(value, null_when=_null_when(column))


def _bytes(ref: str, column: DigestColumn, options: ComparisonOptions, *_: Any) -> Payload:
    if _base(column) != "bytea":
        raise NotPushable(f"column {column.name}: {column.column.native_type} as bytes")
    if options.empty_string_is_null:
        return Payload(f"NULLIF({ref}, ''::bytea)", binary=True)
    return Payload(ref, binary=True, null_when=_null_when(column))


def _boolean(ref: str, column: DigestColumn, *_: Any) -> Payload:
    base = _base(column)
    if base == "boolean":
        test = ref
    elif base in _INTEGERS:
        test = f"{ref} <> 0"
    else:
        raise NotPushable(f"column {column.name}: {column.column.native_type} as boolean")
    return Payload(
        f"CASE WHEN {test} THEN '1' WHEN NOT {test} THEN '0' END", null_when=_null_when(column)
    )


def _date(ref: str, column: DigestColumn, *_: Any) -> Payload:
    if _base(column) != "date":
        raise NotPushable(f"column {column.name}: {column.column.native_type} as date")
    return Payload(f"({ref} - DATE '1970-01-01')::text", null_when=_null_when(column))


def _micros_of_day(time: str) -> str:
    """Microseconds since midnight of a ``time`` value, exactly: ``date_part`` returns the
    seconds as float8 (https://www.postgresql.org/docs/current/functions-datetime.html),
    and below 86,400 s with six decimals a double is within 1e-11 s of them, so the
    rounding cast to bigint restores the integer (cheaper than ``extract``'s numeric)."""
    return f"(date_part('epoch', {time}) * 1000000)::bigint"


def _timestamp_micros(ref: str) -> str:
    """Microseconds of a ``timestamp`` from 1970-01-01 00:00, its wall clock read as UTC,
    in integers: whole days (``date - date`` is an integer; the date is the floor, before
    1970 too) and the time of day. About a third cheaper than ``extract(epoch ...)``,
    which goes through numeric (and through float8 near the end of int64 microseconds,
    in year 294247). Infinity and values beyond int64 microseconds fail the query."""
    days = f"({ref}::date - DATE '1970-01-01')::bigint * 86400000000"
    return f"({days} + {_micros_of_day(f'{ref}::time')})"


# time: microseconds since midnight; timestamp: the wall clock read as UTC; timestamptz:
# the instant, through numeric (extract is exact numeric since PostgreSQL 14: its date and
# time in UTC would need two AT TIME ZONE, which measured no cheaper).
_MICROS: dict[type, Callable[[str], str]] = {
    lt.TimeType: _micros_of_day,
    lt.TimestampType: _timestamp_micros,
    lt.TimestampTzType: lambda ref: f"(extract(epoch FROM {ref}) * 1000000)::bigint",
}


_TEMPORAL_NATIVE: dict[type, str] = {
    lt.TimeType: "time without time zone",
    lt.TimestampType: "timestamp without time zone",
    lt.TimestampTzType: "timestamp with time zone",
}


def _temporal(
    ref: str, column: DigestColumn, options: ComparisonOptions, dialect: DigestDialect
) -> Payload:
    ltype = column.ltype
    if _TEMPORAL_NATIVE.get(type(ltype)) != _base(column):
        raise NotPushable(f"column {column.name}: {column.column.native_type} as {ltype}")
    micros = _MICROS[type(ltype)](ref)
    digits = options.fraction_digits(ltype)
    own = getattr(column.column.ltype, "precision", lt.MAX_FRACTION_DIGITS)
    if digits < own:  # else every stored value is a whole unit already
        rounding = options.rounding
        epoch = rounding_epoch(rounding, ltype)
        micros = dialect.reduce_micros(micros, digits, rounding, epoch)
    return Payload(f"({micros})::text", null_when=_null_when(column))


def _uuid(ref: str, column: DigestColumn, *_: Any) -> Payload:
    if _base(column) == "uuid":
        return Payload(f"replace({ref}::text, '-', '')", null_when=_null_when(column))
    if isinstance(column.column.ltype, lt.StringType):  # as merkle.spark reads UUID text
        bare = f"regexp_replace(lower(btrim({ref}::text)), '^urn:uuid:|[{{}}-]', '', 'g')"
        return Payload(bare, null_when=_null_when(column))
    raise NotPushable(f"column {column.name}: {column.column.native_type} as uuid")


def _interval(ref: str, column: DigestColumn, *_: Any) -> Payload:
    if not _base(column).startswith("interval"):
        raise NotPushable(f"column {column.name}: {column.column.native_type} as interval")
    # (months, microseconds): date_trunc to the month keeps exactly years and months, the
    # rest is days and time, a day counting 86,400 s.
    months = f"(extract(year FROM {ref}) * 12 + extract(month FROM {ref}))::bigint"
    micros = f"(extract(epoch FROM {ref} - date_trunc('month', {ref})) * 1000000)::bigint"
    return Payload(f"{months}::text || ',' || {micros}::text", null_when=_null_when(column))


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
    (lt.IntervalType, _interval),
)


class PostgresDigestDialect(DigestDialect):
    """PostgreSQL 14 or later, in a UTF8 database."""

    product = "Postgres"
    writers = _WRITERS

    payload_fence = " OFFSET 0"

    def __init__(self, qualify: Callable[[str], str]) -> None:
        self._qualify = qualify

    def quote(self, name: str) -> str:
        return quote(name)

    def table(self, name: str) -> str:
        return self._qualify(name)

    def field(self, ref: str, payload: Payload) -> str:
        # One || chain per field, the fields joined by || too (key_bytes): text || text
        # copies two strings, where concat() calls each argument's output function; a
        # NULL payload makes the chain NULL, leaving only the marker. (A 27-argument
        # concat() measured 0.3 s per 1M rows dearer, bench/RESULTS.md.)
        if payload.binary:
            framed = f"convert_to(octet_length({ref}) || ':', 'UTF8') || {ref}"
            return framed if payload.null_when == "" else f"coalesce({framed}, '\\x4e'::bytea)"
        framed = f"octet_length({ref})::text || ':' || ({ref})"
        return framed if payload.null_when == "" else f"coalesce({framed}, 'N')"

    def key_bytes(self, fields: Sequence[Field]) -> str:
        # Every field is one non-NULL expression; runs of text fields become one UTF-8
        # bytea where a bytea field follows or precedes them.
        if not any(binary for _, binary in fields):
            return self._text_run([sql for sql, _ in fields])
        parts: list[str] = []
        text: list[str] = []
        for sql, binary in fields:
            if not binary:
                text.append(sql)
                continue
            if text:
                parts.append(f"convert_to({self._text_run(text)}, 'UTF8')")
                text = []
            parts.append(f"({sql})")
        if text:
            parts.append(f"convert_to({self._text_run(text)}, 'UTF8')")
        return " || ".join(parts)

    @staticmethod
    def _text_run(fields: Sequence[str]) -> str:
        return "(" + " || ".join(f"({sql})" for sql in fields) + ")"

    def _md5_hex(self, fields: Sequence[Field]) -> str:
        return f"md5({self.key_bytes(fields)})"

    # The cast of the 128-bit string to bit(n) keeps its first n bits ("truncated ... on the
    # right", https://www.postgresql.org/docs/current/datatype-bit.html), cheaper than
    # left() of the hex digits first.
    def hash64(self, fields: Sequence[Field]) -> str:
        return f"('x' || {self._md5_hex(fields)})::bit(64)::bigint"

    def hash_leaf(self, fields: Sequence[Field], depth: int) -> str:
        top = f"('x' || {self._md5_hex(fields)})::bit(32)::bigint"
        return f"({top} >> {32 - depth})"

    def int_div(self, dividend: str, divisor: int) -> str:
        return f"(({dividend}) / {divisor})"


class PostgresDigestSession:
    """One connection in a REPEATABLE READ transaction (in the shared snapshot if given)."""

    _names = itertools.count()

    def __init__(
        self, connector: PostgresReads, table: TableSchema, connection: psycopg.Connection[Any]
    ) -> None:
        self._connector = connector
        self._table = table
        self._connection = connection
        self.position: int | None = None

    def iter_rows(self, sql: str) -> Iterator[tuple[Any, ...]]:
        with self._connection.cursor(f"replcheck_digest_{next(self._names)}") as cursor:
            cursor.execute(sql)
            while rows := cursor.fetchmany(10_000):
                yield from rows

    def read_rows(self, columns: Sequence[str], partition: Partition) -> Iterator[pa.RecordBatch]:
        return self._connector.read_in(self._connection, self._table, columns, partition, None)


# The memory a digest's GROUP BY leaf may take before PostgreSQL spills it to disk (the
# server's default work_mem is 4 MB): an incremental comparison's million leaves need about
# 100 MB. Raised for the digest transaction only, never lowered.
GROUP_BY_MEMORY = 256 * 1024 * 1024


@contextlib.contextmanager
def digest_session(
    connector: PostgresReads, table: TableSchema, snapshot: Snapshot | None
) -> Iterator[PostgresDigestSession]:
    """A session in ``snapshot`` (its LSN is the position), else in a transaction of its own."""
    with connector.read_transaction(snapshot) as connection:
        connection.execute(  # after the snapshot is taken: see GROUP_BY_MEMORY
            "SELECT set_config('work_mem', greatest(pg_size_bytes(current_setting('work_mem')),"
            f" {GROUP_BY_MEMORY}) / 1024 || 'kB', true)"
        )
        session = PostgresDigestSession(connector, table, connection)
        session.position = snapshot.position if snapshot is not None else None
        yield session
