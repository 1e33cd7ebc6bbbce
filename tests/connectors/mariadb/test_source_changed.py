"""A failover under a running pipeline: the source URL then reaches another server (a
replica of the one whose binlog positions the pipeline holds). Those positions mean nothing
in the other server's binlog, so ``cdc run`` refuses to resume there, naming both servers
(exit 2), instead of reading the other log at the same file and offset: MariaDB's GTIDs are
not followed (MySQL's are: tests/connectors/mysql/test_failover.py). The other server is
played by a checkpoint recorded as of another server id (no second private server is
started for it)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest

from cdc_core.pipeline.checkpoint import read_checkpoint, write_checkpoint
from connectors.mariadb.log_reader import MariaDBLogReader
from connectors.mariadb.source_config import MariaDBSourceConfig
from tests.cli_runs import catch_up, write_config
from tests.connectors.mariadb.pipeline_helpers import execute
from tests.private_servers import MariaDBServer

pytestmark = [pytest.mark.integration, pytest.mark.mariadb]


def test_the_reader_names_the_server_its_positions_are_of(
    mariadb_full: MariaDBServer,
) -> None:
    reader = MariaDBLogReader(MariaDBSourceConfig(url=mariadb_full.url(), tables=("t",)))
    assert reader.source_identity() == "MariaDB server_id 1"


def test_a_pipeline_refuses_to_resume_on_another_server(
    tmp_path: Path,
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
) -> None:
    database = mariadb_database(mariadb_full)
    execute(mariadb_full, database, "CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    execute(mariadb_full, database, "INSERT INTO t VALUES (1, 1), (2, 2)")
    config = write_config(tmp_path, mariadb_full.url(database), [f"{database}.t"])
    catch_up(config)  # its positions are recorded with the server's id
    catch_up(config)  # the same server again: resumed
    state = tmp_path / "state"
    recorded = read_checkpoint(state)
    assert recorded is not None and recorded.source == "MariaDB server_id 1"

    write_checkpoint(state, dataclasses.replace(recorded, source="MariaDB server_id 7"))
    refused = catch_up(config, expect=2)  # as after a failover to server 1
    (line,) = [x for x in refused.stderr.splitlines() if x.startswith("error:")]
    assert "the log of MariaDB server_id 7, but the source now is MariaDB server_id 1" in line
    assert "new snapshot" in line and "replcheck bug" not in line, line
