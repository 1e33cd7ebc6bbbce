"""Live database targets: lagging rows are not drift; still-changing rows are in flight."""

from __future__ import annotations

import contextlib
import decimal
from collections.abc import Callable
from typing import Any

import pytest

from connectors.registry import connector_for
from merkle.layout import RowLayout
from merkle.types import DecimalType, IntegerType, StringType
from tests.private_servers import MariaDBServer, PostgresServer
from validator.recheck import LiveTable, can_recheck, confirm
from validator.result import Changed, ComparisonResult, ExtraInTarget, MissingInTarget, Status

pytestmark = [pytest.mark.integration, pytest.mark.mariadb, pytest.mark.postgres]

LAYOUT = RowLayout.of(
    [("id", IntegerType()), ("name", StringType()), ("amount", DecimalType(10, 2))], ["id"]
)


@pytest.fixture
def live_pair(
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    postgres: PostgresServer,
    postgres_database: Callable[[PostgresServer], str],
) -> tuple[Any, Any, LiveTable, LiveTable]:
    source_db, target_db = mariadb_database(mariadb_full), postgres_database(postgres)
    rows = [(i, f"n{i}", decimal.Decimal(i)) for i in range(1, 41)]
    source = mariadb_full.connect(source_db)
    with source.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(20), amount DECIMAL(10,2))")
        cur.executemany("INSERT INTO t VALUES (%s, %s, %s)", rows)
    target = postgres.connect(target_db)
    target.execute("CREATE TABLE t (id int PRIMARY KEY, name varchar(20), amount numeric(10,2))")
    with target.cursor() as cur:
        cur.executemany("INSERT INTO t VALUES (%s, %s, %s)", [r for r in rows if r[0] != 30])
    tables = []
    for url in (mariadb_full.url(source_db), postgres.url(target_db)):
        connector = connector_for(url)
        tables.append(LiveTable(connector, connector.reflect("t"), LAYOUT.names, ("id",)))
    return source, target, tables[0], tables[1]


def run_source(connection: Any, sql: str) -> None:
    with connection.cursor() as cur:
        cur.execute(sql)


def test_confirmed_arrived_and_in_flight_are_told_apart(live_pair: Any) -> None:
    source, target, source_table, target_table = live_pair
    with contextlib.closing(source), contextlib.closing(target):
        target.execute("UPDATE t SET amount = 999 WHERE id = 5")  # real drift
        run_source(source, "UPDATE t SET name = 'lagging' WHERE id = 10")  # not replicated yet
        run_source(source, "UPDATE t SET name = 'hot-1' WHERE id = 20")  # keeps changing

        def replication_lag(_: float) -> None:
            target.execute("UPDATE t SET name = 'lagging' WHERE id = 10")  # arrives
            target.execute("INSERT INTO t VALUES (30, 'n30', 30)")  # arrives
            run_source(source, "UPDATE t SET name = 'hot-2' WHERE id = 20")  # changes again

        found = ComparisonResult(
            name="t",
            status=Status.DIFFERENCES,
            source="mariadb:t",
            target="pg:t",
            differences=(
                Changed(("5",), ()),
                Changed(("10",), ()),
                Changed(("20",), ()),
                MissingInTarget(("30",)),
                ExtraInTarget(("77",)),
            ),
            differences_total=6,  # one more than detailed: stays counted, unchecked
            counts_by_kind={"changed": 3, "missing_in_target": 1, "extra_in_target": 2},
        )
        result = confirm(found, LAYOUT, source_table, target_table, 1.0, replication_lag)
    assert [d.key for d in result.differences] == [("5",)]
    assert result.in_flight == (("20",),)
    assert result.status is Status.DIFFERENCES
    assert result.differences_total == 2 and result.differences_omitted == 1
    assert result.counts_by_kind == {"changed": 1}


def test_everything_arrived_means_in_sync(live_pair: Any) -> None:
    source, target, source_table, target_table = live_pair
    with contextlib.closing(source), contextlib.closing(target):
        found = ComparisonResult(
            name="t",
            status=Status.DIFFERENCES,
            source="s",
            target="t",
            differences=(MissingInTarget(("30",)),),
            differences_total=1,
        )
        result = confirm(
            found,
            LAYOUT,
            source_table,
            target_table,
            0.5,
            lambda _: target.execute("INSERT INTO t VALUES (30, 'n30', 30)"),
        )
    assert result.status is Status.IN_SYNC
    assert result.differences == () and result.in_flight == ()


def test_only_textual_key_types_can_be_rechecked() -> None:
    assert can_recheck(LAYOUT)
    from merkle.types import FloatType

    assert not can_recheck(RowLayout.of([("x", FloatType())], ["x"]))
