"""``replication: replcheck``: a target a replcheck pipeline feeds is compared at an agreed
position, with no sleep, while a writer keeps changing the source and the pipeline keeps
applying: no false difference, and drift injected into the target is found exactly."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc_core.errors import ConfigError
from connectors.pipeline import open_pipeline
from tests.connectors.database_target.conftest import Databases
from tests.live_writer import updating
from validator.config import load_validator_config
from validator.demo.setup import found_differences
from validator.job import validate

pytestmark = [pytest.mark.integration, pytest.mark.mariadb, pytest.mark.postgres, pytest.mark.spark]

ROWS = 300
WRITTEN = range(50, ROWS)  # the writer's keys; the drift is injected below them


@contextlib.contextmanager
def _running(config: Path) -> Iterator[None]:
    """The pipeline following the source on a thread until the block ends."""
    with open_pipeline(config, "copy") as pipeline:
        pipeline.run_until_caught_up()
        thread = threading.Thread(target=pipeline.run, daemon=True)
        thread.start()
        try:
            yield
        finally:
            pipeline.stop()
            thread.join(60)


def _configs(tmp_path: Path, source: str, target: str, replication: str) -> tuple[Path, Path]:
    pipeline, check = tmp_path / "pipeline.yaml", tmp_path / "validate.yaml"
    connections = (
        f"connections:\n  src: {{url: {json.dumps(source)}}}\n"
        f"  dst: {{url: {json.dumps(target)}}}\n"
    )
    pipeline.write_text(
        connections + "pipelines:\n  - {name: copy, source: src, target: dst, tables: [t],"
        f" target_schema: public, state_dir: {json.dumps(str(tmp_path / 'state'))},"
        " batch: {max_events: 50, max_seconds: 0.2}}\n",
        encoding="utf-8",
    )
    check.write_text(
        connections.replace("?server_id=7751&heartbeat_s=0.2", "")
        + "comparisons:\n  - {name: t, source: {connection: src, table: t},"
        f" target: {{connection: dst, table: public.t}}, replication: {replication},"
        " options: {rows_per_leaf: 16}}\n"
        "validation: {recheck_lag_s: 0, replica_wait_timeout_s: 60}\n",
        encoding="utf-8",
    )
    return pipeline, check


@pytest.mark.parametrize("declared", ["replcheck", "unknown"])  # unknown: detected
def test_a_replcheck_target_is_confirmed_at_an_agreed_position(
    declared: str,
    spark: Any,
    tmp_path: Path,
    mariadb_to_postgres: Databases,
) -> None:
    mariadb_full, postgres = mariadb_to_postgres.mariadb, mariadb_to_postgres.postgres
    source, target = mariadb_to_postgres.source, mariadb_to_postgres.target
    with contextlib.closing(mariadb_full.connect(source)) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v INT)")
        cur.executemany("INSERT INTO t VALUES (%s, %s)", [(i, 0) for i in range(ROWS)])
        conn.commit()
    url = f"{mariadb_full.url(source)}?server_id=7751&heartbeat_s=0.2"
    pipeline, check = _configs(tmp_path, url, postgres.url(target), declared)
    with _running(pipeline), updating(mariadb_full, source, WRITTEN) as touched:
        with contextlib.closing(postgres.connect(target)) as conn:  # drift behind its back
            conn.execute("UPDATE public.t SET v = -1 WHERE id = 7")
            conn.execute("DELETE FROM public.t WHERE id = 8")
            conn.execute("INSERT INTO public.t VALUES (9999, 0)")
            conn.commit()
        document = validate(spark, load_validator_config(check, environ={}))

    assert touched, "the writer wrote while the comparison ran"
    assert found_differences(document) == {
        ("t", "changed", ("7",)),
        ("t", "missing_in_target", ("8",)),
        ("t", "extra_in_target", ("9999",)),
    }
    in_flight = {int(key[0]) for key in document["comparisons"][0]["in_flight"]}
    assert in_flight <= set(WRITTEN)


def test_an_unknown_replication_kind_is_refused_by_name(tmp_path: Path) -> None:
    _, check = _configs(tmp_path, "mysql+pymysql://u@h/db", "postgresql://u@h/db", "galera")
    with pytest.raises(ConfigError, match=r"replication: must be one of replcheck, mariadb"):
        load_validator_config(check, environ={})
