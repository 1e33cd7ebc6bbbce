"""Issue 36, case 4a: MariaDB system-versioned tables are captured as their current rows.

The binlog carries their history too (an UPDATE also inserts the old version as a history
row, a DELETE is an UPDATE ending the row, ``DELETE HISTORY`` deletes history rows); the
pipeline follows only the current rows, so the lake equals ``SELECT * FROM t`` and
``validate`` says in_sync. A glob captures them (it used to skip them) and so does a name
(the hidden ``row_end`` used to end up in the key); implicit period columns are not
carried, declared ones are, exactly. A table versioned by transaction ids, whose changes
MariaDB logs as statements, is refused by name. Run on the FULL and the MINIMAL server."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pymysql
import pytest

from cdc_core.names import COPY, format_table
from tests.cli_runs import catch_up, replcheck
from tests.connectors.mariadb.pipeline_helpers import execute, lake_rows
from tests.private_servers import MariaDBServer

pytestmark = [pytest.mark.integration, pytest.mark.mariadb]

SCHEMA = (
    # Implicit (hidden) period columns.
    "CREATE TABLE accounts (id INT PRIMARY KEY, owner VARCHAR(20), balance DECIMAL(10,2))"
    " WITH SYSTEM VERSIONING",
    # Declared period columns, visible, and a key of two columns.
    "CREATE TABLE prices (sku INT, region CHAR(2), amount INT,"
    " valid_from TIMESTAMP(6) GENERATED ALWAYS AS ROW START,"
    " valid_to TIMESTAMP(6) GENERATED ALWAYS AS ROW END,"
    " PERIOD FOR SYSTEM_TIME (valid_from, valid_to), PRIMARY KEY (sku, region))"
    " WITH SYSTEM VERSIONING",
    # No primary key: located by its (visible) columns.
    "CREATE TABLE tags (tag VARCHAR(10), n INT) WITH SYSTEM VERSIONING",
    "CREATE TABLE plain (id INT PRIMARY KEY, note VARCHAR(20))",
)
KEYS = {"accounts": ["id"], "prices": ["sku", "region"], "tags": ["tag"], "plain": ["id"]}
ROWS = (
    "INSERT INTO accounts VALUES (1, 'ann', 10), (2, 'bob', 20), (3, 'cy', 30)",
    "UPDATE accounts SET balance = 11 WHERE id = 1",  # history before the snapshot
    "DELETE FROM accounts WHERE id = 3",
    "INSERT INTO prices (sku, region, amount) VALUES (1, 'eu', 100), (1, 'us', 110)",
    "INSERT INTO tags VALUES ('a', 1), ('b', 2)",
    "INSERT INTO plain VALUES (1, 'x')",
)
WORKLOAD = (
    "INSERT INTO accounts VALUES (4, 'dee', 40), (5, 'eve', 50)",
    "UPDATE accounts SET balance = balance + 1",  # every current row: one history row each
    "UPDATE accounts SET id = 40 WHERE id = 4",  # a key change
    "DELETE FROM accounts WHERE id = 2",
    "DELETE HISTORY FROM accounts",  # deletes of history rows only
    "UPDATE prices SET amount = 120 WHERE region = 'us'",
    "INSERT INTO prices (sku, region, amount) VALUES (2, 'eu', 200)",
    "DELETE FROM prices WHERE sku = 1 AND region = 'eu'",
    "UPDATE tags SET n = 10 WHERE tag = 'a'",
    "DELETE FROM tags WHERE tag = 'b'",
    "INSERT INTO tags VALUES ('c', 3)",
    "UPDATE plain SET note = 'y'",
)


def _config(work: Path, server: MariaDBServer, database: str) -> Path:
    """Two pipelines: one by a glob, one by names; comparisons of the glob's lake."""
    url = json.dumps(server.url(database) + "?heartbeat_s=0.2")
    pipelines = {"glob": [f"{database}.*"], "named": ["accounts", "prices", "tags"]}
    lines = [
        "connections:",
        f"  src: {{url: {url}}}",
        *(f"  {name}: {{lake: {json.dumps(str(work / name))}}}" for name in pipelines),
        "pipelines:",
        *(
            f"  - {{name: {name}, source: src, target: {name}, tables: {json.dumps(tables)},"
            f" state_dir: {json.dumps(str(work / f'state-{name}'))}}}"
            for name, tables in pipelines.items()
        ),
        "comparisons:",
        *(
            f"  - {{name: {table}, source: {{connection: src, table: {table}}},"
            f" target: {{connection: glob, table: {json.dumps(format_table(database, table))}}}}}"
            for table in KEYS
        ),
        "validation: {engine: local, lake_wait_timeout_s: 60}",
    ]
    config = work / "replcheck.yaml"
    config.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return config


