"""A table without a key: its rows are located by all their columns, and equal rows are
kept apart by nothing but their number."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from cdc_core.lake import META_COLUMNS, LakeTable
from tests.connectors.mariadb.pipeline_helpers import execute, mariadb_pipeline
from tests.private_servers import MariaDBServer


def _source(server: MariaDBServer, database: str) -> Counter[tuple[object, ...]]:
    import contextlib

    with contextlib.closing(server.connect(database)) as conn, conn.cursor() as cur:
        cur.execute("SELECT a, b FROM k")
        return Counter(tuple(row) for row in cur.fetchall())


def _mirror(lake: Path, table: str) -> Counter[tuple[object, ...]]:
    from deltalake import DeltaTable

    rows = DeltaTable(str(LakeTable(lake, table).mirror)).to_pyarrow_table().to_pylist()
    return Counter(tuple(v for c, v in row.items() if c not in META_COLUMNS) for row in rows)


@pytest.mark.integration
@pytest.mark.mariadb
@pytest.mark.xfail(
    strict=True,
    reason="issue 14: the mirror of a table without a key merges on all columns, so equal"
    " rows collapse into one (the changelog holds every event); open",
)
def test_equal_rows_of_a_keyless_table_stay_apart(
    mariadb_full: MariaDBServer, mariadb_database: Callable[[MariaDBServer], str], tmp_path: Path
) -> None:
    database = mariadb_database(mariadb_full)
    execute(
        mariadb_full,
        database,
        "CREATE TABLE k (a INT, b VARCHAR(5))",
        "INSERT INTO k VALUES (1, 'x'), (1, 'x'), (2, 'y')",
    )
    with mariadb_pipeline(mariadb_full, database, ["k"], tmp_path) as (pipeline, _):
        pipeline.run_until_caught_up()
        execute(
            mariadb_full,
            database,
            "INSERT INTO k VALUES (2, 'y')",
            "DELETE FROM k WHERE a = 1 LIMIT 1",
            "UPDATE k SET b = 'z' WHERE a = 2 LIMIT 1",
        )
        pipeline.run_until_caught_up()
    source = _source(mariadb_full, database)
    assert source == Counter({(1, "x"): 1, (2, "y"): 1, (2, "z"): 1})
    assert _mirror(tmp_path / "lake", f"{database}.k") == source
