"""Postgres as a source: reflection, partitioned Arrow reads, and the shared snapshot's LSN."""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import struct
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import connectors.postgres.connector  # registers the connector; BATCH_ROWS patched below
from cdc_core.capture.position import PositionError
from cdc_core.errors import TerminalError
from connectors.base import Connector
from connectors.model import POSITION_COLUMN, Partition, Snapshot, SourceColumn
from connectors.postgres.exported_snapshot import SLOT_PREFIX
from connectors.postgres.position import lsn_to_int, lsn_to_text, position_of
from connectors.postgres.types import arrow_type, decimal_fits, logical_type
from connectors.registry import connector_for
from merkle import types as lt
from tests.private_servers import PostgresServer, _PostgresProcess, _start_on_free_port

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

D = decimal.Decimal

_EVERY_TYPE = """
CREATE TYPE mood AS ENUM ('sad', 'happy');
CREATE DOMAIN positive AS integer CHECK (VALUE > 0);
CREATE TABLE every_type (
    id integer PRIMARY KEY, small smallint NOT NULL, big bigint, amount numeric(10,2),
    wide numeric(30,0), free numeric, neg numeric(5,-2), r real, d double precision,
    txt text, vc varchar(10), ch char(5), bp bpchar, raw bytea, flag boolean, day date,
    t time(3), tz timetz, ts timestamp(3), tstz timestamptz, doc json, docb jsonb, ref uuid,
    span interval, feeling mood, tags text[], pos positive
);
INSERT INTO every_type
SELECT i, 7, 9223372036854775807, i / 100.0, 1e29, -12345.6789012345678, 12345, 0.1, 0.1,
       'héllo', 'abc', 'ab', 'x  ', '\\x00ff', true, '2024-02-29', '12:34:56.789',
       '12:00+02', '2024-03-31 02:30:00.123', '2024-01-01 00:00:00+02',
       '{"b": 1,  "a": [1, 2]}', '{"b": 1,  "a": [1, 2]}',
       'A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', '3 days -00:00:01.5', 'happy', '{x}', 5
  FROM generate_series(1, 30) AS i;
UPDATE every_type SET big = NULL, amount = NULL, free = NULL, txt = NULL, raw = NULL,
       day = NULL, t = NULL, tstz = NULL, docb = NULL, ref = NULL, span = NULL
 WHERE id = 11;
"""


@pytest.fixture
def database(postgres: PostgresServer, postgres_database: Callable[[PostgresServer], str]) -> str:
    return postgres_database(postgres)


@pytest.fixture
def every_type(postgres: PostgresServer, database: str) -> Connector:
    with contextlib.closing(postgres.connect(database)) as conn:
        conn.execute(_EVERY_TYPE)
    return connector_for(postgres.url(database))


def _rows(
    connector: Connector,
    table: str,
    partition: Partition,
    snapshot: Snapshot | None = None,
    columns: list[str] | None = None,
) -> list[dict[str, Any]]:
    schema = connector.reflect(table)
    wanted = columns or [c.name for c in schema.columns if c.ltype is not None]
    batches = list(connector.read_partition(schema, wanted, partition, snapshot))
    assert all(b.schema == connector.arrow_schema(schema, wanted) for b in batches)
    return [row for batch in batches for row in batch.to_pylist()]


