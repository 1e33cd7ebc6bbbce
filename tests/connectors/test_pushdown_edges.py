"""Edge values of the database engine's cheaper SQL paths, beyond the golden vectors.

The golden vectors hold what Python can hold. PostgreSQL's integer timestamp path is also
checked on values Python has no ``datetime`` for (BC, beyond year 9999, 24:00:00) against
microseconds counted from the text, and MariaDB's ordered refused-date test against the reader's
own policy (``zero_dates.to_date``/``to_datetime``) on every kind of stored non-date, under
each ``sql_mode`` that changes how MariaDB reads such values.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from connectors.base import Connector
from connectors.mariadb.pushdown import MariaDBDigestDialect
from connectors.mariadb.zero_dates import NOT_A_DATE, refused_sql, to_date, to_datetime
from connectors.model import SourceColumn, TableSchema
from connectors.postgres.pushdown import PostgresDigestDialect
from connectors.pushdown import DigestColumn
from connectors.registry import connector_for
from merkle import types as lt
from merkle.canonical import to_field
from merkle.hashing import leaf_of, md5_hash64
from merkle.options import ComparisonOptions
from tests.private_servers import MariaDBServer, PostgresServer

POSTGRES_TIMESTAMPS = (
    "4713-11-24 00:00:00 BC",  # the first day PostgreSQL stores
    "0001-12-31 23:59:59.999999 BC",
    "0001-01-01 00:00:00",
    "1899-12-31 23:59:59.000001",
    "1969-12-31 23:59:59.999999",
    "1969-12-31 00:00:00.5",
    "1970-01-01 00:00:00",
    "1970-01-01 00:00:00.000001",
    "2000-01-01 00:00:00",  # PostgreSQL's own epoch
    "1999-12-31 23:59:59.999999",
    "2024-02-29 12:34:56.789012",
    "9999-12-31 23:59:59.999999",
    "294246-06-01 00:00:00.000001",
    # The last the contract's int64 microseconds hold (extract(epoch ...) * 1000000 gave
    # ...800 for it: near int64's end, extract goes through float8).
    "294247-01-10 04:00:54.775807",
)
# Beyond int64 microseconds from 1970 (PostgreSQL stores up to 294276) and infinities:
# no canonical bytes, and the query fails.
POSTGRES_UNHASHABLE = (
    "294247-01-10 04:00:54.775808", "294276-12-31 23:59:59.999999", "infinity", "-infinity"
)  # fmt: skip
POSTGRES_TIMES = ("00:00:00", "00:00:00.000001", "12:00:00.5", "23:59:59.999999", "24:00:00")


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days from 1970-01-01 of a proleptic Gregorian date of any astronomical year
    (H. Hinnant's ``days_from_civil``), for dates Python's ``date`` cannot hold."""
    year -= month <= 2
    era = year // 400
    year_of_era = year - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146097 + day_of_era - 719468


def _micros_of_text(text: str) -> int:
    """Microseconds from 1970 of ``'[YYYY-MM-DD ]HH:MM:SS[.ffffff][ BC]'``, from the text."""
    bc = text.endswith(" BC")
    *day, clock = text.removesuffix(" BC").split(" ")
    days = 0
    if day:
        year, month, date = (int(part) for part in day[0].split("-"))
        days = _days_from_civil(1 - year if bc else year, month, date)
    whole, _, fraction = clock.partition(".")
    hours, minutes, seconds = (int(part) for part in whole.split(":"))
    micros = int(fraction.ljust(6, "0")) if fraction else 0
    return ((days * 24 + hours) * 60 + minutes) * 60 * 10**6 + seconds * 10**6 + micros


def _postgres_payload(native: str, ltype: lt.LogicalType) -> str:
    dialect = PostgresDigestDialect(lambda name: f'"{name}"')
    column = DigestColumn(SourceColumn("v", native, ltype), ltype)
    return dialect.payload(column, ComparisonOptions()).sql


@pytest.mark.integration
@pytest.mark.postgres
@pytest.mark.parametrize(
    ("native", "ltype", "values"),
    [
        ("timestamp without time zone", lt.TimestampType(), POSTGRES_TIMESTAMPS),
        ("time without time zone", lt.TimeType(), POSTGRES_TIMES),
    ],
    ids=["timestamp", "time"],
)
def test_postgres_integer_micros_are_exact_at_the_edges(
    postgres: PostgresServer,
    postgres_database: Callable[[PostgresServer], str],
    native: str,
    ltype: lt.LogicalType,
    values: tuple[str, ...],
) -> None:
    payload = _postgres_payload(native, ltype)
    rows = ", ".join(f"({i}, '{value}'::{native})" for i, value in enumerate(values))
    sql = f"SELECT {payload} FROM (VALUES {rows}, ({len(values)}, NULL)) t (i, v) ORDER BY i"
    with contextlib.closing(postgres.connect(postgres_database(postgres))) as connection:
        got = [text for (text,) in connection.execute(sql).fetchall()]
    assert got == [str(_micros_of_text(value)) for value in values] + [None]


