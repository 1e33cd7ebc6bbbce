"""Values at the edges of MariaDB's integer types reach the lake exactly, snapshot and log.

BIT(64) holds up to 2**64 - 1, beyond Arrow's int64: it is read as DECIMAL(20,0) like
BIGINT UNSIGNED (a value of 2**63 or more used to stop the snapshot with an overflow).
YEAR 0000 is the number 0 in every reader (its text is ``'0000'``).
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest

from cdc_core.names import format_table
from tests.connectors.mariadb.pipeline_helpers import execute, lake_rows, mariadb_pipeline
from tests.private_servers import MariaDBServer

pytestmark = [pytest.mark.integration, pytest.mark.mariadb]

TOP = (1 << 64) - 1


def test_bit64_and_year_0000_reach_the_lake_from_the_snapshot_and_the_log(
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    tmp_path: Path,
) -> None:
    database = mariadb_database(mariadb_full)
    execute(
        mariadb_full,
        database,
        "CREATE TABLE t (id INT PRIMARY KEY, b BIT(64), y YEAR)",
        f"INSERT INTO t VALUES (1, {TOP}, 0), (2, NULL, NULL), (4, {TOP}, 0)",
    )
    with mariadb_pipeline(mariadb_full, database, ["t"], tmp_path) as (pipeline, _):
        pipeline.run_until_caught_up()  # the snapshot
        execute(
            mariadb_full,
            database,
            f"INSERT INTO t VALUES (3, {1 << 63}, 0)",
            f"UPDATE t SET b = {TOP - 1}, y = 2155 WHERE id = 1",
        )
        pipeline.run_until_caught_up()  # the log
    rows = lake_rows(tmp_path / "lake", format_table(database, "t"), ["id"])
    assert rows == {
        (1,): {"id": 1, "b": Decimal(TOP - 1), "y": 2155},
        (2,): {"id": 2, "b": None, "y": None},
        (3,): {"id": 3, "b": Decimal(1 << 63), "y": 0},
        (4,): {"id": 4, "b": Decimal(TOP), "y": 0},
    }