def test_reflection_maps_every_type(every_type: Connector) -> None:
    schema = every_type.reflect("every_type")
    assert schema.primary_key == ("id",)
    assert {c.name: c.ltype for c in schema.columns} == {
        "id": lt.IntegerType(),
        "small": lt.IntegerType(),
        "big": lt.IntegerType(),
        "amount": lt.DecimalType(10, 2),
        "wide": lt.DecimalType(30, 0),
        "free": lt.DecimalType(),
        "neg": lt.DecimalType(7, 0),  # numeric(5,-2): five digits, then two zeros
        "r": lt.FloatType(32),
        "d": lt.FloatType(64),
        "txt": lt.StringType(),
        "vc": lt.StringType(),
        "ch": lt.StringType(padded=True),
        "bp": lt.StringType(padded=True),
        "raw": lt.BytesType(),
        "flag": lt.BooleanType(),
        "day": lt.DateType(),
        "t": lt.TimeType(3),
        "tz": lt.TimeTzType(6),
        "ts": lt.TimestampType(3),
        "tstz": lt.TimestampTzType(6),
        "doc": lt.JsonType(),
        "docb": lt.JsonType(),
        "ref": lt.UuidType(),
        "span": lt.StringType(),  # its ISO 8601 text
        "feeling": lt.StringType(),
        "tags": lt.ArrayType(lt.StringType()),
        "pos": lt.IntegerType(),
    }
    native = {c.name: c.native_type for c in schema.columns}
    assert native["ts"] == "timestamp(3) without time zone"
    assert native["vc"] == "character varying(10)"
    assert native["pos"] == "positive"
    assert [c.name for c in schema.columns if not c.nullable] == ["id", "small"]


def test_composite_primary_key_in_key_order(postgres: PostgresServer, database: str) -> None:
    with contextlib.closing(postgres.connect(database)) as conn:
        conn.execute("CREATE SCHEMA other")
        conn.execute("CREATE TABLE other.pair (a int, b text, c int, PRIMARY KEY (b, a))")
    schema = connector_for(postgres.url(database)).reflect("other.pair")
    assert schema.primary_key == ("b", "a")
    assert [c.name for c in schema.columns] == ["a", "b", "c"]


def test_partition_reads_exactly_its_range_with_exact_values(every_type: Connector) -> None:
    assert every_type.key_range("every_type", "id") == (1, 30)
    rows = _rows(every_type, "every_type", Partition(0, "id", 10, 20))
    assert [r["id"] for r in rows] == list(range(10, 20))
    first, empty = rows[0], rows[1]
    float32_tenth = struct.unpack("f", struct.pack("f", 0.1))[0]
    assert first == {
        "id": 10,
        "small": 7,
        "big": 2**63 - 1,
        "amount": D("0.10"),
        "wide": D(10**29),
        "free": D("-12345.6789012345678"),
        "neg": D(12300),
        "r": float32_tenth,
        "d": 0.1,
        "txt": "héllo",
        "vc": "abc",
        "ch": "ab   ",  # char(5) padding, as stored
        "bp": "x  ",
        "raw": b"\x00\xff",
        "flag": True,
        "day": dt.date(2024, 2, 29),
        "t": 45_296_789_000,  # microseconds since midnight
        "tz": {"micros": 43_200_000_000, "offset_seconds": 7200},  # 12:00+02
        "ts": dt.datetime(2024, 3, 31, 2, 30, 0, 123_000),  # wall clock, no zone
        "tstz": dt.datetime(2023, 12, 31, 22, 0, tzinfo=dt.UTC),
        "doc": '{"b": 1,  "a": [1, 2]}',  # json keeps the document's text
        "docb": '{"a": [1, 2], "b": 1}',
        "ref": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
        "span": "P3DT-1.5S",  # '3 days -00:00:01.5': days and time kept apart
        "feeling": "happy",
        "tags": ["x"],
        "pos": 5,
        POSITION_COLUMN: None,  # no shared snapshot: no exact position
    }
    assert first["ts"].tzinfo is None
    assert first["tstz"].utcoffset() == dt.timedelta(0)
    assert [k for k, v in empty.items() if v is None] == [
        "big",
        "amount",
        "free",
        "txt",
        "raw",
        "day",
        "t",
        "tstz",
        "docb",
        "ref",
        "span",
        POSITION_COLUMN,
    ]


def test_whole_table_partition_in_bounded_batches(
    postgres: PostgresServer, database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connectors.postgres.connector, "BATCH_ROWS", 2)
    with contextlib.closing(postgres.connect(database)) as conn:
        conn.execute("CREATE TABLE e (id bigint PRIMARY KEY, v text)")
        connector = connector_for(postgres.url(database))
        assert connector.key_range("e", "id") is None
        assert _rows(connector, "e", Partition(0)) == []
        conn.execute("INSERT INTO e SELECT i, 'v' FROM generate_series(-2, 2) AS i")
    schema = connector.reflect("e")
    batches = list(connector.read_partition(schema, ["id"], Partition(0)))
    assert [b.num_rows for b in batches] == [2, 2, 1]
    assert sorted(i for b in batches for i in b.column("id").to_pylist()) == [-2, -1, 0, 1, 2]