def test_the_reference_counts_days_as_python_does() -> None:
    for day in ("0001-01-01", "1969-12-31", "1970-01-01", "2024-02-29", "9999-12-31"):
        epoch = dt.date(1970, 1, 1)
        assert (
            _days_from_civil(*map(int, day.split("-"))) == (dt.date.fromisoformat(day) - epoch).days
        )
    assert (
        _micros_of_text("0001-12-31 23:59:59.999999 BC")
        == _micros_of_text("0001-01-01 00:00:00") - 1
    )


@pytest.mark.integration
@pytest.mark.postgres
@pytest.mark.parametrize("value", POSTGRES_UNHASHABLE)
def test_postgres_timestamps_without_int64_micros_fail_the_query(
    postgres: PostgresServer, postgres_database: Callable[[PostgresServer], str], value: str
) -> None:
    native = "timestamp without time zone"
    payload = _postgres_payload(native, lt.TimestampType())
    connection = postgres.connect(postgres_database(postgres))
    with contextlib.closing(connection), pytest.raises(psycopg.errors.DataError):
        connection.execute(f"SELECT {payload} FROM (VALUES ('{value}'::{native})) t (v)")


# Every kind of stored value a DATE or DATETIME can hold on a permissive server.
MARIADB_DATES = (
    "0000-00-00", "0000-00-01", "0000-01-00", "0000-01-15", "2024-00-00", "2024-00-15",
    "2024-01-00", "2023-02-29", "2023-02-31", "2023-04-31", "2024-02-29",
    "2024-02-28", "2024-06-30", "2024-12-31", "1000-01-01", "0001-01-01", "1969-12-31",
    "1970-01-01", "9999-12-31",
)  # fmt: skip
MARIADB_TIMES = ("00:00:00", "00:00:00.000001", "13:14:15.5")
SQL_MODES = ("", "ALLOW_INVALID_DATES", "NO_ZERO_IN_DATE,NO_ZERO_DATE", "TRADITIONAL")


def _policy_refuses(day: str, time: str | None) -> bool:
    """Whether the connector's reader refuses the stored DATE (``time`` None) or DATETIME."""
    year, month, date = (int(part) for part in day.split("-"))
    if time is None:
        return to_date(year, month, date) is NOT_A_DATE
    clock, _, fraction = time.partition(".")
    hour, minute, second = (int(part) for part in clock.split(":"))
    micros = int(fraction.ljust(6, "0")) if fraction else 0
    return to_datetime((year, month, date), (hour, minute, second), micros) is NOT_A_DATE


@pytest.mark.integration
@pytest.mark.mariadb
@pytest.mark.parametrize("sql_mode", SQL_MODES)
def test_mariadb_refuses_in_sql_exactly_the_dates_its_reader_refuses(
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    sql_mode: str,
) -> None:
    stored = [(day, None) for day in MARIADB_DATES]
    stored += [(day, time) for day in MARIADB_DATES for time in MARIADB_TIMES]
    database = mariadb_database(mariadb_full)
    connection = mariadb_full.connect(database)
    with contextlib.closing(connection), connection.cursor() as cursor:
        cursor.execute("SET SESSION sql_mode = 'ALLOW_INVALID_DATES'")  # stores them all
        cursor.execute("CREATE TABLE z (id INT PRIMARY KEY, d DATE, t DATETIME(6))")
        for row_id, (day, time) in enumerate(stored):
            column, value = ("d", day) if time is None else ("t", f"{day} {time}")
            cursor.execute(f"INSERT INTO z (id, {column}) VALUES (%s, %s)", (row_id, value))
        cursor.execute("INSERT INTO z VALUES (%s, NULL, NULL)", (len(stored),))
        cursor.execute("SET SESSION sql_mode = %s", (sql_mode,))
        cursor.execute(f"SELECT id, {refused_sql('d')}, {refused_sql('t')} FROM z ORDER BY id")
        rows = cursor.fetchall()
    refused = {
        row_id
        for row_id, on_date, on_datetime in rows
        if (on_date if _stored_is_date(stored, row_id) else on_datetime)
    }
    expected = {i for i, (day, time) in enumerate(stored) if _policy_refuses(day, time)}
    assert refused == expected
    assert rows[-1][1:] == (None, None)  # NULL is neither refused nor not: the flag adds 0


def _stored_is_date(stored: list[tuple[str, str | None]], row_id: int) -> bool:
    """Whether row ``row_id`` stored its value in the DATE column (else in the DATETIME)."""
    return row_id < len(stored) and stored[row_id][1] is None


