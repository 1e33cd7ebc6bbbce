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
import datetime as dt
import logging
import random
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from cdc_core.drivers import driver_import
from cdc_core.errors import TerminalError
from cdc_core.lake import COMMIT_POS, COMMIT_TS, OP, SEQ, TXID, LakeTable, append_changelog
from connectors.mariadb.embedded_server import EmbeddedServer, running_server
from validator.commands.cdc import run_pipeline
from validator.demo.setup import DemoSetup, Expected

logger = logging.getLogger(__name__)
SEED = 20261122
DATABASE = "shop"
PIPELINE = "shop"
DRIFT_TIME = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

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


def _customers(rng: random.Random, ids: range) -> str:
    names = ["Ada", "Bob", "Chloé", "Dmitri", "Eun-ji", "Fatima", "Gareth", "Hana"]
    return ", ".join(
        f"({i}, '{rng.choice(names)} {i}', 'user{i}@example.com', {rng.randrange(4)},"
        f" '2024-0{rng.randrange(1, 10)}-1{rng.randrange(10)}',"
        f" {rng.randrange(10**6)}.{i % 100:02d})"
        for i in ids
    )


def _orders(rng: random.Random, ids: range, customers: int) -> str:
    """Orders without ``status`` and ``created``: the server fills their defaults."""
    return ", ".join(
        f"({i}, {rng.randrange(1, customers + 1)}, {rng.randrange(100, 100_000) / 100:.2f},"
        f" '2025-{rng.randrange(1, 13):02d}-0{rng.randrange(1, 10)} 10:{rng.randrange(60):02d}:00."
        f"{rng.randrange(10**6):06d}', {rng.random() * 30:.6f})"
        for i in ids
    )


def _initial_rows(server: EmbeddedServer, rng: random.Random) -> None:
    _execute(server, *SCHEMA_SQL)
    _execute(server, f"INSERT INTO shop.customers VALUES {_customers(rng, range(1, 1001))}")
    for first in range(1, 5001, 1000):
        values = _orders(rng, range(first, first + 1000), 1000)
        _execute(
            server,
            f"INSERT INTO shop.orders (id, customer_id, amount, placed_at, weight) VALUES {values}",
        )


def _workload(server: EmbeddedServer, rng: random.Random) -> None:
    """Each statement group is one transaction, as an application would write them."""
    insert = "INSERT INTO shop.orders (id, customer_id, amount, placed_at, weight) VALUES"
    _execute(server, f"{insert} {_orders(rng, range(5001, 5501), 1000)}")
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


def _drift(lake: Path) -> Expected:
    """Change three rows in the lake behind the pipeline's back, at its own position."""
    customers = _drift_table(lake, "customers", [("d", 17, {}), ("u", 99, {"name": "Renamed"})])
    _drift_table(lake, "orders", [("c", 5, {"id": 999_999})])
    return {
        ("customers", "missing_in_target", (str(customers[0]),)),
        ("customers", "changed", (str(customers[1]),)),
        ("orders", "extra_in_target", ("999999",)),
    }


def _drift_table(
    lake: Path, table: str, changes: list[tuple[str, int, dict[str, Any]]]
) -> list[int]:
    import pyarrow as pa
    from deltalake import DeltaTable

    from cdc_core.lake import high_water_mark

    lake_table = LakeTable(lake, f"{DATABASE}.{table}")
    position = high_water_mark(lake_table)
    if position is None:
        raise TerminalError(f"the pipeline wrote nothing to lake table {lake_table.table}")
    mirror = DeltaTable(str(lake_table.mirror)).to_pyarrow_table().to_pylist()
    rows = {row["id"]: {k: v for k, v in row.items() if not k.startswith("_")} for row in mirror}
    events = [
        {
            **rows[key],
            **override,
            OP: op,
            COMMIT_POS: position,
            SEQ: 1_000_000 + seq,
            TXID: "demo-drift",
            COMMIT_TS: DRIFT_TIME,
        }
        for seq, (op, key, override) in enumerate(changes)
    ]
    schema = pa.schema(DeltaTable(str(lake_table.changelog)).schema().to_arrow())
    append_changelog(
        lake_table,
        pa.Table.from_pylist(events, schema),
        position,
        "demo-drift",
        "replcheck-demo-drift",
    )
    return [int(events[i]["id"]) for i in range(len(events))]


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
        expected = _drift(workdir / "lake")
        echo(f"lake: {len(expected)} rows changed behind the pipeline's back")
        yield DemoSetup(config, expected)