def _insert_lsn(conn: Any) -> int:
    (text,) = conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
    return lsn_to_int(text)


def _slots(conn: Any, database: str) -> list[str]:
    rows = conn.execute(
        "SELECT slot_name FROM pg_replication_slots WHERE database = %s", (database,)
    ).fetchall()
    return [name for (name,) in rows]


def test_shared_snapshot_holds_exactly_the_commits_before_its_position(
    postgres: PostgresServer, database: str
) -> None:
    connector = connector_for(postgres.url(database))
    with contextlib.closing(postgres.connect(database)) as conn:
        conn.execute("CREATE TABLE s (id int PRIMARY KEY, v text)")
        conn.execute("INSERT INTO s VALUES (1, 'before'), (2, 'before'), (3, 'before')")
        before = _insert_lsn(conn)
        with connector.shared_snapshot() as snapshot:
            assert snapshot is not None and snapshot.position is not None
            (slot,) = _slots(conn, database)
            assert slot.startswith(SLOT_PREFIX)
            conn.execute("INSERT INTO s VALUES (4, 'after')")
            conn.execute("UPDATE s SET v = 'after' WHERE id = 1")
            conn.execute("DELETE FROM s WHERE id = 2")
            after = _insert_lsn(conn)
            parts = [Partition(0, "id", 1, 3), Partition(1, "id", 3, 10)]
            rows = [r for p in parts for r in _rows(connector, "s", p, snapshot)]
        assert _slots(conn, database) == []  # the temporary slot went with the block
    assert before <= snapshot.position < after
    assert snapshot.position_text == lsn_to_text(snapshot.position)
    assert [(r["id"], r["v"]) for r in rows] == [(1, "before"), (2, "before"), (3, "before")]
    assert {r[POSITION_COLUMN] for r in rows} == {snapshot.position}
    with pytest.raises(TerminalError, match="read partitions inside the shared_snapshot"):
        _rows(connector, "s", Partition(0), snapshot)


def test_missing_table_is_a_clear_error(postgres: PostgresServer, database: str) -> None:
    connector = connector_for(postgres.url(database))
    with pytest.raises(TerminalError, match="table 'nope' not found"):
        connector.reflect("nope")
    with pytest.raises(TerminalError, match=r"table 'other\.nope' not found"):
        connector.key_range("other.nope", "id")


@pytest.fixture
def role_without_replication(postgres: PostgresServer, database: str) -> Iterator[str]:
    with contextlib.closing(postgres.connect(database)) as conn:
        role = f"reader_{database}"  # roles belong to the cluster: a unique name
        conn.execute(f"CREATE ROLE {role} LOGIN")
        try:
            yield role
        finally:
            conn.execute(f"DROP ROLE {role}")


def test_user_without_replication_gets_the_fix(
    postgres: PostgresServer, database: str, role_without_replication: str
) -> None:
    url = postgres.url(database).replace("//postgres@", f"//{role_without_replication}@")
    connector = connector_for(url)
    with pytest.raises(TerminalError, match=r"ALTER ROLE <user> REPLICATION"):  # noqa: SIM117
        with connector.shared_snapshot():
            pass


class _ReplicaWalProcess(_PostgresProcess):
    """A private cluster like the shared one, but with wal_level=replica."""

    def _argv(self) -> list[str]:
        return [a.replace("wal_level=logical", "wal_level=replica") for a in super()._argv()]


def test_wal_level_below_logical_gets_the_fix() -> None:
    process = _start_on_free_port(_ReplicaWalProcess)
    assert isinstance(process, _ReplicaWalProcess)
    try:
        connector = connector_for(process.handle().url("test"))
        with pytest.raises(TerminalError, match="needs wal_level = logical"):  # noqa: SIM117
            with connector.shared_snapshot():
                pass
    finally:
        process.stop()