def test_the_policy_helper_reads_the_parts_as_the_reader_does() -> None:
    assert _policy_refuses("2023-02-29", None)
    assert not _policy_refuses("0000-00-00", None)
    assert not _policy_refuses("0000-00-00", "00:00:00")
    assert _policy_refuses("0000-00-00", "00:00:00.000001")
    assert not _policy_refuses("2024-02-29", "13:14:15.5")


# Keys framed as text, bytes and NULL fields side by side, as hash leaves read them.
LEAF_KEYS = (("a", b"\x00\xff", None), ("", b"", "Zoë"), (None, None, ""), ("李雷", b"N", "0"))
LEAF_DEPTHS = (1, 16, 30)


def _leaf_sql(dialect: Any, columns: tuple[DigestColumn, ...]) -> str:
    payloads = [dialect.payload(c, ComparisonOptions()) for c in columns]
    fields = [(dialect.field(p.sql, p), p.binary) for p in payloads]
    leaves = ", ".join(dialect.hash_leaf(fields, depth) for depth in LEAF_DEPTHS)
    return f"SELECT {dialect.key_bytes(fields)}, {leaves} FROM {dialect.table('k')} ORDER BY i"


def _expected_leaves() -> list[tuple[bytes, ...]]:
    expected = []
    for key in LEAF_KEYS:
        data = b"".join(
            to_field(None if v is None else v if isinstance(v, bytes) else v.encode()) for v in key
        )
        expected.append((data, *(leaf_of(md5_hash64(data), depth) for depth in LEAF_DEPTHS)))
    return expected


def _leaf_columns(text: str, binary: str) -> tuple[DigestColumn, ...]:
    kinds = ((text, lt.StringType()), (binary, lt.BytesType()), (text, lt.StringType()))
    return tuple(
        DigestColumn(SourceColumn(f"c{i}", native, ltype), ltype)
        for i, (native, ltype) in enumerate(kinds)
    )


@pytest.mark.integration
@pytest.mark.postgres
def test_postgres_key_bytes_and_hash_leaves_equal_pythons(
    postgres: PostgresServer, postgres_database: Callable[[PostgresServer], str]
) -> None:
    dialect = PostgresDigestDialect(lambda name: f'"{name}"')
    with contextlib.closing(postgres.connect(postgres_database(postgres))) as connection:
        connection.execute("CREATE TABLE k (i int, c0 text, c1 bytea, c2 text)")
        for i, key in enumerate(LEAF_KEYS):
            connection.execute("INSERT INTO k VALUES (%s, %s, %s, %s)", (i, *key))
        rows = connection.execute(_leaf_sql(dialect, _leaf_columns("text", "bytea"))).fetchall()
    assert [(bytes(data), *leaves) for data, *leaves in rows] == _expected_leaves()


@pytest.mark.integration
@pytest.mark.mariadb
def test_mariadb_key_bytes_and_hash_leaves_equal_pythons(
    mariadb_full: MariaDBServer, mariadb_database: Callable[[MariaDBServer], str]
) -> None:
    dialect = MariaDBDigestDialect(lambda name: f"`{name}`")
    connection = mariadb_full.connect(mariadb_database(mariadb_full))
    with contextlib.closing(connection), connection.cursor() as cursor:
        cursor.execute("CREATE TABLE k (i INT, c0 TEXT, c1 BLOB, c2 TEXT) CHARSET utf8mb4")
        for i, key in enumerate(LEAF_KEYS):
            cursor.execute("INSERT INTO k VALUES (%s, %s, %s, %s)", (i, *key))
        cursor.execute(_leaf_sql(dialect, _leaf_columns("text", "blob")))
        rows = cursor.fetchall()
    assert [(bytes(data), *leaves) for data, *leaves in rows] == _expected_leaves()


@pytest.mark.integration
@pytest.mark.mariadb
def test_mariadb_zerofill_numbers_hash_without_their_padding(
    mariadb_full: MariaDBServer, mariadb_database: Callable[[MariaDBServer], str]
) -> None:
    natives = (
        "int(5) unsigned zerofill",
        "decimal(8,3) unsigned zerofill",
        "decimal(6,0) zerofill",
    )
    ltypes = (lt.IntegerType(), lt.DecimalType(8, 3), lt.DecimalType(6, 0))
    dialect = MariaDBDigestDialect(lambda name: f"`{name}`")
    payloads = [
        dialect.payload(
            DigestColumn(SourceColumn(f"c{i}", native, ltype), ltype), ComparisonOptions()
        )
        for i, (native, ltype) in enumerate(zip(natives, ltypes, strict=True))
    ]
    connection = mariadb_full.connect(mariadb_database(mariadb_full))
    with contextlib.closing(connection), connection.cursor() as cursor:
        columns = ", ".join(f"c{i} {native}" for i, native in enumerate(natives))
        cursor.execute(f"CREATE TABLE zf (i INT PRIMARY KEY, {columns})")
        cursor.execute("INSERT INTO zf VALUES (1, 42, 1.5, 7), (2, 0, 0, 0), (3, NULL, 0.001, 100)")
        cursor.execute(f"SELECT {', '.join(p.sql for p in payloads)} FROM zf ORDER BY i")
        rows = [tuple(None if v is None else str(v) for v in row) for row in cursor.fetchall()]
    assert rows == [("42", "1.5", "7"), ("0", "0", "0"), (None, "0.001", "100")]


