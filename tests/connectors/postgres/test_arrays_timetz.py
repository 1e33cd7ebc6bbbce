"""Arrays and ``time with time zone`` on a private cluster: their logical types, the exact
raw changes and full-width committed transactions the stream gives (a large TOASTed array
left unchanged by an update included), the same values read by a snapshot, and clear
errors for arrays that have no logical value (more than one dimension, another lower bound)
or that would have to locate rows, and arrays of geometric types carried (issue 36: never
left out of the images in silence)."""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path
from typing import Any

import pytest

from cdc_core.capture.events import ABSENT, RowChange
from cdc_core.capture.position import Position
from cdc_core.ddl.descriptions import TableDescriptions
from cdc_core.errors import TerminalError
from connectors.model import Partition
from connectors.postgres.log_reader import PostgresLogReader
from connectors.postgres.snapshot import PostgresSnapshotReader
from connectors.registry import connector_for
from merkle import types as lt
from tests.connectors.postgres.helpers import (
    PgCase,
    check_order,
    committed,
    read_until_end,
    shown,
    txids,
)

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

D = decimal.Decimal
UTC = dt.UTC

_TABLE = """
CREATE TYPE mood AS ENUM ('sad', 'happy');
CREATE DOMAIN positive AS integer CHECK (VALUE > 0);
CREATE TABLE a (
    id int PRIMARY KEY, ints int2[], nums numeric(10,2)[], moods mood[], pos positive[],
    chars char(3)[], clocks timetz(3)[], times time[], stamps timestamptz[], docs jsonb[],
    refs uuid[], spans interval[], tz timetz(3), big bigint[]
);
-- Out of line and uncompressed: an update that leaves it alone logs it as unchanged TOAST.
ALTER TABLE a ALTER COLUMN big SET STORAGE EXTERNAL;
"""
_ROW_1 = """
INSERT INTO a VALUES (
    1, '{1,NULL,-32768}', '{1.10,NULL}', '{happy,sad}', '{5}', '{ab}',
    '{12:00+02,23:59:59.999-03:30}', '{24:00:00}', '{"2024-01-01 00:00+02"}',
    ARRAY['{"b": 1, "a": 2}']::jsonb[], '{A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11}',
    '{"1 day -00:00:01.5"}', '12:00:00.123+05:30',
    (SELECT array_agg(g) FROM generate_series(1, 2000) AS g)
)
"""
ROW_1: dict[str, Any] = {
    "id": 1,
    "ints": [1, None, -32768],
    "nums": [D("1.10"), None],
    "moods": ["happy", "sad"],
    "pos": [5],
    "chars": ["ab "],  # char(3): padded, as stored
    "clocks": [
        {"micros": 12 * 3600 * 10**6, "offset_seconds": 7200},
        {"micros": 86_399_999_000, "offset_seconds": -12_600},
    ],
    "times": [86_400_000_000],  # 24:00:00, in microseconds as the lake keeps times
    "stamps": [dt.datetime(2023, 12, 31, 22, tzinfo=UTC)],
    "docs": ['{"a": 2, "b": 1}'],  # jsonb's own text
    "refs": ["a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"],
    "spans": ["P1DT-1.5S"],  # each interval's ISO 8601 text
    "tz": {"micros": 43_200_123_000, "offset_seconds": 19_800},
    "big": list(range(1, 2001)),
}
ROW_2: dict[str, Any] = {"id": 2, **dict.fromkeys(ROW_1.keys() - {"id"}), "ints": []}
KEYS = {"public.a": ("id",)}


def _started(case: PgCase, *tables: str) -> tuple[PostgresLogReader, Position]:
    reader = case.reader(*tables)
    assert read_until_end(reader, None) == []
    return reader, reader.end_position()


