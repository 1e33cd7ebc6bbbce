"""Zero and partial dates on a permissive server (``sql_mode=''``), FULL and MINIMAL images:
the log reader and the snapshot read zero dates as NULL, and stop on any other date that is
not a calendar date, naming table, column and key (``connectors/mariadb/zero_dates.py``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

import pytest

from connectors.mariadb.snapshot import MariaDBSnapshotReader
from connectors.mariadb.source_config import MariaDBSourceConfig
from connectors.mariadb.zero_dates import UnrepresentableDateError
from tests.connectors.mariadb.binlog_helpers import BinlogCase, image, read_until_end, shown
from tests.connectors.mariadb.pipeline_helpers import execute, lake_rows, mariadb_pipeline
from tests.private_servers import MariaDBServer

pytestmark = [pytest.mark.integration, pytest.mark.mariadb]

PERMISSIVE = ("SET SESSION sql_mode = ''", "SET SESSION time_zone = '+00:00'")
TABLE = (
    "CREATE TABLE z (id INT PRIMARY KEY, d DATE NOT NULL, dt DATETIME(3) NOT NULL,"
    " ts TIMESTAMP(6) NOT NULL DEFAULT '0000-00-00 00:00:00', dn DATE NULL,"
    " note VARCHAR(20))"
)
ZERO_ROW = {"id": 1, "d": None, "dt": None, "ts": None, "dn": None, "note": "a"}
SECRET = "do-not-show"  # a row value no error may carry


def _snapshot_rows(case: BinlogCase) -> list[dict[str, object]]:
    config = MariaDBSourceConfig(url=case.server.url(case.database), tables=("z",))
    with MariaDBSnapshotReader(config).snapshot(["z"]) as (_, tables):
        return [row for table in tables for batch in table.batches for row in batch.to_pylist()]


def test_zero_dates_are_null_in_the_log_and_the_snapshot(case: BinlogCase) -> None:
    case.sql(*PERMISSIVE, TABLE)
    reader = case.reader("z")
    start = reader.end_position()
    case.sql(
        "INSERT INTO z VALUES (1, '0000-00-00', '0000-00-00 00:00:00', 0, '0000-00-00', 'a')",
        "INSERT INTO z VALUES (2, '2024-05-06', '2024-05-06 07:08:09.123',"
        " '2024-05-06 07:08:09.5', NULL, 'b')",
        "UPDATE z SET d = '0000-00-00', dt = 0, ts = 0 WHERE id = 2",
        "UPDATE z SET note = 'c' WHERE id = 1",
        "DELETE FROM z WHERE id = 1",
    )
    real = {
        "id": 2,
        "d": dt.date(2024, 5, 6),
        "dt": dt.datetime(2024, 5, 6, 7, 8, 9, 123000),
        "ts": dt.datetime(2024, 5, 6, 7, 8, 9, 500000, tzinfo=dt.UTC),
        "dn": None,
        "note": "b",
    }
    zeroed = {**real, "d": None, "dt": None, "ts": None}
    key = ["id"] if case.minimal else None
    assert shown(read_until_end(reader, start)) == [
        ("B",),
        ("c", "z", (1,), ZERO_ROW, None),
        ("C",),
        ("B",),
        ("c", "z", (2,), real, None),
        ("C",),
        ("B",),
        (
            "u",
            "z",
            (2,),
            image(zeroed, ["d", "dt", "ts"] if case.minimal else None),
            image(real, key),
        ),
        ("C",),
        ("B",),
        (
            "u",
            "z",
            (1,),
            image({**ZERO_ROW, "note": "c"}, ["note"] if case.minimal else None),
            image(ZERO_ROW, key),
        ),
        ("C",),
        ("B",),
        ("d", "z", (1,), None, image({**ZERO_ROW, "note": "c"}, key)),
        ("C",),
    ]
    assert _snapshot_rows(case) == [zeroed]


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("d", "'2024-00-15'"),
        ("d", "'2024-01-00'"),
        ("d", "'0000-01-15'"),  # year 0: MariaDB can count its days, Python cannot
        ("dt", "'2024-00-15 10:00:00'"),
        ("dt", "'0000-00-00 00:00:00.001'"),  # a time on the zero date
    ],
)
def test_a_date_that_is_not_a_calendar_date_stops_the_log_and_the_snapshot(
    case: BinlogCase, column: str, value: str
) -> None:
    case.sql(*PERMISSIVE, TABLE)
    case.sql(f"INSERT INTO z VALUES (7, '2024-01-01', '2024-01-01', 0, NULL, '{SECRET}')")
    reader = case.reader("z")
    expected = {
        key: UnrepresentableDateError.of(case.table("z"), column, f"id={key}").message
        for key in (7, 8)
    }
    values = {"d": "'2024-01-01'", "dt": "0", column: value}
    start = reader.end_position()
    case.sql(
        f"INSERT INTO z (id, d, dt, note) VALUES (8, {values['d']}, {values['dt']}, '{SECRET}')"
    )
    _assert_refused(lambda: read_until_end(reader, start), expected[8])
    _assert_refused(lambda: _snapshot_rows(case), expected[8])

    # A change that does not carry the value reads; one that carries it stops the reader.
    start = reader.end_position()
    case.sql("UPDATE z SET note = 'x' WHERE id = 8", "DELETE FROM z WHERE id = 8")
    if case.minimal:  # before-images hold only the key, after-images the changed columns
        row = dict.fromkeys(ZERO_ROW) | {"id": 8, "note": "x"}  # only carried ones are kept
        assert shown(read_until_end(reader, start)) == [
            ("B",),
            ("u", "z", (8,), image(row, ["note"]), image(row, ["id"])),
            ("C",),
            ("B",),
            ("d", "z", (8,), None, image(row, ["id"])),
            ("C",),
        ]
    else:
        _assert_refused(lambda: read_until_end(reader, start), expected[8])
    start = reader.end_position()
    case.sql(f"UPDATE z SET {column} = {value} WHERE id = 7")
    _assert_refused(lambda: read_until_end(reader, start), expected[7])


def _assert_refused(read: Callable[[], object], message: str) -> None:
    with pytest.raises(UnrepresentableDateError) as raised:
        read()
    assert raised.value.message == message
    assert SECRET not in str(raised.value)


@pytest.mark.parametrize("image_server", ["mariadb_full", "mariadb_minimal"])
def test_defaults_complete_minimal_inserts_alike_zero_as_null_partial_refused(
    request: pytest.FixtureRequest,
    image_server: str,
    mariadb_database: Callable[[MariaDBServer], str],
    tmp_path: Path,
) -> None:
    """A MINIMAL insert leaves constant defaults out of the log; the pipeline completes a
    zero default as NULL and stops on a partial one exactly as the FULL image stops it."""
    server: MariaDBServer = request.getfixturevalue(image_server)
    database = mariadb_database(server)
    execute(
        server,
        database,
        *PERMISSIVE,
        "CREATE TABLE dflt (id INT PRIMARY KEY, zero DATE NOT NULL DEFAULT '0000-00-00',"
        " stamp TIMESTAMP NOT NULL DEFAULT '0000-00-00 00:00:00',"
        " part DATE NULL DEFAULT '2024-00-01')",
    )
    table = f"{database}.dflt"
    with mariadb_pipeline(server, database, ["dflt"], tmp_path) as (pipeline, _):
        pipeline.run_until_caught_up()  # loads the empty table: the rows come by the log
        execute(server, database, *PERMISSIVE, "INSERT INTO dflt (id, part) VALUES (1, NULL)")
        pipeline.run_until_caught_up()
        assert lake_rows(tmp_path / "lake", table, ["id"]) == {
            (1,): {"id": 1, "zero": None, "stamp": None, "part": None}
        }
        execute(server, database, *PERMISSIVE, "INSERT INTO dflt (id) VALUES (2)")
        with pytest.raises(UnrepresentableDateError) as raised:
            pipeline.run_until_caught_up()
    assert raised.value.message == UnrepresentableDateError.of(table, "part", "id=2").message
