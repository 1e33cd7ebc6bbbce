"""The default demo: the product's whole shape with no server, on an embedded SQLite file.

``replcheck demo`` creates a SQLite ``shop.db`` under the work directory, installs trigger
capture on its tables (``replcheck cdc install-capture``'s code, printing nothing here but
the count), lets the real pipeline (``replcheck cdc run``'s code) load them into a Delta lake
by a snapshot at a capture position, runs a workload at the source (inserts, updates,
deletes, a rolled-back transaction) and replicates it from the logging tables. Then three
lake rows are changed behind the pipeline's back; the command validates (exactly those
three must be found), re-syncs them from the source, and validates again (in sync). The
validations run in the local engine (``engine: local``: SQLite and the lake read here and
hashed by DuckDB), so the demo needs ``replcheck[embedded]`` and no Spark.
"""

from __future__ import annotations

import contextlib
import random
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

from validator.commands.capture import change_capture
from validator.commands.cdc import run_pipeline
from validator.demo.drift import inject_drift
from validator.demo.setup import DemoSetup
from validator.demo.shop import customer_values, order_values

SEED = 20261127
PIPELINE = "shop"
SCHEMA_SQL = (
    "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT,"
    " tier INTEGER DEFAULT 1, signup DATE, balance DECIMAL(12,2) NOT NULL DEFAULT 0)",
    "CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL,"
    " amount DECIMAL(10,2) NOT NULL, status TEXT DEFAULT 'new', placed_at DATETIME NOT NULL,"
    " weight DOUBLE)",
)
CONFIG_TEMPLATE = """\
# Written by `replcheck demo`: an embedded SQLite shop database with trigger capture,
# replicated into a Delta lake by the CDC pipeline, then validated and re-synced. The
# local engine reads SQLite and the lake on this machine and hashes both in DuckDB: no Spark.
connections:
  shop_src: {{url: "sqlite:///{database}"}}
  lake: {{lake: "{lake}"}}
pipelines:
  - name: {pipeline}
    source: shop_src
    target: lake
    tables: [customers, orders]
    state_dir: "{state}"
comparisons:
  - name: customers
    source: {{connection: shop_src, table: customers}}
    target: {{connection: lake, table: customers}}
    columns: {{sensitive: [email]}}
  - name: orders
    source: {{connection: shop_src, table: orders}}
    target: {{connection: lake, table: orders}}
validation: {{engine: local}}
"""
Echo = Callable[[str], None]


def _execute(database: Path, *statements: str, rollback: bool = False) -> None:
    """One transaction of ``statements`` (rolled back instead of committed if asked)."""
    connection = sqlite3.connect(database, isolation_level=None)
    with contextlib.closing(connection):
        connection.execute("BEGIN")
        for statement in statements:
            connection.execute(statement)
        connection.execute("ROLLBACK" if rollback else "COMMIT")


ORDER_COLUMNS = "INSERT INTO orders (id, customer_id, amount, placed_at, weight) VALUES"


def _initial_rows(database: Path, rng: random.Random) -> None:
    _execute(database, *SCHEMA_SQL)
    _execute(database, f"INSERT INTO customers VALUES {customer_values(rng, range(1, 1001))}")
    for first in range(1, 5001, 1000):
        _execute(database, f"{ORDER_COLUMNS} {order_values(rng, range(first, first + 1000), 1000)}")


def _workload(database: Path, rng: random.Random) -> None:
    """Each call is one transaction, as an application would write them."""
    _execute(database, f"{ORDER_COLUMNS} {order_values(rng, range(5001, 5501), 1000)}")
    _execute(database, "INSERT INTO customers (id, name) VALUES (1001, 'New'), (1002, 'Newer')")
    _execute(
        database,
        "UPDATE orders SET status = 'paid' WHERE id % 3 = 0",
        "UPDATE orders SET status = 'shipped' WHERE id % 9 = 0",
    )
    _execute(database, "DELETE FROM orders WHERE id BETWEEN 100 AND 199")
    _execute(database, "UPDATE customers SET balance = balance * 1.1 WHERE tier = 3")
    _execute(database, "DELETE FROM orders WHERE id = 7", rollback=True)  # never replicated


def _fresh(workdir: Path) -> None:
    for stale in ("lake", "state", "shop.db", "replcheck.yaml"):
        path = workdir / stale
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    workdir.mkdir(parents=True, exist_ok=True)


@contextlib.contextmanager
def sqlite_demo(workdir: Path, echo: Echo) -> Iterator[DemoSetup]:
    """Build the demo's source, capture, lake and drift under ``workdir``."""
    _fresh(workdir)
    rng, database = random.Random(SEED), workdir / "shop.db"
    config = workdir / "replcheck.yaml"
    config.write_text(
        CONFIG_TEMPLATE.format(
            database=database, lake=workdir / "lake", state=workdir / "state", pipeline=PIPELINE
        ),
        encoding="utf-8",
    )
    _initial_rows(database, rng)
    echo(f"source: SQLite shop database {database} (1,000 customers, 5,000 orders)")
    plan = change_capture(config, PIPELINE, "install", lambda _: None)
    echo(f"capture: {len(plan.statements)} statements installed logging tables and triggers")
    run_pipeline(config, PIPELINE, until_caught_up=True)
    echo("pipeline: initial snapshot of customers and orders in the lake")
    _workload(database, rng)
    reached = run_pipeline(config, PIPELINE, until_caught_up=True)
    echo(
        "source: 500 orders inserted, statuses updated, 100 orders deleted, balances raised,"
        " one transaction rolled back"
    )
    echo(f"pipeline: the workload replicated from the capture tables up to {reached}")
    expected = inject_drift(workdir / "lake", lambda table: table)
    echo(f"drift: {len(expected)} lake rows changed behind the pipeline's back")
    yield DemoSetup(config, expected, repairs=True)
