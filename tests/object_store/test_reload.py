"""A table loaded again after a DDL on an S3 lake (moto on loopback): the pipeline moves its
changelog and mirror aside under ``_replcheck/retired`` (a copy of each object, then a
delete) and loads it anew, and a validation that reads the table while it is moved runs
again (``validator.reloads``), as on local disk."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

from cdc_core.capture.position import Position
from cdc_core.lake.layout import ChangelogMoved, LakeTable, changelog_files
from cdc_core.lake.sink import LakeSink
from cdc_core.lake_location import LakeLocation
from cdc_core.names import format_table
from tests.cli_runs import catch_up, validate
from tests.object_store.s3_server import S3Lake
from tests.object_store.test_cdc_and_validate import _run, _s3_config
from tests.private_servers import MariaDBServer
from validator.reloads import through_reloads

pytestmark = [pytest.mark.object_store, pytest.mark.integration]


def test_a_key_change_loads_the_table_again_into_the_s3_lake(
    tmp_path: Path,
    s3_lake: S3Lake,
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
) -> None:
    database = mariadb_database(mariadb_full)
    table = format_table(database, "items")
    _run(
        mariadb_full,
        database,
        "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL, price INT)",
        "INSERT INTO items VALUES (1, 'a', 10), (2, 'b', 20), (3, 'c', 30)",
    )
    config = _s3_config(tmp_path, mariadb_full.url(database), table, s3_lake.url)
    catch_up(config)
    stored = LakeTable(LakeLocation.from_config(s3_lake.url, {}), table)
    first_id = stored.changelog_at.open_delta().metadata().id

    _run(
        mariadb_full,
        database,
        "ALTER TABLE items DROP PRIMARY KEY, ADD PRIMARY KEY (name)",
        "INSERT INTO items VALUES (4, 'd', 40)",
        "UPDATE items SET price = 21 WHERE name = 'b'",
    )
    catch_up(config)

    assert stored.changelog_at.open_delta().metadata().id != first_id  # a new generation
    retired = s3_lake.object_keys("_replcheck/retired")
    retired = [k for k in retired if "/changelog/_delta_log/" in k]
    assert retired and all(f"/p/{database}/items@" in f"/{k}" for k in retired), retired
    rows = stored.mirror_at.open_delta().to_pyarrow_table().sort_by("id")
    assert rows.select(["id", "name", "price"]).to_pylist() == [
        {"id": 1, "name": "a", "price": 10},
        {"id": 2, "name": "b", "price": 21},
        {"id": 3, "name": "c", "price": 30},
        {"id": 4, "name": "d", "price": 40},
    ]
    code, comparison = validate(config, tmp_path / "after")
    assert (code, comparison["status"]) == (0, "in_sync"), comparison


def _written(table: LakeTable, rows: int) -> None:
    data = pa.table({"id": list(range(rows))})
    table.changelog_at.write_delta(data, mode="append")


@pytest.mark.parametrize("store", ["s3_lake", pytest.param("azure_lake", marks=pytest.mark.azure)])
def test_a_validation_reading_a_table_moved_aside_in_a_store_runs_again(
    store: str, request: pytest.FixtureRequest
) -> None:
    lake = LakeLocation.from_config(request.getfixturevalue(store).url, {})
    table = LakeTable(lake, "shop.t")
    _written(table, 3)
    sink = LakeSink(lake, "p")
    calls: list[int] = []

    def compare() -> int:
        calls.append(1)
        if len(calls) == 1:
            assert sink.retire_table("shop.t", Position(7, "7")) is not None
            with pytest.raises(ChangelogMoved):  # gone, and moved aside: read again
                changelog_files(table)
            _written(table, 5)  # the new load
            raise OSError("No files in log segment")  # as deltalake says it
        return table.changelog_at.open_delta().to_pyarrow_table().num_rows

    assert through_reloads(compare, table) == 5
    assert len(calls) == 2
    retired = lake.join("_replcheck", "retired", "p", "shop", "t@7", "changelog")
    assert retired.open_delta().to_pyarrow_table().num_rows == 3  # the old generation, whole


def test_a_failure_while_the_s3_table_stayed_is_the_comparisons_own(s3_lake: S3Lake) -> None:
    table = LakeTable(LakeLocation.from_config(s3_lake.url, {}), "shop.t")
    _written(table, 3)
    calls: list[int] = []

    def compare() -> int:
        calls.append(1)
        raise OSError("No files in log segment")

    with pytest.raises(OSError, match="log segment"):
        through_reloads(compare, table)
    assert len(calls) == 1
