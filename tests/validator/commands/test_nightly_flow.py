"""Issue 38, item 2: the nightly flow — ``cdc run --until-caught-up``, the pipeline stopped,
then ``validate`` — on real MariaDB and PostgreSQL servers. Writes the pipeline does not
capture move the source's log past the lake's mark; the validation reads the log between
them (``validator.quiet_log``) and compares at once, with no pipeline. A captured change
placed between the lake's mark and the snapshot is never called in sync: the lake is
behind, and the validation says so. A wait that does not happen is asserted through its
log line; the short ``lake_wait_timeout_s`` only makes a regression fail fast."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cdc_core.names import format_table
from tests.cli_runs import catch_up, replcheck, write_config
from tests.connectors.mariadb.pipeline_helpers import execute
from tests.private_servers import MariaDBServer, PostgresServer

pytestmark = [pytest.mark.integration]

WAITED = "waiting for lake table"  # wait_for_lake's progress line


def _config(work: Path, url: str, table: str, lake_table: str) -> Path:
    config = write_config(work, url, [table], compared=(table, lake_table))
    text = config.read_text(encoding="utf-8")
    config.write_text(text.replace("lake_wait_timeout_s: 60", "lake_wait_timeout_s: 3"))
    return config


def _validate(config: Path, out: Path) -> tuple[int, dict[str, Any], str]:
    done = replcheck("validate", "--config", str(config), "--out", str(out))
    (comparison,) = json.loads((out / "result.json").read_text())["comparisons"]
    return done.returncode, comparison, done.stderr


def _in_sync_without_waiting(config: Path, out: Path) -> None:
    code, comparison, log = _validate(config, out)
    assert (code, comparison["status"]) == (0, "in_sync"), log[-3000:]
    assert WAITED not in log and "compared at the snapshot without a pipeline" in log, log[-3000:]


def _behind(config: Path, out: Path, table: str) -> None:
    code, comparison, log = _validate(config, out)
    assert comparison["status"] != "in_sync" and code != 0, log[-3000:]
    assert f"a change of {table}" in log and "a CDC pipeline must run" in log, log[-3000:]
    assert "is behind" in comparison["error"], comparison["error"]


@pytest.mark.mariadb
def test_mariadb_nightly_flow_validates_at_once_and_exactly(
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    tmp_path: Path,
) -> None:
    database, other = mariadb_database(mariadb_full), mariadb_database(mariadb_full)
    execute(mariadb_full, database, "CREATE TABLE items (id INT PRIMARY KEY, v VARCHAR(20))")
    execute(mariadb_full, database, "CREATE TABLE notes (id INT PRIMARY KEY)")
    execute(mariadb_full, database, "INSERT INTO items VALUES (1, 'a'), (2, 'b')")
    execute(mariadb_full, other, "CREATE TABLE elsewhere (id INT PRIMARY KEY)")
    lake_table = format_table(database, "items")
    config = _config(tmp_path, mariadb_full.url(database), "items", lake_table)
    catch_up(config)

    execute(mariadb_full, other, "INSERT INTO elsewhere VALUES (1)")  # another database
    execute(mariadb_full, database, "INSERT INTO notes VALUES (1)")  # a table not captured
    _in_sync_without_waiting(config, tmp_path / "quiet")

    execute(mariadb_full, database, "UPDATE items SET v = 'changed' WHERE id = 2")
    execute(mariadb_full, other, "INSERT INTO elsewhere VALUES (2)")
    _behind(config, tmp_path / "behind", lake_table)

    catch_up(config)
    execute(mariadb_full, other, "INSERT INTO elsewhere VALUES (3)")
    _in_sync_without_waiting(config, tmp_path / "caught_up")


@pytest.mark.postgres
def test_postgres_nightly_flow_validates_at_once_and_exactly(
    postgres: PostgresServer,
    postgres_database: Callable[[PostgresServer], str],
    tmp_path: Path,
) -> None:
    database, other = postgres_database(postgres), postgres_database(postgres)

    def sql(name: str, *statements: str) -> None:
        with contextlib.closing(postgres.connect(name)) as connection:
            for statement in statements:
                connection.execute(statement)
            connection.commit()

    sql(database, "CREATE TABLE items (id INT PRIMARY KEY, v text)", "CREATE TABLE notes (id INT)")
    sql(database, "INSERT INTO items VALUES (1, 'a'), (2, 'b')")
    sql(other, "CREATE TABLE elsewhere (id INT)")
    url = f"{postgres.url(database)}?idle_s=0.2"
    config = _config(tmp_path, url, "public.items", "public.items")
    catch_up(config)  # the initial load: the lake's mark is the slot's snapshot

    sql(other, "INSERT INTO elsewhere VALUES (1)")  # another database: WAL is the cluster's
    sql(database, "INSERT INTO notes VALUES (1)")  # a table not captured
    _in_sync_without_waiting(config, tmp_path / "quiet")

    sql(database, "UPDATE items SET v = 'changed' WHERE id = 2")
    sql(other, "INSERT INTO elsewhere VALUES (2)")
    _behind(config, tmp_path / "behind", "public.items")

    catch_up(config)  # reads the log: the mark is where its stream was idle
    sql(other, "INSERT INTO elsewhere VALUES (3)")
    _in_sync_without_waiting(config, tmp_path / "caught_up")
