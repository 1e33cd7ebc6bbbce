"""SIGKILL ``replcheck cdc run`` into a database target at random moments while a writer
changes the source: the target ends equal to the source, every change applied once (the
progress rows are written in the same target transaction as the rows)."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.connectors.database_target.conftest import Databases
from tests.private_servers import MariaDBServer

pytestmark = [pytest.mark.integration, pytest.mark.mariadb, pytest.mark.postgres]

ROOT = Path(__file__).resolve().parents[3]
KILLS = 12
ROWS = 2000


def _workload(server: MariaDBServer, database: str, done: threading.Event) -> None:
    """Transactions of inserts, updates, key moves and deletes (seeded)."""
    chance = random.Random(11)
    with contextlib.closing(server.connect(database)) as conn, conn.cursor() as cur:
        for number in range(400):
            key = chance.randrange(ROWS)
            cur.execute("UPDATE t SET v = v + 1, note = %s WHERE id = %s", (f"n{number}", key))
            cur.execute("INSERT INTO t VALUES (%s, %s, %s)", (ROWS + number, number, "new"))
            cur.execute("UPDATE t SET id = id + 100000 WHERE id = %s", (chance.randrange(ROWS),))
            cur.execute("DELETE FROM t WHERE id = %s", (chance.randrange(ROWS),))
            if number % 50 == 0:  # a big one: many rows in one transaction
                cur.execute("UPDATE t SET v = v + 1 WHERE id BETWEEN 500 AND 900")
            conn.commit()
            time.sleep(0.01)
    done.set()


def _start(config: Path, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "validator.cli", "cdc", "run", "--config", str(config)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with log.open("ab") as output:
        return subprocess.Popen(
            [*command, "--pipeline", "copy", *extra], cwd=ROOT, env=env, stdout=output,
            stderr=output,
        )  # fmt: skip


def test_a_sigkilled_pipeline_applies_every_change_once(
    tmp_path: Path,
    mariadb_to_postgres: Databases,
) -> None:
    mariadb_full, postgres = mariadb_to_postgres.mariadb, mariadb_to_postgres.postgres
    source, target = mariadb_to_postgres.source, mariadb_to_postgres.target
    with contextlib.closing(mariadb_full.connect(source)) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v INT, note TEXT)")
        cur.executemany("INSERT INTO t VALUES (%s, 0, 'x')", [(i,) for i in range(ROWS)])
        conn.commit()
    config, log = tmp_path / "pipeline.yaml", tmp_path / "cdc.log"
    url = f"{mariadb_full.url(source)}?server_id=7771&heartbeat_s=0.2"
    config.write_text(
        f"connections:\n  src: {{url: {json.dumps(url)}}}\n"
        f"  dst: {{url: {json.dumps(postgres.url(target))}}}\n"
        "pipelines:\n  - {name: copy, source: src, target: dst, tables: [t],"
        f" target_schema: public, state_dir: {json.dumps(str(tmp_path / 'state'))},"
        " buffer: {memory_budget_mb: 0.05}, batch: {max_events: 300, max_seconds: 0.3}}\n",
        encoding="utf-8",
    )
    done, chance, kills = threading.Event(), random.Random(5), 0
    writer = threading.Thread(target=_workload, args=(mariadb_full, source, done), daemon=True)
    writer.start()
    while kills < KILLS or not done.is_set():
        process = _start(config, log)
        time.sleep(chance.uniform(0.3, 2.5))
        assert process.poll() is None, log.read_text()[-3000:]  # it must not die by itself
        process.send_signal(signal.SIGKILL)
        process.wait()
        kills += 1
    writer.join()
    final = _start(config, log, "--until-caught-up")
    assert final.wait(600) == 0, log.read_text()[-3000:]

    with contextlib.closing(mariadb_full.connect(source)) as conn, conn.cursor() as cur:
        cur.execute("SELECT id, v, note FROM t")
        expected = {row[0]: row[1:] for row in cur.fetchall()}
    with contextlib.closing(postgres.connect(target)) as conn:
        rows = conn.execute("SELECT id, v, note FROM public.t").fetchall()
    assert kills >= KILLS
    assert {row[0]: tuple(row[1:]) for row in rows} == expected
