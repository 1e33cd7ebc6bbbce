"""One connection serves the pipeline and the validator, log parameters and all.

A PostgreSQL source URL carries the log source's parameters (``slot``, ``publication``,
``idle_s``, ``key.<table>``); the same connection, in one config file with every section,
is read by ``cdc run``, ``validate`` and ``resync`` -- each takes the parameters it
understands. A parameter nobody knows is an error that names it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

import pytest

from cdc_core.errors import ConfigError, ReplcheckError
from connectors.registry import connector_for
from tests.private_servers import MariaDBServer, PostgresServer
from validator import cli

pytestmark = [pytest.mark.integration, pytest.mark.postgres, pytest.mark.mariadb]

LOG_PARAMETERS = "slot=one_conn&publication=one_conn&idle_s=0.2&create_slot=true&key.public.t=id"


def _config(work: Path, source: str, target: str) -> Path:
    path = work / "replcheck.yaml"
    path.write_text(
        "connections:\n"
        f"  src: {{url: '{source}?{LOG_PARAMETERS}'}}\n"
        f"  tgt: {{url: '{target}?idle_s=0.2'}}\n"
        f"  lake: {{lake: '{work / 'lake'}'}}\n"
        "comparisons:\n"
        "  - {name: t, source: {connection: src, table: t}, target: {connection: tgt, table: t}}\n"
        "validation: {recheck_lag_s: 0, engine: database}\n"
        "resync: {audit: file, max_rows: 100}\n"
        "spark: {master: 'local[1]'}\n"
        "pipelines:\n"
        f"  - {{name: p, source: src, target: lake, tables: [public.t],"
        f" state_dir: '{work / 's'}'}}\n",
        encoding="utf-8",
    )
    return path


def test_one_full_config_serves_every_command(
    tmp_path: Path, postgres: PostgresServer, postgres_database: Callable[[PostgresServer], str]
) -> None:
    names = []
    for rows in ([(1, "a"), (2, "b")], [(1, "a"), (2, "B")]):
        name = postgres_database(postgres)
        with contextlib.closing(postgres.connect(name)) as conn:
            conn.execute("CREATE TABLE t (id int PRIMARY KEY, note text)")
            conn.cursor().executemany("INSERT INTO t VALUES (%s, %s)", rows)
        names.append(name)
    config = str(_config(tmp_path, postgres.url(names[0]), postgres.url(names[1])))
    out = tmp_path / "out"
    assert cli.run(["cdc", "run", "-c", config, "--pipeline", "p", "--until-caught-up"]) == 0
    assert cli.run(["validate", "-c", config, "--out", str(out)]) == 1
    result = str(out / "result.json")
    assert cli.run(["resync", "-c", config, "--result", result, "--apply"]) == 0
    assert cli.run(["gate", "-c", config, "--out", str(tmp_path / "again")]) == 0


def test_a_parameter_nobody_takes_is_an_error_naming_it(
    postgres: PostgresServer, mariadb_full: MariaDBServer
) -> None:
    with pytest.raises(ReplcheckError, match="no_such_option"):
        connector_for(postgres.url("postgres") + "?slot=x&no_such_option=1").reflect("pg_class")
    maria = connector_for(mariadb_full.url("mysql") + "?server_id=7&no_such_option=1")
    with pytest.raises(ConfigError, match="no_such_option"):
        maria.reflect("user")
