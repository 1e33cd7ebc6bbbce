"""Key changes on a real MariaDB server (FULL and MINIMAL row images) into the lake.

Issue 14, class 1: an UPDATE that changes the primary key left the old key in the mirror.
Each test checks the key-changing transaction's exact changelog events and that the mirror
and the changelog's state equal the source.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from cdc_core.names import COMMIT_POS, OP, SEQ
from tests.cdc_core.lake_model import changelog_state
from tests.connectors.mariadb.pipeline_helpers import (
    changelog,
    execute,
    lake_rows,
    mariadb_pipeline,
    source_rows,
)
from tests.private_servers import MariaDBServer

pytestmark = [pytest.mark.integration, pytest.mark.mariadb]


@pytest.fixture(params=["mariadb_full", "mariadb_minimal"])
def server(request: pytest.FixtureRequest) -> MariaDBServer:
    """The FULL and the MINIMAL row-image server."""
    return request.getfixturevalue(request.param)  # type: ignore[no-any-return]


def _last_transaction(lake: Path, table: str) -> list[tuple[str, tuple[object, ...], int]]:
    """(op, key, seq) of the newest transaction's events, in changelog order."""
    events = changelog(lake, table)
    newest = max(event[COMMIT_POS] for event in events)
    return [
        (event[OP], (event["a"], event["b"]), event[SEQ])
        for event in events
        if event[COMMIT_POS] == newest
    ]


def test_primary_key_updates_leave_no_old_key(
    server: MariaDBServer, mariadb_database: Callable[[MariaDBServer], str], tmp_path: Path
) -> None:
    database = mariadb_database(server)
    execute(
        server,
        database,
        "CREATE TABLE k (a INT, b VARCHAR(5), v VARCHAR(10), PRIMARY KEY (a, b))",
        "INSERT INTO k VALUES (1, 'x', 'one'), (2, 'x', 'two'), (3, 'x', 'three'), (9, 'y', 'n')",
    )
    table = f"{database}.k"
    with mariadb_pipeline(server, database, ["k"], tmp_path) as (pipeline, _):
        pipeline.run_until_caught_up()  # initial load
        execute(server, database, "UPDATE k SET b = 'z', v = 'nine' WHERE a = 9")
        execute(server, database, "UPDATE k SET a = a + 1 WHERE b = 'x' ORDER BY a DESC")
        pipeline.run_until_caught_up()

    lake = tmp_path / "lake"
    assert _last_transaction(lake, table) == [
        ("d", (3, "x"), 0), ("c", (4, "x"), 0),
        ("d", (2, "x"), 1), ("c", (3, "x"), 1),
        ("d", (1, "x"), 2), ("c", (2, "x"), 2),
    ]  # fmt: skip
    source = source_rows(server, database, "k", ["a", "b"])
    assert set(source) == {(2, "x"), (3, "x"), (4, "x"), (9, "z")}
    assert lake_rows(lake, table, ["a", "b"]) == source
    assert changelog_state(lake, table, ("a", "b")) == source


def test_a_vacated_key_taken_by_a_new_row_in_the_same_transaction(
    server: MariaDBServer, mariadb_database: Callable[[MariaDBServer], str], tmp_path: Path
) -> None:
    database = mariadb_database(server)
    execute(server, database, "CREATE TABLE m (id INT PRIMARY KEY, v INT)")
    with mariadb_pipeline(server, database, ["m"], tmp_path) as (pipeline, _):
        pipeline.run_until_caught_up()
        execute(
            server,
            database,
            "START TRANSACTION",
            "INSERT INTO m VALUES (1, 10), (2, 20)",
            "UPDATE m SET id = 5 WHERE id = 1",
            "INSERT INTO m VALUES (1, 11)",  # the vacated key, taken by a new row
            "UPDATE m SET id = 6 WHERE id = 5",
            "DELETE FROM m WHERE id = 2",
            "COMMIT",
        )
        pipeline.run_until_caught_up()

    table = f"{database}.m"
    source = source_rows(server, database, "m", ["id"])
    assert source == {(1,): {"id": 1, "v": 11}, (6,): {"id": 6, "v": 10}}
    assert lake_rows(tmp_path / "lake", table, ["id"]) == source
    assert changelog_state(tmp_path / "lake", table, ("id",)) == source