def _mariadb_table(
    server: MariaDBServer, database: str, table: str, *statements: str
) -> tuple[Connector, TableSchema]:
    """The connector of ``database`` and the schema of ``table``, made by ``statements``."""
    connection = server.connect(database)
    with contextlib.closing(connection), connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)
    connector = connector_for(server.url(database))
    return connector, connector.reflect(table)


@pytest.mark.integration
@pytest.mark.mariadb
def test_mariadb_text_hashes_as_utf8_whatever_its_character_set(
    mariadb_full: MariaDBServer, mariadb_database: Callable[[MariaDBServer], str]
) -> None:
    """UTF-8 columns are read as they are, the others cast: the bytes are UTF-8 alike."""
    charsets = ("latin1", "utf8mb3", "utf8mb4", "ucs2")
    columns = [f"c{i} VARCHAR(20) CHARACTER SET {c}" for i, c in enumerate(charsets)]
    columns += ["e ENUM('Zoë', 'b') CHARACTER SET latin1", "n CHAR(5) CHARACTER SET utf8mb4"]
    connector, schema = _mariadb_table(
        mariadb_full,
        mariadb_database(mariadb_full),
        "s",
        f"CREATE TABLE s (id INT PRIMARY KEY, {', '.join(columns)})",
        "INSERT INTO s VALUES (1, 'Zoë', 'Zoë', 'Zoë', 'Zoë', 'Zoë', 'ab  ')",
        "INSERT INTO s VALUES (2, '', '', '', '', 'b', NULL)",
    )
    assert [c.charset for c in schema.columns[1:5]] == list(charsets)
    dialect = connector.digest_dialect()
    assert dialect is not None
    string = lt.StringType()
    payloads = [
        dialect.payload(DigestColumn(c, string), ComparisonOptions()) for c in schema.columns[1:]
    ]
    assert [p.sql.startswith("CAST(") for p in payloads] == [True, False, False, True, True, False]
    fields = [(dialect.field(p.sql, p), p.binary) for p in payloads]
    sql = f"SELECT {dialect.key_bytes(fields)} FROM {dialect.table('s')} ORDER BY id"
    with connector.digest_session(schema, None) as session:
        got = [
            row[0] if isinstance(row[0], bytes) else row[0].encode()
            for row in session.iter_rows(sql)
        ]
    zoe = to_field("Zoë".encode())
    assert got == [zoe * 5 + to_field(b"ab"), to_field(b"") * 4 + to_field(b"b") + b"N"]


@pytest.mark.integration
@pytest.mark.mariadb
def test_a_mariadb_digest_session_groups_a_million_leaves_in_memory(
    mariadb_full: MariaDBServer, mariadb_database: Callable[[MariaDBServer], str]
) -> None:
    from connectors.mariadb.pushdown import GROUP_BY_MEMORY

    database = mariadb_database(mariadb_full)
    ddl = "CREATE TABLE g (id INT PRIMARY KEY)"
    connector, schema = _mariadb_table(mariadb_full, database, "g", ddl)
    with connector.digest_session(schema, None) as session:
        sizes = list(session.iter_rows("SELECT @@max_heap_table_size, @@tmp_table_size"))
    assert sizes == [(GROUP_BY_MEMORY, GROUP_BY_MEMORY)]  # the server's default is 16 MB


@pytest.mark.integration
@pytest.mark.postgres
def test_a_postgres_digest_session_groups_a_million_leaves_in_memory(
    postgres: PostgresServer, postgres_database: Callable[[PostgresServer], str]
) -> None:
    from connectors.postgres.pushdown import GROUP_BY_MEMORY

    database = postgres_database(postgres)
    with contextlib.closing(postgres.connect(database)) as connection:
        connection.execute("CREATE TABLE g (id int PRIMARY KEY)")
        connection.commit()
    connector = connector_for(postgres.url(database))
    schema = connector.reflect("public.g")
    with connector.digest_session(schema, None) as session:
        memory = list(session.iter_rows("SELECT pg_size_bytes(current_setting('work_mem'))"))
    assert memory == [(GROUP_BY_MEMORY,)]  # the server's default is 4 MB