def test_arrays_and_timetz_get_logical_types(case: PgCase) -> None:
    case.sql(_TABLE)
    schema = connector_for(case.server.url(case.database)).reflect("a")
    array = lt.ArrayType
    assert {c.name: c.ltype for c in schema.columns} == {
        "id": lt.IntegerType(),
        "ints": array(lt.IntegerType()),
        "nums": array(lt.DecimalType(10, 2)),
        "moods": array(lt.StringType()),  # enum labels
        "pos": array(lt.IntegerType()),  # a domain's base type
        "chars": array(lt.StringType(padded=True)),
        "clocks": array(lt.TimeTzType(3)),
        "times": array(lt.TimeType(6)),
        "stamps": array(lt.TimestampTzType(6)),
        "docs": array(lt.JsonType()),
        "refs": array(lt.UuidType()),
        "spans": array(lt.StringType()),  # intervals' text
        "tz": lt.TimeTzType(3),
        "big": array(lt.IntegerType()),
    }


def test_arrays_of_geometric_types_are_carried(case: PgCase) -> None:
    """``point[]`` (which the stream and the snapshot used to leave out, then refused) is
    carried as the text of each point, the same from the stream and from a snapshot."""
    case.sql("CREATE TABLE p (id int PRIMARY KEY, shapes point[], v text)")
    reader, start = _started(case, "p")
    described = reader.describe("public.p")
    assert described.schema.names == ["id", "shapes", "v"]
    assert described.refused == ()
    assert TableDescriptions(reader, {}).get("public.p").schema.names == ["id", "shapes", "v"]
    case.sql("INSERT INTO p VALUES (1, ARRAY[point(1, -0.5), NULL, point(1e20, 0)], 'a')")
    (change,) = [c for c in read_until_end(reader, start) if isinstance(c, RowChange)]
    row = {"id": 1, "shapes": ["(1,-0.5)", None, "(1e+20,0)"], "v": "a"}
    assert change.after == row
    with PostgresSnapshotReader(case.config("p")).snapshot(["p"]) as (_, tables):
        rows = [row for table in tables for batch in table.batches for row in batch.to_pylist()]
    assert rows == [row]


def test_stream_events_with_arrays_and_timetz(case: PgCase, tmp_path: Path) -> None:
    case.sql(_TABLE)
    reader, start = _started(case, "a")
    case.sql(
        _ROW_1,
        "INSERT INTO a (id, ints) VALUES (2, '{}')",  # an empty array is not NULL
        "UPDATE a SET ints[2] = 7, tz = '12:00:00.123+05:31' WHERE id = 1",
        "DELETE FROM a WHERE id = 2",
    )
    changes = read_until_end(reader, start)
    check_order(changes)
    x1, x2, x3, x4 = txids(changes)
    changed = {**ROW_1, "ints": [1, 7, -32768], "tz": {**ROW_1["tz"], "offset_seconds": 19_860}}
    key_only = dict.fromkeys(ROW_1.keys() - {"id"}, ABSENT)
    assert shown(changes) == [
        ("B", x1),
        ("c", x1, "a", (1,), ROW_1, None),
        ("C", x1),
        ("B", x2),
        ("c", x2, "a", (2,), ROW_2, None),
        ("C", x2),
        ("B", x3),
        ("u", x3, "a", (1,), {**changed, "big": ABSENT}, None),  # unchanged TOAST
        ("C", x3),
        ("B", x4),
        ("d", x4, "a", (2,), None, {"id": 2, **key_only}),
        ("C", x4),
    ]
    assert [rows for _, rows in committed(changes, tmp_path, KEYS)] == [
        [("c", "a", (1,), ROW_1, None)],
        [("c", "a", (2,), ROW_2, None)],
        [("u", "a", (1,), changed, ROW_1)],
        [("d", "a", (2,), None, ROW_2)],
    ]


def test_snapshot_reads_what_the_stream_decodes(case: PgCase) -> None:
    case.sql(_TABLE)
    reader, start = _started(case, "a")
    case.sql(_ROW_1, "INSERT INTO a (id, ints) VALUES (2, '{}')")
    images = {
        change.locator: change.after
        for change in read_until_end(reader, start)
        if isinstance(change, RowChange) and change.after is not None
    }
    with PostgresSnapshotReader(case.config("a")).snapshot(["a"]) as (_, tables):
        rows = [row for table in tables for batch in table.batches for row in batch.to_pylist()]
    assert rows == [ROW_1, ROW_2] == [images[(1,)], images[(2,)]]
    for row in rows:  # the same Python types too, element by element
        for column, value in row.items():
            assert _types(images[(row["id"],)][column]) == _types(value), column