@pytest.mark.parametrize("value", ["1e20", "0.0000000000000000001", "NaN", "-Infinity"])
def test_value_too_large_for_arrow_is_a_clear_error(
    postgres: PostgresServer, database: str, value: str
) -> None:
    with contextlib.closing(postgres.connect(database)) as conn:
        conn.execute("CREATE TABLE big (id int PRIMARY KEY, free numeric)")
        conn.execute("INSERT INTO big VALUES (1, 1), (2, %s::numeric)", (value,))
    connector = connector_for(postgres.url(database))
    with pytest.raises(TerminalError) as error:
        _rows(connector, "big", Partition(0))
    assert str(error.value) == (  # names the column, never the value
        "column 'free' of big: a value does not fit Arrow decimal128(38,18) (NaN, infinity,"
        " more than 20 integer or 18 fractional digits); declare the column numeric(p,s) with"
        " p <= 38, or leave it out of the comparison [column=free, table=big]"
    )
    assert _rows(connector, "big", Partition(0, "id", 1, 2)) == [
        {"id": 1, "free": D(1), POSITION_COLUMN: None}
    ]


def test_values_without_an_arrow_value_are_clear_errors(
    postgres: PostgresServer, database: str
) -> None:
    with contextlib.closing(postgres.connect(database)) as conn:
        conn.execute("CREATE TABLE spans (id int PRIMARY KEY, span interval, at timestamptz)")
        conn.execute("INSERT INTO spans VALUES (1, '-1 year 2 days 00:00:01', 'infinity')")
    connector = connector_for(postgres.url(database))
    (row,) = _rows(connector, "spans", Partition(0), columns=["span"])
    assert row["span"] == "P-1Y2DT1S"  # months are read too (issue 36): no error
    with pytest.raises(TerminalError, match=r"cannot read spans .*infinite dates and timestamps"):
        _rows(connector, "spans", Partition(0), columns=["at"])


@pytest.mark.parametrize(
    ("native", "arrow"),
    [
        ("numeric(38,10)", "decimal128(38, 10)"),
        ("numeric(50,10)", "decimal128(38, 10)"),  # wider than Arrow: checked per value
        ("numeric(60,40)", "decimal128(38, 18)"),
        ("numeric(3,5)", "decimal128(5, 5)"),
        ("numeric", "decimal128(38, 18)"),
        ("interval day to second(3)", "string"),  # its ISO 8601 text
        ("time without time zone", "int64"),
        ("time(3) with time zone", "struct<micros: int64, offset_seconds: int32>"),
        ("numeric(50,10)[]", "list<item: decimal128(38, 10)>"),
        ("timestamp with time zone[]", "list<item: timestamp[us, tz=UTC]>"),
        ("time with time zone[]", "list<item: struct<micros: int64, offset_seconds: int32>>"),
    ],
)
def test_arrow_types_of_wide_and_odd_types(native: str, arrow: str) -> None:
    assert str(arrow_type(SourceColumn("x", native, logical_type(native)))) == arrow


@pytest.mark.parametrize(
    ("value", "precision", "scale", "fits"),
    [
        ("1.500", 2, 1, True),
        ("0.000", 3, 3, True),
        ("99.9", 3, 1, True),
        ("100.0", 3, 1, False),
        ("0.05", 3, 1, False),
        ("1E+2", 3, 0, True),
        ("1E+3", 3, 0, False),
        ("-Infinity", 38, 0, False),
    ],
)
def test_decimal_fits(value: str, precision: int, scale: int, fits: bool) -> None:
    assert decimal_fits(D(value), precision, scale) is fits


def test_lsn_text_round_trips() -> None:
    assert lsn_to_int("16/B374D848") == 0x16_B374D848
    assert lsn_to_text(0x16_B374D848) == "16/B374D848"
    assert position_of("0/16b3748").text == "0/16B3748"
    with pytest.raises(PositionError, match="not a PostgreSQL LSN"):
        lsn_to_int("16-B374D848")
