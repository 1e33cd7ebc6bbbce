"""The ``spark`` and ``hybrid`` engines on an S3 lake (moto) and an Azure one (Azurite), on
loopback: the driver lists the Delta snapshot's files and Spark's executors read them through
pyarrow, with no Hadoop connector or Delta jar in the session. The executors' Python workers
were started before the test set the store's environment, so the lake's settings reach them
only with the task.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cdc_core.lake.layout import LakeTable
from cdc_core.lake_location import LakeLocation
from tests.cli_runs import catch_up
from tests.object_store.s3_server import S3Lake
from tests.object_store.test_cdc_and_validate import (
    _files_by_lowest_key,
    _run,
    _s3_config,
    four_file_lake,
)
from tests.private_servers import MariaDBServer
from validator.config import load_validator_config
from validator.demo.setup import found_differences
from validator.engines.sides.spark.store_files import store_frame
from validator.job import validate

pytestmark = [
    pytest.mark.object_store,
    pytest.mark.integration,
    pytest.mark.mariadb,
    pytest.mark.spark,
]

ROWS = 300


def _with_engine(config: Path, engine: str) -> Path:
    """A copy of ``config`` whose validation runs on ``engine``."""
    text = config.read_text(encoding="utf-8")
    assert "engine: local" in text
    changed = config.with_name(f"{engine}.yaml")
    changed.write_text(text.replace("engine: local", f"engine: {engine}"), encoding="utf-8")
    return changed


@pytest.mark.parametrize("store", ["s3", pytest.param("azure", marks=pytest.mark.azure)])
def test_the_spark_and_hybrid_engines_validate_an_object_store_lake(
    spark: Any,
    tmp_path: Path,
    store: str,
    request: pytest.FixtureRequest,
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
) -> None:
    assert "hadoop-aws" not in (spark.conf.get("spark.jars", "") or "")
    lake_url = request.getfixturevalue(f"{store}_lake").url
    database = mariadb_database(mariadb_full)
    table = f"{database}.items"
    rows = ", ".join(
        f"({i}, 'n{i}', {i}.25, {i / 7}, '2024-01-02 03:04:05.{i:06d}', '2024-02-{i % 28 + 1}')"
        for i in range(1, ROWS + 1)
    )
    _run(
        mariadb_full,
        database,
        "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20), price DECIMAL(10,2),"
        " score DOUBLE, seen DATETIME(6), day DATE)",
        f"INSERT INTO items VALUES {rows}",
    )
    config = _s3_config(tmp_path, mariadb_full.url(database), table, lake_url)
    catch_up(config)  # the initial load
    # Files written before a column was added lack it: they must read as NULL there.
    _run(
        mariadb_full,
        database,
        "ALTER TABLE items ADD COLUMN note VARCHAR(10)",
        "UPDATE items SET note = 'x', score = -score WHERE id % 5 = 0",
        "DELETE FROM items WHERE id BETWEEN 10 AND 19",
        "INSERT INTO items (id, name, note) VALUES (1000, 'late', 'y')",
    )
    catch_up(config)  # the changes: a changelog file after the mirror's first version
    engines = {name: _with_engine(config, name) for name in ("spark", "hybrid")}
    for name, path in engines.items():
        document = validate(spark, load_validator_config(path, environ=dict(os.environ)))
        (comparison,) = document["comparisons"]
        assert comparison["error"] is None, (name, comparison["error"])
        assert (comparison["status"], comparison["source_rows"]) == ("in_sync", ROWS - 9), name

    # Changes the binlog does not carry: every engine finds exactly them.
    _run(
        mariadb_full,
        database,
        "SET SESSION sql_log_bin = 0",
        "UPDATE items SET price = 9.99 WHERE id = 3",
        "UPDATE items SET note = NULL WHERE id = 5",
        "DELETE FROM items WHERE id = 1000",
    )
    expected = {
        ("items", "changed", ("3",)),
        ("items", "changed", ("5",)),
        ("items", "extra_in_target", ("1000",)),
    }
    for name, path in engines.items():
        found = found_differences(
            validate(spark, load_validator_config(path, environ=dict(os.environ)))
        )
        assert found == expected, name


def test_store_files_read_as_spark_reads_the_same_files_on_disk(
    spark: Any, tmp_path: Path, s3_lake: S3Lake
) -> None:
    """Every type a lake table holds, and a file without a later column, read through
    pyarrow in the executors equal Spark's own ``mergeSchema`` read of the same files."""
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("small", pa.int16()),
            ("price", pa.decimal128(12, 3)),
            ("score", pa.float64()),
            ("name", pa.string()),
            ("blob", pa.binary()),
            ("day", pa.date32()),
            ("seen", pa.timestamp("us")),
            ("at", pa.timestamp("us", tz="UTC")),
            ("flag", pa.bool_()),
            ("added", pa.string()),
        ]
    )
    first = pa.table(
        {
            "id": pa.array([1, 2], pa.int64()),
            "small": pa.array([-3, None], pa.int16()),
            "price": pa.array([None, Decimal("1.500")], pa.decimal128(12, 3)),
            "score": [0.1, float("inf")],
            "name": ["ä", None],
            "blob": pa.array([b"\x00\xff", b""], pa.binary()),
            "day": pa.array([0, 19000], pa.date32()),
            "seen": pa.array([1, None], pa.timestamp("us")),
            "at": pa.array([2, 3], pa.timestamp("us", tz="UTC")),
            "flag": [True, None],
        }
    )
    second = pa.table({**{n: first.column(n) for n in first.column_names}, "added": ["a", None]})
    second = second.set_column(0, "id", pa.array([3, 4], pa.int64()))
    lake = LakeLocation.from_config(s3_lake.url, {})
    filesystem, root = lake.filesystem()
    uris = []
    for number, part in enumerate((first, second)):
        pq.write_table(part, tmp_path / f"{number}.parquet")
        pq.write_table(part, f"{root}/t/{number}.parquet", filesystem=filesystem)
        uris.append(lake.join("t", f"{number}.parquet").url)
    local = spark.read.option("mergeSchema", "true").parquet(str(tmp_path))
    stored = store_frame(spark, uris, schema, lake.access())
    assert stored.schema == local.select(*schema.names).schema

    def by_id(frame: Any) -> list[Any]:
        return sorted(frame.collect(), key=lambda row: row["id"])

    assert by_id(stored) == by_id(local.select(*schema.names))
    assert stored.where("added IS NULL").count() == 3