def _current_rows(server: MariaDBServer, database: str, table: str) -> dict[Any, dict[str, Any]]:
    """``SELECT * FROM table`` (its current rows), by key, times as UTC instants."""
    connection = server.connect(database)
    with contextlib.closing(connection), connection.cursor(pymysql.cursors.DictCursor) as cursor:
        cursor.execute("SET time_zone = '+00:00'")
        cursor.execute(f"SELECT * FROM {table}")
        rows = cursor.fetchall()
    return {
        tuple(row[c] for c in KEYS[table]): {k: _utc(v) for k, v in row.items()} for row in rows
    }


def _utc(value: object) -> object:
    if isinstance(value, dt.datetime) and value.tzinfo is None:
        return value.replace(tzinfo=dt.UTC)  # read in a UTC session
    return value


def _assert_lake_is_current(
    work: Path, server: MariaDBServer, database: str, tables: Sequence[str]
) -> None:
    for table in tables:
        lake = lake_rows(work, format_table(database, table), KEYS[table])
        lake = {key: {c: v for c, v in row.items() if c != COPY} for key, row in lake.items()}
        assert lake == _current_rows(server, database, table), table


@pytest.fixture(params=["mariadb_full", "mariadb_minimal"])
def server(request: pytest.FixtureRequest) -> MariaDBServer:
    found: MariaDBServer = request.getfixturevalue(request.param)
    return found


def test_system_versioned_tables_are_captured_as_their_current_rows(
    server: MariaDBServer, mariadb_database: Callable[[MariaDBServer], str], tmp_path: Path
) -> None:
    database = mariadb_database(server)
    execute(server, database, *SCHEMA, *ROWS)
    config = _config(tmp_path, server, database)
    for pipeline in ("glob", "named"):
        catch_up(config, pipeline)
    _assert_lake_is_current(tmp_path / "glob", server, database, list(KEYS))
    _assert_lake_is_current(tmp_path / "named", server, database, ["accounts", "prices", "tags"])

    execute(server, database, *WORKLOAD)
    for pipeline in ("glob", "named"):
        catch_up(config, pipeline)

    _assert_lake_is_current(tmp_path / "glob", server, database, list(KEYS))
    _assert_lake_is_current(tmp_path / "named", server, database, ["accounts", "prices", "tags"])
    accounts = lake_rows(tmp_path / "glob", format_table(database, "accounts"), ["id"])
    assert sorted(accounts) == [(1,), (5,), (40,)]
    assert set(accounts[(1,)]) == {"id", "owner", "balance"}  # hidden periods not carried
    out = tmp_path / "out"
    done = replcheck("validate", "--config", str(config), "--out", str(out))
    result = json.loads((out / "result.json").read_text())
    statuses = {c["name"]: c["status"] for c in result["comparisons"]}
    assert done.returncode == 0, (statuses, done.stderr[-3000:])
    assert statuses == dict.fromkeys(KEYS, "in_sync")


def test_a_table_versioned_by_transaction_ids_is_refused(
    mariadb_full: MariaDBServer, mariadb_database: Callable[[MariaDBServer], str], tmp_path: Path
) -> None:
    database = mariadb_database(mariadb_full)
    execute(
        mariadb_full,
        database,
        "CREATE TABLE ledger (id INT PRIMARY KEY, amount INT,"
        " tx_from BIGINT UNSIGNED GENERATED ALWAYS AS ROW START INVISIBLE,"
        " tx_to BIGINT UNSIGNED GENERATED ALWAYS AS ROW END INVISIBLE,"
        " PERIOD FOR SYSTEM_TIME (tx_from, tx_to)) WITH SYSTEM VERSIONING",
        "INSERT INTO ledger VALUES (1, 10)",
    )
    config = _config(tmp_path, mariadb_full, database)
    done = catch_up(config, "glob", expect=2)
    assert (
        f"table {database}.ledger is system-versioned by transaction ids (its period columns"
        " are BIGINT UNSIGNED), and MariaDB logs its changes as statements, not row images;"
        " version it by TIMESTAMP(6) period columns or leave it out of the pipeline's tables"
    ) in done.stderr
