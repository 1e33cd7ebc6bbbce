"""SIGKILL ``replcheck cdc run`` into a database target while it loads a table again after
its primary key changed, and restart it: the target ends with the new key and the source's
rows, whichever moment each kill hit (moving the table aside, a chunk, a change by the new
key before its row's chunk)."""

from __future__ import annotations

import contextlib
import json
import random
import signal
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from cdc_core.pipeline.checkpoint import read_checkpoint
from tests.cli_runs import catch_up_logged, start_catching_up
from tests.connectors.database_target.conftest import Databases

pytestmark = [pytest.mark.integration, pytest.mark.mariadb, pytest.mark.postgres]

ROWS = 3000
KILLS = 6


def _config(work: Path, source: str, target: str) -> Path:
    config = work / "replcheck.yaml"
    config.write_text(
        f"connections:\n  src: {{url: {json.dumps(source)}}}\n"
        f"  dst: {{url: {json.dumps(target)}}}\n"
        "pipelines:\n  - {name: kills, source: src, target: dst, tables: [t],"
        f" target_schema: public, state_dir: {json.dumps(str(work / 'state'))},"
        " batch: {max_events: 300, max_seconds: 0.3}, refresh: {chunk_rows: 50}}\n",
        encoding="utf-8",
    )
    return config


def _target(url: str) -> tuple[list[str], dict[str, tuple[int, int]]]:
    """Table ``public.t``'s primary key columns, and its rows by code."""
    engine = sa.create_engine(url)
    try:
        key = sa.inspect(engine).get_pk_constraint("t", schema="public")["constrained_columns"]
        with engine.connect() as connection:
            rows = connection.execute(sa.text("SELECT code, id, v FROM public.t"))
            return key, {row[0]: (row[1], row[2]) for row in rows}
    finally:
        engine.dispose()


def test_kills_during_a_key_change_reload_leave_the_target_equal_to_the_source(
    tmp_path: Path, mariadb_to_postgres: Databases
) -> None:
    server, postgres = mariadb_to_postgres.mariadb, mariadb_to_postgres.postgres
    source, target = mariadb_to_postgres.source, mariadb_to_postgres.target
    rng = random.Random(36)
    with contextlib.closing(server.connect(source)) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, code VARCHAR(20) NOT NULL, v INT)")
        cur.executemany("INSERT INTO t VALUES (%s, %s, %s)", [(i, f"c{i}", i) for i in range(ROWS)])
        conn.commit()
        url = f"{server.url(source)}?server_id=7791&heartbeat_s=0.2"
        config, log = _config(tmp_path, url, postgres.url(target)), tmp_path / "cdc.log"
        catch_up_logged(config, log, "kills")  # the initial load
        cur.execute("ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (code)")
        kills = during = 0
        for number in range(KILLS):
            process = start_catching_up(config, log, "kills")
            # Changes by the new key, most of them of rows a chunk has not read yet.
            row = rng.randrange(ROWS)
            cur.execute("UPDATE t SET v = -v, id = 0 WHERE code = %s", (f"c{row}",))
            cur.execute("UPDATE t SET code = %s WHERE code = %s", (f"m{number}", f"c{row + 1}"))
            cur.execute("DELETE FROM t WHERE code = %s", (f"c{rng.randrange(ROWS)}",))
            cur.execute("INSERT INTO t VALUES (0, %s, 0)", (f"n{number}",))
            conn.commit()
            time.sleep(rng.uniform(2.0, 6.0))  # it takes seconds to start
            if process.poll() is not None:
                break  # it finished before this kill
            process.send_signal(signal.SIGKILL)
            process.wait()
            kills += 1
            checkpoint = read_checkpoint(tmp_path / "state")
            during += bool(checkpoint is not None and checkpoint.refreshes)
        catch_up_logged(config, log, "kills")
        cur.execute("SELECT code, id, v FROM t")
        expected = {row[0]: (row[1], row[2]) for row in cur.fetchall()}

    assert during > 0, f"none of {kills} kills hit the reload: nothing was tested"
    assert _target(postgres.url(target)) == (["code"], expected)