def test_an_incremental_hybrid_run_fetches_only_the_mirror_files_of_its_leaves(
    spark: Any,
    tmp_path: Path,
    s3_lake: S3Lake,
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
) -> None:
    """As the local engine does (test_cdc_and_validate.py): the leaves a run re-hashes are
    read from only the mirror files whose key statistics meet them."""
    database = mariadb_database(mariadb_full)
    config, table = four_file_lake(tmp_path, mariadb_full, database, s3_lake.url)
    text = config.read_text(encoding="utf-8").replace("engine: local", "engine: hybrid")
    config.write_text(text.replace("validation: {", "validation: {incremental: true, "), "utf-8")

    def validated() -> dict[str, Any]:
        document = validate(spark, load_validator_config(config, environ=dict(os.environ)))
        (comparison,) = document["comparisons"]
        assert comparison["error"] is None, comparison["error"]
        return dict(comparison)

    assert validated()["coverage"]["mode"] == "full"
    _run(mariadb_full, database, "UPDATE items SET name = 'moved' WHERE id = 150")
    catch_up(config)
    _run(mariadb_full, database, "SET SESSION sql_log_bin = 0", "DELETE FROM items WHERE id = 150")
    mirror = LakeTable(LakeLocation.from_config(s3_lake.url, {}), table).mirror_at
    files = _files_by_lowest_key(mirror)
    with s3_lake.server.fetched() as fetched:
        second = validated()
    assert (second["coverage"]["mode"], second["engine"]) == ("incremental", "hybrid")
    assert second["counts_by_kind"] == {"extra_in_target": 1}
    read = {low for low, name in files.items() if any(p.endswith(name) for p in fetched)}
    assert read == {1, 101, 151}, fetched  # as in test_cdc_and_validate.py: not keys 51-100
