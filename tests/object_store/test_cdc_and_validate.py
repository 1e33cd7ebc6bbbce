"""End to end on an S3 lake (moto on loopback): ``cdc run`` of a MariaDB table writes its
changelog, mirror and progress into the bucket (the state directory stays local), and
``validate`` with the local engine reads them back through pyarrow's S3 filesystem. The
Azure test (test_azure_cdc_and_validate.py) runs the same steps."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cdc_core.lake.layout import LakeTable, read_progress
from cdc_core.lake_location import LakeLocation
from tests.cli_runs import catch_up, replcheck, validate, write_config
from tests.object_store.s3_server import S3Lake
from tests.private_servers import MariaDBServer

pytestmark = [
    pytest.mark.object_store,
    pytest.mark.integration,
    pytest.mark.mariadb,
]


def _s3_config(work: Path, url: str, table: str, lake: str, options: str = "") -> Path:
    """``tests.cli_runs.write_config`` with its lake on the store."""
    config = write_config(work, url, [table], options=options, compared=(table, table))
    local = f"  lake: {{lake: {json.dumps(str(work / 'lake'))}}}"
    text = config.read_text(encoding="utf-8")
    assert local in text
    config.write_text(text.replace(local, f"  lake: {{lake: {json.dumps(lake)}}}"), "utf-8")
    return config


def four_file_lake(
    work: Path, server: MariaDBServer, database: str, lake_url: str
) -> tuple[Path, str]:
    """A table of keys 1-200 replicated into ``lake_url`` in batches of 50 events, so its
    mirror has four files of 50 keys; the config (local engine) and the table."""
    table = f"{database}.items"
    _run(
        server,
        database,
        "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20))",
        "INSERT INTO items VALUES " + ", ".join(f"({i}, 'n{i}')" for i in range(1, 201)),
    )
    options = "batch: {max_events: 50}"
    config = _s3_config(work, server.url(database), table, lake_url, options)
    catch_up(config)
    return config, table


def _files_by_lowest_key(mirror: LakeLocation) -> dict[int, str]:
    """The mirror's data files' names by the lowest key each holds (Delta's statistics)."""
    actions = mirror.open_delta().get_add_actions(flatten=True)
    paths, lows = (actions.column(name).to_pylist() for name in ("path", "min.id"))
    return {int(low): path.rsplit("/", 1)[-1] for path, low in zip(paths, lows, strict=True)}


def _run(server: MariaDBServer, database: str, *statements: str) -> None:
    with contextlib.closing(server.connect(database)) as conn, conn.cursor() as cur:
        for statement in statements:
            cur.execute(statement)
        conn.commit()


def test_cdc_run_into_s3_then_validate(
    tmp_path: Path,
    s3_lake: S3Lake,
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
) -> None:
    cdc_run_then_validate(tmp_path, s3_lake.url, mariadb_full, mariadb_database(mariadb_full))


def cdc_run_then_validate(
    tmp_path: Path, lake_url: str, mariadb_full: MariaDBServer, database: str
) -> None:
    """Replicate a table into ``lake_url``, read it back, validate it in sync, then find a
    drift the binlog does not carry (shared by the stores' tests)."""
    table = f"{database}.items"
    _run(
        mariadb_full,
        database,
        "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20), price DECIMAL(10,2))",
        "INSERT INTO items VALUES (1, 'a', 1.50), (2, 'b', 2.00), (3, 'c', 3.25)",
    )
    config = _s3_config(tmp_path, mariadb_full.url(database), table, lake_url)
    catch_up(config)  # the initial load
    _run(
        mariadb_full,
        database,
        "INSERT INTO items VALUES (4, 'd', 4.00)",
        "UPDATE items SET name = 'A' WHERE id = 1",
        "DELETE FROM items WHERE id = 2",
    )
    catch_up(config)  # the changes, from the binlog
    catch_up(config)  # nothing new: nothing written twice

    lake = LakeLocation.from_config(lake_url, {})
    stored = LakeTable(lake, table)
    mirror = stored.mirror_at.open_delta().to_pyarrow_table().sort_by("id")
    assert mirror.select(["id", "name"]).to_pylist() == [
        {"id": 1, "name": "A"},
        {"id": 3, "name": "c"},
        {"id": 4, "name": "d"},
    ]
    changelog = stored.changelog_at.open_delta().to_pyarrow_table()
    assert sorted(changelog["_op"].to_pylist()) == ["c", "d", "r", "r", "r", "u"]
    assert set(read_progress(lake)) == {"p"}
    assert (tmp_path / "state").is_dir()  # the pipeline's state stays local
    assert not (tmp_path / "lake").exists() and not Path(lake.scheme + ":").exists()

    code, comparison = validate(config, tmp_path / "in-sync")
    assert (code, comparison["status"]) == (0, "in_sync"), comparison

    # A change the binlog does not carry: the pipeline cannot see it, validate must.
    _run(
        mariadb_full,
        database,
        "SET SESSION sql_log_bin = 0",
        "UPDATE items SET price = 9.99 WHERE id = 3",
    )
    code, comparison = validate(config, tmp_path / "drifted")
    assert (code, comparison["status"]) == (1, "differences"), comparison
    (difference,) = comparison["differences"]
    assert difference["key"] == ["3"]
    assert difference["columns"] == [{"column": "price", "source": "9.99", "target": "3.25"}]


def test_incremental_validation_and_run_history_live_in_the_s3_lake(
    tmp_path: Path,
    s3_lake: S3Lake,
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
) -> None:
    """``validate --incremental`` keeps its state under ``<lake>/_replcheck/validation`` and
    the run history under ``<lake>/_replcheck/history`` in the bucket; the second run reuses
    the stored digests, still finds a drift in a changed leaf, and fetches only the mirror
    files that hold its leaves (the load wrote one file of 50 keys per batch)."""
    database = mariadb_database(mariadb_full)
    config, table = four_file_lake(tmp_path, mariadb_full, database, s3_lake.url)

    def incremental(out: str) -> tuple[int, dict[str, Any]]:
        finished = replcheck(
            "validate", "--config", str(config), "--out", str(tmp_path / out), "--incremental"
        )
        (comparison,) = json.loads((tmp_path / out / "result.json").read_text())["comparisons"]
        return finished.returncode, comparison

    code, first = incremental("first")
    assert (code, first["status"], first["coverage"]["mode"]) == (0, "in_sync", "full"), first
    stored = s3_lake.object_keys("_replcheck")
    assert any(k.startswith("_replcheck/validation/") and k.endswith(".arrow") for k in stored)
    assert any(k.startswith("_replcheck/history/_delta_log/") for k in stored), stored
    assert not (tmp_path / "history.jsonl").exists()  # not beside the output folders

    # A change the pipeline carries, then a drift of the same row it does not: the changed
    # leaf is re-hashed, so the incremental run finds the drift.
    _run(mariadb_full, database, "UPDATE items SET name = 'moved' WHERE id = 150")
    catch_up(config)
    _run(mariadb_full, database, "SET SESSION sql_log_bin = 0", "DELETE FROM items WHERE id = 150")
    mirror = LakeTable(LakeLocation.from_config(s3_lake.url, {}), table).mirror_at
    files = _files_by_lowest_key(mirror)
    assert sorted(files) == [1, 51, 101, 151], files  # 101-150 rewritten by the update
    with s3_lake.server.fetched() as fetched:
        code, second = incremental("second")
    assert second["coverage"]["mode"] == "incremental", second["coverage"]
    assert second["coverage"]["leaves_changed"] == 1
    assert (code, second["counts_by_kind"]) == (1, {"extra_in_target": 1}), second
    # The changed leaf (keys 144-156 of 13-key leaves) and the sweep's first leaf of each of
    # the source's two slices (keys 1-13, 105-117) lie in three of the four files.
    read = {low for low, name in files.items() if any(p.endswith(name) for p in fetched)}
    assert read == {1, 101, 151}, fetched
    history = LakeLocation.from_config(s3_lake.url, {}).join("_replcheck", "history")
    assert history.open_delta().to_pyarrow_table().num_rows == 2  # one row per run
