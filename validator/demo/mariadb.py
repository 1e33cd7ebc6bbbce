"""The MariaDB demo: a private server, a workload, the real pipeline, then validation.

``replcheck demo --source mariadb`` starts a throwaway MariaDB server from the installed
binaries (``connectors/mariadb/embedded_server.py``; binlog in ROW format, MINIMAL row
images), creates a ``shop`` database, and writes a config file with a ``pipelines:`` entry
and the comparisons. The real pipeline (``replcheck cdc run``'s code) loads the tables by a
consistent snapshot, a mixed workload runs at the source (multi-row inserts that omit
defaulted columns, updates, deletes, a rolled-back transaction, an ALTER TABLE ADD COLUMN),
and the pipeline replicates it from the binlog into the Delta lake. Then three rows are
changed in the lake behind the pipeline's back, and the validation must find exactly those.
The server runs until the validation is done and is removed with its files after.
"""

from __future__ import annotations

import contextlib
import logging
import random
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

from cdc_core.drivers import driver_import
from connectors.mariadb.embedded_server import EmbeddedServer, running_server
from validator.commands.cdc import run_pipeline
from validator.demo.drift import inject_drift
from validator.demo.setup import DemoSetup
from validator.demo.shop import customer_values, order_values

logger = logging.getLogger(__name__)
SEED = 20261122
DATABASE = "shop"
PIPELINE = "shop"

SCHEMA_SQL = (
    "CREATE DATABASE shop",
    "CREATE TABLE shop.customers (id INT PRIMARY KEY, name VARCHAR(60) NOT NULL,"
    " email VARCHAR(80), tier TINYINT DEFAULT 1, signup DATE DEFAULT '2024-01-01',"
    " balance DECIMAL(12,2) NOT NULL DEFAULT 0.00)",
    "CREATE TABLE shop.orders (id BIGINT PRIMARY KEY, customer_id INT NOT NULL,"
    " amount DECIMAL(10,2) NOT NULL, status ENUM('new','paid','shipped','returned')"
    " DEFAULT 'new', placed_at DATETIME(6) NOT NULL, weight DOUBLE,"
    " created TIMESTAMP(6) DEFAULT CURRENT_TIMESTAMP(6))",
)

CONFIG_TEMPLATE = """\
# Written by `replcheck demo --source mariadb`: a private MariaDB server (removed when the
# demo ends), replicated into a Delta lake by the CDC pipeline, then validated.
connections:
  shop_src: {{url: "{url}?heartbeat_s=0.5"}}
  lake: {{lake: "{lake}"}}
pipelines:
  - name: {pipeline}
    source: shop_src
    target: lake
    tables: [shop.customers, shop.orders]
    state_dir: "{state}"
comparisons:
  - name: customers
    source: {{connection: shop_src, table: customers}}
    target: {{connection: lake, table: shop.customers}}
    columns: {{sensitive: [email]}}
  - name: orders
    source: {{connection: shop_src, table: orders}}
    target: {{connection: lake, table: shop.orders}}
"""

Echo = Callable[[str], None]


def _execute(server: EmbeddedServer, *statements: str) -> None:
    with driver_import("the MariaDB demo"):
        import pymysql

    connection = pymysql.connect(
        host="127.0.0.1", port=server.port, user="root", charset="utf8mb4", autocommit=False
    )
    with contextlib.closing(connection), connection.cursor() as cursor:
        for statement in statements:
            if statement == "ROLLBACK":
                connection.rollback()
            else:
                cursor.execute(statement)
        connection.commit()


def _initial_rows(server: EmbeddedServer, rng: random.Random) -> None:
    _execute(server, *SCHEMA_SQL)
    _execute(server, f"INSERT INTO shop.customers VALUES {customer_values(rng, range(1, 1001))}")
    for first in range(1, 5001, 1000):
        values = order_values(rng, range(first, first + 1000), 1000)
        _execute(
            server,
            f"INSERT INTO shop.orders (id, customer_id, amount, placed_at, weight) VALUES {values}",
        )


def _workload(server: EmbeddedServer, rng: random.Random) -> None:
    """Each statement group is one transaction, as an application would write them."""
    insert = "INSERT INTO shop.orders (id, customer_id, amount, placed_at, weight) VALUES"
    _execute(server, f"{insert} {order_values(rng, range(5001, 5501), 1000)}")
    _execute(server, "INSERT INTO shop.customers (id, name) VALUES (1001, 'New'), (1002, 'Newer')")
    _execute(
        server,
        "UPDATE shop.orders SET status = 'paid' WHERE id % 3 = 0",
        "UPDATE shop.orders SET status = 'shipped' WHERE id % 9 = 0",
    )
    _execute(server, "DELETE FROM shop.orders WHERE id BETWEEN 100 AND 199")
    _execute(server, "UPDATE shop.customers SET balance = balance * 1.1 WHERE tier = 3")
    _execute(server, "DELETE FROM shop.orders WHERE id = 7", "ROLLBACK")  # never replicated
    _execute(server, "ALTER TABLE shop.customers ADD COLUMN referrer INT")
    _execute(server, "UPDATE shop.customers SET referrer = id - 1 WHERE id % 50 = 0")


@contextlib.contextmanager
def mariadb_demo(workdir: Path, echo: Echo) -> Iterator[DemoSetup]:
    """Run the demo's source side; the server keeps running until the block ends.

    Raises:
        MariaDBNotInstalledError: The MariaDB binaries are missing (exit 2, names the fix).
    """
    for stale in ("lake", "state", "replcheck.yaml"):
        path = workdir / stale
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    workdir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(SEED)
    with running_server("MINIMAL") as server:
        echo(f"private MariaDB server on 127.0.0.1:{server.port} (data in {server.root})")
        config = workdir / "replcheck.yaml"
        config.write_text(
            CONFIG_TEMPLATE.format(
                url=server.url(DATABASE),
                lake=workdir / "lake",
                state=workdir / "state",
                pipeline=PIPELINE,
            ),
            encoding="utf-8",
        )
        _initial_rows(server, rng)
        run_pipeline(config, PIPELINE, until_caught_up=True)  # the initial snapshot
        echo("pipeline: initial snapshot of shop.customers and shop.orders in the lake")
        _workload(server, rng)
        reached = run_pipeline(config, PIPELINE, until_caught_up=True)
        echo(f"pipeline: the workload replicated from the binlog up to {reached}")
        expected = inject_drift(workdir / "lake", lambda table: f"{DATABASE}.{table}")
        echo(f"lake: {len(expected)} rows changed behind the pipeline's back")
        yield DemoSetup(config, expected)
