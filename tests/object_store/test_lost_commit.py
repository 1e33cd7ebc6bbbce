"""A network that drops or hangs mid-commit: the store writes a Delta commit, and its answer
never reaches ``cdc run`` (``lossy_proxy`` between the two), its connection closed or left
open. The run stops with one line naming the table and what to do, exit 2, never "a
replcheck bug", and a hung request is given up after the lake's ``request_timeout``; the
next run resumes from the table's last commit and writes nothing twice, and ``validate``
finds the lake in sync.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cdc_core.lake.layout import LakeTable
from cdc_core.lake_location import LakeLocation
from tests.cli_runs import catch_up, validate
from tests.object_store.lossy_proxy import LossyProxy
from tests.object_store.s3_server import S3Lake
from tests.object_store.test_cdc_and_validate import _run, _s3_config
from tests.private_servers import MariaDBServer

pytestmark = [pytest.mark.object_store, pytest.mark.integration, pytest.mark.mariadb]


@pytest.fixture
def proxy(s3_lake: S3Lake, monkeypatch: pytest.MonkeyPatch) -> Iterator[LossyProxy]:
    """The proxy in front of the test's S3 server, as the commands' endpoint."""
    lossy = LossyProxy(s3_lake.server.endpoint)
    monkeypatch.setenv("AWS_ENDPOINT_URL", lossy.url)
    yield lossy
    lossy.close()


@pytest.mark.parametrize("network", ["drops", "hangs"])
def test_a_lost_commit_answer_stops_the_run_clearly_and_the_next_writes_nothing_twice(
    tmp_path: Path,
    s3_lake: S3Lake,
    proxy: LossyProxy,
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    network: str,
) -> None:
    database = mariadb_database(mariadb_full)
    table = f"{database}.items"
    proxy.hang = network == "hangs"
    _run(
        mariadb_full,
        database,
        "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20))",
        "INSERT INTO items VALUES (1, 'a'), (2, 'b')",
    )
    config = _s3_config(tmp_path, mariadb_full.url(database), table, s3_lake.url)
    if proxy.hang:  # without it, the SDKs' own 30 s per request
        lake = f"lake: {json.dumps(s3_lake.url)}"
        timed = f"{lake}, storage_options: {{request_timeout: 2s}}"
        config.write_text(config.read_text("utf-8").replace(lake, timed), "utf-8")
    catch_up(config)  # the initial load, every answer delivered
    _run(
        mariadb_full,
        database,
        "INSERT INTO items VALUES (3, 'c')",
        "UPDATE items SET name = 'A' WHERE id = 1",
    )

    proxy.lose = 1
    stopped = catch_up(config, expect=2)

    (lost,) = proxy.lost
    assert lost.endswith(".json") and "/items/" in lost
    (line,) = [x for x in stopped.stderr.splitlines() if x.startswith("error:")]
    assert f"lake table {s3_lake.url}/{database}/items/" in line, line
    assert "run again" in line and "replcheck bug" not in line, line
    if proxy.hang:
        assert "got no answer from S3 (it timed out)" in line, line

    catch_up(config)  # resumed
    stored = LakeTable(LakeLocation.from_config(s3_lake.url, {}), table)
    events = stored.changelog_at.open_delta().to_pyarrow_table().to_pylist()
    assert sorted((e["id"], e["_op"]) for e in events) == [(1, "r"), (1, "u"), (2, "r"), (3, "c")]
    code, comparison = validate(config, tmp_path / "validated")
    assert (code, comparison["status"]) == (0, "in_sync"), comparison
