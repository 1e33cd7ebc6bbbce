"""A pipeline whose ``tables:`` names a table without its schema (``orders``) captures its
changes, not only its initial load: the log names it ``shop.orders``, and the filter must
match that (found by the database-target tests: the changes were silently dropped)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from cdc_core.lake.layout import LakeTable
from connectors.pipeline import open_pipeline
from tests.private_servers import MariaDBServer, PostgresServer

pytestmark = [pytest.mark.integration]


def _config(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "pipeline.yaml"
    path.write_text(
        f"connections:\n  src: {{url: {json.dumps(url)}}}\n"
        f"  lake: {{lake: {json.dumps(str(tmp_path / 'lake'))}}}\n"
        "pipelines:\n  - {name: p, source: src, target: lake, tables: [orders],"
        f" state_dir: {json.dumps(str(tmp_path / 'state'))}}}\n",
        encoding="utf-8",
    )
    return path


def _mirror(lake: Path, table: str) -> dict[int, int]:
    from deltalake import DeltaTable

    rows = DeltaTable(str(LakeTable(lake, table).mirror)).to_pyarrow_table().to_pylist()
    return {row["id"]: row["v"] for row in rows}


def _replicate(config: Path) -> None:
    with open_pipeline(config, "p") as pipeline:
        pipeline.run_until_caught_up()


@pytest.mark.mariadb
def test_mariadb(
    tmp_path: Path,
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
) -> None:
    database = mariadb_database(mariadb_full)
    with contextlib.closing(mariadb_full.connect(database)) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE orders (id INT PRIMARY KEY, v INT)")
        cur.execute("INSERT INTO orders VALUES (1, 1), (2, 2)")
        conn.commit()
    config = _config(tmp_path, f"{mariadb_full.url(database)}?server_id=7761&heartbeat_s=0.2")
    _replicate(config)
    with contextlib.closing(mariadb_full.connect(database)) as conn, conn.cursor() as cur:
        cur.execute("UPDATE orders SET v = 10 WHERE id = 1")
        cur.execute("INSERT INTO orders VALUES (3, 3)")
        conn.commit()
    _replicate(config)

    assert _mirror(tmp_path / "lake", f"{database}.orders") == {1: 10, 2: 2, 3: 3}


@pytest.mark.postgres
def test_postgres(
    tmp_path: Path, postgres: PostgresServer, postgres_database: Callable[[PostgresServer], str]
) -> None:
    database = postgres_database(postgres)
    with contextlib.closing(postgres.connect(database)) as conn:
        conn.execute("CREATE TABLE orders (id integer PRIMARY KEY, v integer)")
        conn.execute("INSERT INTO orders VALUES (1, 1), (2, 2)")
        conn.commit()
    config = _config(tmp_path, f"{postgres.url(database)}?idle_s=0.2&slot=plain_{database}")
    _replicate(config)
    with contextlib.closing(postgres.connect(database)) as conn:
        conn.execute("UPDATE orders SET v = 10 WHERE id = 1")
        conn.execute("INSERT INTO orders VALUES (3, 3)")
        conn.commit()
    _replicate(config)

    assert _mirror(tmp_path / "lake", "public.orders") == {1: 10, 2: 2, 3: 3}