def _types(value: object) -> object:
    if isinstance(value, list):
        return [_types(item) for item in value]
    if isinstance(value, dict):
        return {key: _types(item) for key, item in value.items()}
    return type(value)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("'{{1,2},{3,4}}'", "an array with 2 dimensions and lower bound 1 has no logical value"),
        ("'[0:1]={1,2}'", "an array with 1 dimensions and lower bound 0 has no logical value"),
    ],
)
def test_arrays_without_a_logical_value_are_errors_in_both_paths(
    case: PgCase, value: str, problem: str
) -> None:
    case.sql("CREATE TABLE m (id int PRIMARY KEY, grid int[])")
    reader, start = _started(case, "m")
    case.sql(f"INSERT INTO m VALUES (1, {value})")
    where = "column 'grid' of public.m: "
    with pytest.raises(TerminalError, match=where + problem) as streamed:
        read_until_end(reader, start)
    assert streamed.value.context == {"table": "public.m", "column": "grid"}
    connector = connector_for(case.server.url(case.database))
    schema = connector.reflect("m")
    with pytest.raises(TerminalError, match="column 'grid' of m: " + problem):
        list(connector.read_partition(schema, ["id", "grid"], Partition(0)))


def test_arrays_and_timetz_never_locate_rows(case: PgCase) -> None:
    case.sql(
        "CREATE TABLE keyed (tags text[] PRIMARY KEY, v int)",
        "CREATE TABLE loose (a int, tags text[], at timetz)",
        "ALTER TABLE loose REPLICA IDENTITY FULL",
    )
    reader = case.reader("keyed", "loose")
    with pytest.raises(TerminalError, match=r"table public.keyed: its key columns \['tags'\]"):
        reader.describe("public.keyed")
    assert reader.describe("public.loose").key == ("a",)


@pytest.mark.parametrize(
    "kind", ["int[]", "timetz", "point", "point[]"], ids=["array", "timetz", "point", "points"]
)
def test_a_column_that_cannot_locate_stays_out_of_an_older_messages_key(
    case: PgCase, kind: str
) -> None:
    """Changes of a table without a key, read after a RENAME of such a column and an ADD
    COLUMN: the message's key was rebuilt from its columns, the renamed one with them (the
    catalog no longer had its name), and the run stopped with "a row locator element cannot
    be a list" (postgres-full seed 412)."""
    case.sql(
        f"CREATE TABLE k (id int NOT NULL, n int, c3 {kind})",
        "ALTER TABLE k REPLICA IDENTITY FULL",
        "INSERT INTO k (id, n) VALUES (1, 10)",
    )
    reader, start = _started(case, "k")
    case.sql(
        "UPDATE k SET n = 11 WHERE id = 1",
        "ALTER TABLE k RENAME COLUMN c3 TO c4",
        "ALTER TABLE k ADD COLUMN c5 int",
    )
    changes = [c for c in read_until_end(reader, start) if isinstance(c, RowChange)]
    assert [(c.op, c.locator) for c in changes] == [("u", (1, 10))]  # the row as it was


def test_the_stream_carries_the_system_catalogs_domains_as_the_snapshot_does(
    case: PgCase,
) -> None:
    """``information_schema``'s domains have system OIDs, below any user type's: the stream
    used to drop their columns from its images (NULL or stale values in the lake), found by
    the catalog-driven differential tester."""
    case.sql(
        "CREATE TABLE d (id int PRIMARY KEY, flag information_schema.yes_or_no,"
        " flags information_schema.yes_or_no[], word information_schema.character_data,"
        " at information_schema.time_stamp)"
    )
    reader, start = _started(case, "d")
    case.sql(
        "INSERT INTO d VALUES (1, 'YES', ARRAY['YES', 'NO', NULL], 'x',"
        " '2024-05-06 07:08:09.12+00')"
    )
    images = [
        change.after
        for change in read_until_end(reader, start)
        if isinstance(change, RowChange) and change.after is not None
    ]
    with PostgresSnapshotReader(case.config("d")).snapshot(["d"]) as (_, tables):
        rows = [row for table in tables for batch in table.batches for row in batch.to_pylist()]
    assert images == rows
    assert rows[0]["flags"] == ["YES", "NO", None] and rows[0]["word"] == "x"
