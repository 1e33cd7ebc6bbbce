"""Incremental validation (the hybrid and the local engine, key-range leaves) against a
lake written by the real pipeline from a private MariaDB server, judged by full runs on the
same data.

The table holds the even keys 2..2000 in 16 leaves of 125 keys (``depth: 4``); each
incremental run sweeps 4 leaves (``sweep_share: 0.25``), two in each of the source's two
slices of 8 leaves (run i sweeps leaves 2i-2, 2i-1, 2i+6 and 2i+7), so every leaf is swept
within 4 runs. Drift is
made at the source without a log record (``SET sql_log_bin = 0``): the pipeline never sees
it, so only a re-hash of its leaf can find it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from cdc_core.lake.layout import LakeTable
from cdc_core.names import format_table
from reports.json_schema import validate_result
from tests.connectors.mariadb.pipeline_helpers import execute, mariadb_pipeline
from tests.private_servers import MariaDBServer
from validator.config import load_validator_config
from validator.demo.setup import found_differences
from validator.incremental.state import (
    LogMark,
    legacy_path,
    read_state,
    state_path,
    write_state,
)
from validator.job import validate

pytestmark = [pytest.mark.integration, pytest.mark.mariadb, pytest.mark.spark]

WIDTH = 125  # keys per leaf: the even keys 2..2000 span 1999 keys, depth 4 -> 16 leaves
RUNS = 4  # sweep_share 0.25: every leaf swept within 4 incremental runs
UNLOGGED = "SET sql_log_bin = 0"


def _leaf(key: int) -> int:
    return (key - 2) // WIDTH


class Lake:
    """A MariaDB table ``orders``, its lake written by the pipeline, and validations of it."""

    def __init__(
        self, spark: Any, server: MariaDBServer, database: str, work: Path, engine: str
    ) -> None:
        self.spark, self.server, self.database, self.work = spark, server, database, work
        self.engine = engine
        self.table = LakeTable(work / "lake", format_table(database, "orders"))
        rows = ", ".join(f"({k}, {k * 3}, 'n{k}')" for k in range(2, 2001, 2))
        self.source(
            "CREATE TABLE orders (id INT PRIMARY KEY, amount INT NOT NULL, note VARCHAR(20))",
            f"INSERT INTO orders VALUES {rows}",
        )
        self.catch_up()

    def source(self, *statements: str) -> None:
        execute(self.server, self.database, *statements)

    def catch_up(self) -> None:
        with mariadb_pipeline(self.server, self.database, ["orders"], self.work) as (run, _):
            run.run_until_caught_up()

    def validate(
        self, *, incremental: bool = True, full: bool = False, extra: str = "", depth: int = 4
    ) -> Any:
        """The comparison ``orders`` (``incremental: false``: a full run keeping no state;
        ``depth`` 0: the depth replcheck chooses)."""
        target = json.dumps(self.table.table)
        options = f"{{depth: {depth}}}" if depth else "{}"
        path = self.work / "validator.yaml"
        path.write_text(
            "connections:\n"
            f"  src: {{url: {json.dumps(self.server.url(self.database))}}}\n"
            f"  lake: {{lake: {json.dumps(str(self.table.lake))}}}\n"
            "comparisons:\n"
            "  - {name: orders, source: {connection: src, table: orders},\n"
            f"     target: {{connection: lake, table: {target}}}, options: {options}{extra}}}\n"
            f"validation: {{lake_wait_timeout_s: 60, engine: {self.engine}, sweep_share: 0.25,"
            f" incremental: {str(incremental).lower()}, force_full: {str(full).lower()}}}\n",
            encoding="utf-8",
        )
        document = validate(self.spark, load_validator_config(path, environ={}))
        validate_result(document)
        (comparison,) = document["comparisons"]
        assert comparison["error"] is None, comparison["error"]
        assert comparison["engine"] == self.engine
        return comparison

    @property
    def state(self) -> Path:
        return state_path(self.table, "orders")


@pytest.fixture(params=["hybrid", "local"])
def lake(
    request: pytest.FixtureRequest,
    spark: Any,
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    tmp_path: Path,
) -> Lake:
    """The lake, validated by the hybrid engine (Spark on the lake) or the local (DuckDB)."""
    database = mariadb_database(mariadb_full)
    return Lake(spark, mariadb_full, database, tmp_path, request.param)


def _found(comparison: dict[str, Any]) -> set[tuple[str, tuple[str, ...]]]:
    return {f[1:] for f in found_differences({"comparisons": [comparison]})}


def _first_run(lake: Lake) -> dict[str, Any]:
    first = lake.validate()
    assert first["status"] == "in_sync"
    assert first["coverage"]["mode"] == "full"
    assert first["coverage"]["reason"].startswith("first run: no validation state stored at")
    assert lake.state.is_file()
    return first


def test_a_comparison_keeping_its_state_gets_smaller_leaves(lake: Lake) -> None:
    # Keys 2..2000, a span of 1,999: leaves of about 16 keys (2**7) when the comparison keeps
    # its state, so a change re-hashes few rows; about 256 (2**3) when it does not.
    assert lake.validate(depth=0)["leaves_compared"] == 2**7
    assert lake.validate(depth=0, incremental=False)["leaves_compared"] == 2**3


def test_incremental_runs_find_what_a_full_run_finds_changed_leaves_at_once_others_when_swept(
    lake: Lake,
) -> None:
    first = _first_run(lake)
    assert first["leaves_compared"] == 16
    # Logged changes the pipeline carries: leaves 0 and 2 change, and a key moves 4 -> 1001
    # (leaves 0 and 7: the old key's delete and the new key's insert).
    lake.source(
        "UPDATE orders SET amount = 1 WHERE id = 10",
        "DELETE FROM orders WHERE id = 300",
        "UPDATE orders SET id = 1001 WHERE id = 4",
    )
    lake.catch_up()
    # Unlogged drift: in changed leaves (0, 2) and in leaves nothing logged touches (9, 12,
    # 13), one of each kind.
    lake.source(
        UNLOGGED,
        "UPDATE orders SET note = 'x' WHERE id = 20",  # leaf 0: changed
        "INSERT INTO orders VALUES (21, 0, NULL)",  # leaf 0: missing in the lake
        "DELETE FROM orders WHERE id = 302",  # leaf 2: extra in the lake
        "UPDATE orders SET amount = 0 WHERE id = 1130",  # leaf 9: changed
        "INSERT INTO orders VALUES (1503, 0, NULL)",  # leaf 12: missing in the lake
        "DELETE FROM orders WHERE id = 1700",  # leaf 13: extra in the lake
    )
    everything = _found(lake.validate(incremental=False))
    assert everything == {
        ("changed", ("20",)),
        ("missing_in_target", ("21",)),
        ("extra_in_target", ("302",)),
        ("changed", ("1130",)),
        ("missing_in_target", ("1503",)),
        ("extra_in_target", ("1700",)),
    }
    changed_leaves = {0, 2, 7}
    swept: set[int] = set()
    for run in range(1, RUNS + 1):
        result = lake.validate()
        coverage = result["coverage"]
        swept |= {2 * run - 2 + offset for offset in (0, 1, 8, 9)}
        assert coverage["mode"] == "incremental", coverage["reason"]
        assert coverage["sweep_runs"] == RUNS
        assert coverage["runs_until_swept"] == RUNS - run
        assert coverage["from_position"] is not None
        assert coverage["to_position"] == result["source_position"]
        expected = {f for f in everything if _leaf(int(f[1][0])) in changed_leaves | swept}
        assert _found(result) == expected, f"run {run}"
        if run == 1:  # leaves 0, 1, 8, 9 are swept, the changed ones besides re-hashed
            assert coverage["leaves_changed"] == len(changed_leaves)
            assert coverage["leaves_swept"] == 3  # leaves 1, 8 and 9
            assert coverage["leaves_reused"] == 16 - 6
    assert _found(result) == everything  # within the promised number of runs
    assert "cannot see, until its leaf is swept" in result["coverage"]["guarantee"]


def test_a_state_of_other_columns_or_positions_or_lake_lineage_is_never_reused(
    lake: Lake,
) -> None:
    _first_run(lake)
    lake.source(UNLOGGED, "UPDATE orders SET note = 'x' WHERE id = 1130")  # leaf 9
    other = lake.validate(extra=", columns: {exclude: [amount]}")
    assert other["coverage"]["mode"] == "full"
    assert "another configuration (columns, target_columns differ)" in other["coverage"]["reason"]
    assert _found(other) == {("changed", ("1130",))}  # a full run sees the unlogged drift
    back = lake.validate()  # the state now is of the other columns: full again
    assert back["coverage"]["mode"] == "full"
    assert "another configuration" in back["coverage"]["reason"]
    # A state that holds for a later position than the run's (another position lineage).
    stored = read_state(lake.state)
    assert stored is not None
    write_state(lake.state, replace(stored, low=1 << 62, high=1 << 62))
    later = lake.validate()
    assert later["coverage"]["mode"] == "full"
    assert "(another position lineage)" in later["coverage"]["reason"]
    # A state of another Delta table at the lake's path (the changelog created again).
    stored = read_state(lake.state)
    assert stored is not None
    write_state(lake.state, replace(stored, changelog=LogMark("another table", 0)))
    again = lake.validate()
    assert again["coverage"]["mode"] == "full"
    assert "was created again since the stored state" in again["coverage"]["reason"]
    assert _found(again) == {("changed", ("1130",))}


def test_a_lake_altered_behind_the_pipelines_back_makes_a_full_run(lake: Lake) -> None:
    _first_run(lake)
    DeltaTable(str(lake.table.mirror)).delete("id = 1000")  # no replcheck commit metadata
    result = lake.validate()
    coverage = result["coverage"]
    assert coverage["mode"] == "full"
    assert "(DELETE) was not written by the pipeline" in coverage["reason"]
    assert str(lake.table.mirror) in coverage["reason"]
    assert _found(result) == {("missing_in_target", ("1000",))}
    assert [f["kind"] for f in result["lake_findings"]] == ["foreign_commit"]
    assert lake.validate()["coverage"]["mode"] == "incremental"  # the full run's state is good


def test_a_corrupt_state_file_makes_a_full_run_naming_it_and_is_replaced(lake: Lake) -> None:
    _first_run(lake)
    lake.state.write_bytes(lake.state.read_bytes()[:-64])  # cut short
    result = lake.validate()
    assert result["status"] == "in_sync"
    assert result["coverage"]["mode"] == "full"
    assert f"the state file {lake.state} is not a validation state" in result["coverage"]["reason"]
    assert lake.validate()["coverage"]["mode"] == "incremental"
    # A state of format 1 or 2 (a JSON file) is not read, and the full run removes it.
    lake.state.replace(legacy_path(lake.state))
    older = lake.validate()["coverage"]
    assert older["mode"] == "full"
    assert f"{legacy_path(lake.state)} is of an older format" in older["reason"]
    assert lake.state.is_file() and not legacy_path(lake.state).exists()


def test_full_forces_a_full_run_and_keeps_the_state(lake: Lake) -> None:
    _first_run(lake)
    lake.source(UNLOGGED, "DELETE FROM orders WHERE id = 1700")  # leaf 13, unlogged
    forced = lake.validate(full=True)
    assert forced["coverage"]["mode"] == "full"
    assert forced["coverage"]["reason"] == "a full run was asked for (--full)"
    assert _found(forced) == {("extra_in_target", ("1700",))}
    # The difference's leaf is re-hashed by every later run until it is repaired.
    later = lake.validate()
    assert later["coverage"]["mode"] == "incremental"
    assert _found(later) == {("extra_in_target", ("1700",))}


def test_a_state_stored_by_one_lake_engine_serves_the_other(lake: Lake) -> None:
    """Both engines hash the same leaves with the same MD5 flavour: one state format."""
    _first_run(lake)
    lake.source(UNLOGGED, "UPDATE orders SET note = 'x' WHERE id = 1130")  # leaf 9, unlogged
    lake.source("UPDATE orders SET amount = 7 WHERE id = 1202")  # leaf 9, logged
    lake.catch_up()
    lake.engine = "local" if lake.engine == "hybrid" else "hybrid"
    other = lake.validate()
    assert other["coverage"]["mode"] == "incremental", other["coverage"]["reason"]
    assert other["coverage"]["leaves_changed"] == 1
    assert _found(other) == {("changed", ("1130",))}  # leaf 9 re-hashed: the logged change
