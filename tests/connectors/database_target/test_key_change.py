"""A source table's primary key changes (issue 36, 5a): a pipeline into a database target
gives the target table the new key and reloads it, later changes apply by the new key, and
the validator finds source and target in sync. MariaDB -> MariaDB and PostgreSQL ->
PostgreSQL on the real servers, through ``replcheck cdc run`` and ``replcheck validate``."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from tests.cli_runs import catch_up, validate
from tests.private_servers import MariaDBServer, PostgresServer

pytestmark = [pytest.mark.integration, pytest.mark.mariadb, pytest.mark.postgres]

ROWS = 30
BEFORE = (  # by the old key, id
    "UPDATE t SET v = v + 1 WHERE id <= 5",
    "UPDATE t SET id = id + 100 WHERE id IN (6, 7)",
    "DELETE FROM t WHERE id = 8",
    "INSERT INTO t VALUES (8, 'c-new8', 80)",
)
AFTER = (  # by the new key, code; id may now repeat
    "UPDATE t SET v = -1 WHERE code = 'c9'",
    "UPDATE t SET code = 'moved10' WHERE code = 'c10'",  # a key change by the new key
    "UPDATE t SET id = 1 WHERE code = 'c11'",  # the old key repeats
    "DELETE FROM t WHERE code = 'c12'",
    "INSERT INTO t VALUES (1, 'c-late', 7)",
)


def _config(work: Path, source: str, target: str, schema: str) -> Path:
    """Pipeline ``p`` of table ``t`` into ``target`` (schema ``schema``), and a comparison
    of the two tables by the database engine."""
    work.mkdir(parents=True, exist_ok=True)
    config = work / "replcheck.yaml"
    config.write_text(
        f"connections:\n  src: {{url: {json.dumps(source)}}}\n"
        f"  dst: {{url: {json.dumps(target)}}}\n"
        "pipelines:\n  - {name: p, source: src, target: dst, tables: [t],"
        f" target_schema: {schema}, state_dir: {json.dumps(str(work / 'state'))},"
        " batch: {max_events: 7, max_seconds: 0.2}}\n"
        "comparisons:\n  - {name: t, source: {connection: src, table: t},"
        f" target: {{connection: dst, table: {schema}.t}}, replication: replcheck}}\n"
        "validation: {engine: database, recheck_lag_s: 0, replica_wait_timeout_s: 60}\n",
        encoding="utf-8",
    )
    return config


def _state(url: str, schema: str | None) -> tuple[list[str], set[tuple[Any, ...]]]:
    """A table ``t``'s primary key columns and rows."""
    engine = sa.create_engine(url)
    try:
        key = sa.inspect(engine).get_pk_constraint("t", schema=schema)["constrained_columns"]
        table = sa.Table("t", sa.MetaData(), schema=schema, autoload_with=engine)
        with engine.connect() as connection:
            rows = connection.execute(sa.select(table.c.id, table.c.code, table.c.v))
            return key, {tuple(row) for row in rows}
    finally:
        engine.dispose()


def _run(config: Path, execute: Callable[[str], None], change_key: str) -> None:
    """Load, change rows, change the key, change rows by the new key, catch up."""
    catch_up(config)
    for sql in BEFORE:
        execute(sql)
    catch_up(config)
    execute(change_key)
    for sql in AFTER:
        execute(sql)
    catch_up(config)


def _check(config: Path, work: Path, source: tuple[str, str | None], target: str) -> None:
    expected = _state(*source)
    assert expected[0] == ["code"]
    assert _state(target, None if "mysql" in target else "public") == expected
    code, comparison = validate(config, work / "out")
    assert (code, comparison["status"]) == (0, "in_sync"), comparison


@contextlib.contextmanager
def _mariadb(server: MariaDBServer, database: str) -> Iterator[Callable[[str], None]]:
    with contextlib.closing(server.connect(database)) as conn, conn.cursor() as cur:
        yield cur.execute


def test_a_mariadb_key_change_into_mariadb(
    tmp_path: Path,
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
) -> None:
    source, target = mariadb_database(mariadb_full), mariadb_database(mariadb_full)
    with _mariadb(mariadb_full, source) as execute:
        execute("CREATE TABLE t (id INT PRIMARY KEY, code VARCHAR(20) NOT NULL, v INT)")
        for i in range(1, ROWS + 1):
            execute(f"INSERT INTO t VALUES ({i}, 'c{i}', {i})")
        url = f"{mariadb_full.url(source)}?server_id=7781&heartbeat_s=0.2"
        config = _config(tmp_path, url, mariadb_full.url(target), target)
        _run(config, execute, "ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (code)")
    _check(config, tmp_path, (mariadb_full.url(source), None), mariadb_full.url(target))


# FULL: every change carries its whole row, so none waits for the reload's chunks (a change
# that carries only the key of a row not loaded yet is dropped: the chunk holds its effect).
@pytest.mark.parametrize("identity", ["DEFAULT", "FULL"])
def test_a_postgres_key_change_into_postgres(
    identity: str,
    tmp_path: Path,
    postgres: PostgresServer,
    postgres_database: Callable[[PostgresServer], str],
) -> None:
    source, target = postgres_database(postgres), postgres_database(postgres)
    with contextlib.closing(postgres.connect(source)) as conn:
        conn.execute("CREATE TABLE t (id integer PRIMARY KEY, code varchar(20) NOT NULL, v int)")
        conn.execute(f"ALTER TABLE t REPLICA IDENTITY {identity}")
        conn.execute(f"INSERT INTO t SELECT i, 'c' || i, i FROM generate_series(1, {ROWS}) i")
        url = f"{postgres.url(source)}?idle_s=0.2&slot=p_{source}"
        config = _config(tmp_path, url, postgres.url(target), "public")
        _run(config, conn.execute, "ALTER TABLE t DROP CONSTRAINT t_pkey, ADD PRIMARY KEY (code)")
    _check(config, tmp_path, (postgres.url(source), "public"), postgres.url(target))
