"""Issue 34, case 1: the lake side of a comparison is the mirror users read, whatever wrote
it. On a lake ``cdc run`` wrote from a private MariaDB server: another writer's UPDATE of
the mirror through deltalake, then a mirror data file replaced under its name, are each
found as differences by a full ``validate`` and named by the lake's self-consistency
check; and ``cdc run`` goes on past the replaced file (it rebuilds the mirror from its
changelog) instead of stopping at every batch."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from cdc_core.lake.layout import LakeTable
from cdc_core.names import format_table
from tests.cli_runs import catch_up, validate, write_config
from tests.connectors.mariadb.pipeline_helpers import execute
from tests.private_servers import MariaDBServer

pytestmark = [pytest.mark.integration, pytest.mark.mariadb]


def _config(work: Path, url: str, database: str) -> Path:
    return write_config(work, url, ["items"], compared=("items", format_table(database, "items")))


def test_another_writers_commit_and_a_replaced_file_are_found_and_named(
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    tmp_path: Path,
) -> None:
    database = mariadb_database(mariadb_full)
    rows = ", ".join(f"({k}, 'v{k}')" for k in range(1, 51))
    execute(mariadb_full, database, "CREATE TABLE items (id INT PRIMARY KEY, v VARCHAR(20))")
    execute(mariadb_full, database, f"INSERT INTO items VALUES {rows}")
    config = _config(tmp_path, mariadb_full.url(database), database)
    catch_up(config)
    assert validate(config, tmp_path / "out0")[0] == 0
    mirror = LakeTable(tmp_path / "lake", format_table(database, "items")).mirror

    DeltaTable(str(mirror)).update(updates={"v": "'tampered'"}, predicate="id = 7")
    code, comparison = validate(config, tmp_path / "out1")

    assert code == 1 and comparison["status"] == "differences"
    assert [(d["kind"], d["key"]) for d in comparison["differences"]] == [("changed", ["7"])]
    (finding,) = comparison["lake_findings"]
    assert finding["kind"] == "foreign_commit" and "UPDATE" in finding["detail"]
    assert "delta-rs" in finding["detail"]

    (uri,) = DeltaTable(str(mirror)).file_uris()
    data = pq.read_table(uri)
    plain = [f.with_type(pa.string()) if f.type == pa.string_view() else f for f in data.schema]
    data = data.cast(pa.schema(plain))  # another writer's UPDATE wrote string views
    pq.write_table(data.filter(pa.compute.not_equal(data["id"], 9)), uri)  # row 9 gone
    code, comparison = validate(config, tmp_path / "out2")

    assert code == 1
    assert ("missing_in_target", ["9"]) in [
        (d["kind"], d["key"]) for d in comparison["differences"]
    ]
    named = [f["detail"] for f in comparison["lake_findings"] if f["kind"] == "changed_file"]
    assert len(named) == 1 and Path(uri).name in named[0]

    execute(mariadb_full, database, "UPDATE items SET v = 'new' WHERE id = 20")
    catch_up(config)  # the MERGE meets the replaced file: the mirror is rebuilt
    code, comparison = validate(config, tmp_path / "out3")

    assert (code, comparison["status"]) == (0, "in_sync"), comparison["differences"]
    assert comparison["lake_findings"] == []  # the rebuild left neither in the mirror
