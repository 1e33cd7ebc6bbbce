"""A re-sync into an S3 lake (moto on loopback), as ``test_resync_lasts`` does on local disk:
rows drift at a MariaDB source with MINIMAL row images behind the binlog's back,
``validate`` finds them, ``resync --apply`` writes them into the bucket's changelog and
mirror and leaves its request and audit there, and later logged partial changes of the
repaired rows, which the pipeline completes from its row image store, keep them repaired."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from cdc_core.lake.layout import LakeTable
from cdc_core.lake_location import LakeLocation
from cdc_core.names import format_table
from tests.cli_runs import catch_up, replcheck, validate
from tests.object_store.s3_server import S3Lake
from tests.object_store.test_cdc_and_validate import _s3_config
from tests.private_servers import MariaDBServer
from tests.validator.resync.test_resync_lasts import DRIFT, LATER, _run

pytestmark = [pytest.mark.object_store, pytest.mark.integration, pytest.mark.mariadb]


def test_a_resync_into_an_s3_lake_repairs_the_rows_and_lasts(
    tmp_path: Path,
    s3_lake: S3Lake,
    mariadb_minimal: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
) -> None:
    server, database = mariadb_minimal, mariadb_database(mariadb_minimal)
    rows = ", ".join(f"({k}, 'a{k}', {k}, 0)" for k in range(1, 21))
    create = "CREATE TABLE items (id INT PRIMARY KEY, a VARCHAR(20), b INT, v INT)"
    _run(server, database, (create, f"INSERT INTO items VALUES {rows}"), logged=True)
    table = format_table(database, "items")
    config = _s3_config(tmp_path, server.url(database), table, s3_lake.url)
    catch_up(config)

    _run(server, database, DRIFT, logged=False)
    code, comparison = validate(config, tmp_path / "before")
    assert code == 1, comparison
    assert sorted(d["key"] for d in comparison["differences"]) == [["3"], ["30"], ["4"], ["5"]]
    result = tmp_path / "before" / "result.json"
    repaired = replcheck("resync", "--config", str(config), "--result", str(result), "--apply")
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert len(s3_lake.object_keys("_replcheck/resync_requests")) == 1  # left for the pipeline
    assert s3_lake.object_keys("_replcheck/resync_audit/_delta_log")  # the audit is in the store
    assert not list(tmp_path.glob("**/resync-audit.jsonl"))

    _run(server, database, LATER, logged=True)
    catch_up(config)  # takes the request, then the later changes
    code, comparison = validate(config, tmp_path / "after")
    assert (code, comparison["status"]) == (0, "in_sync"), comparison.get("differences")
    with server.connect(database) as conn, conn.cursor() as cur:
        cur.execute("SELECT id, a, b, v FROM items ORDER BY id")
        source = [list(row) for row in cur.fetchall()]
    mirror = LakeTable(LakeLocation.from_config(s3_lake.url, {}), table).mirror_at.open_delta()
    lake_rows = sorted(
        [r[c] for c in ("id", "a", "b", "v")] for r in mirror.to_pyarrow_table().to_pylist()
    )
    assert lake_rows == source
    assert [104, "drifted", 104, 7] in source and [3, "drifted", 103, 1] in source
    assert s3_lake.object_keys("_replcheck/resync_requests") == []  # taken and removed
