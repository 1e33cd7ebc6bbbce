"""The embedded demo: a sample source, a drifted lake copy, and a real validation.

No server to set up: the source is a DuckDB file with three tables and a realistic mix of
types; the lake copy is written in the changelog layout (a snapshot at position 1, then a
"drift" commit at position 2 that deletes, changes and adds rows behind the pipeline's
back). The orders copy keeps timestamps at millisecond precision — a precision trap the
comparison's ``timestamp_precision: 3`` must absorb, so it is NOT reported. The demo knows
what it injected and checks that exactly that was found.
"""

from __future__ import annotations

import datetime as dt
import decimal
import random
import uuid
from pathlib import Path
from typing import Any

from cdc_core.drivers import driver_import
from cdc_core.lake.layout import LakeTable, append_changelog
from cdc_core.names import COMMIT_POS, COMMIT_TS, OP, SEQ, TXID
from validator.demo.setup import DemoSetup, Expected, Row

SEED = 20261122
APP_ID = "replcheck-demo"
COMMIT_TIME = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

SCHEMA_SQL = """
CREATE TABLE customers (
    id INTEGER PRIMARY KEY, name VARCHAR, email VARCHAR, signup DATE, vip BOOLEAN,
    balance DECIMAL(12,2), profile JSON);
CREATE TABLE orders (
    id BIGINT PRIMARY KEY, customer_id INTEGER, amount DECIMAL(10,2), placed_at TIMESTAMP,
    status VARCHAR, weight DOUBLE, ref UUID);
CREATE TABLE shipments (
    region VARCHAR, shipment_no INTEGER, carrier VARCHAR, shipped_at TIMESTAMPTZ, cost REAL,
    PRIMARY KEY (region, shipment_no));
"""

CONFIG_TEMPLATE = """\
# Written by `replcheck demo`: a DuckDB source compared with a drifted Delta lake copy.
connections:
  demo_src: {{url: "duckdb:///{source}"}}
  lake: {{lake: "{lake}"}}
comparisons:
  - name: customers
    source: {{connection: demo_src, table: customers}}
    target: {{connection: lake, table: shop.customers}}
    columns: {{sensitive: [email]}}
  - name: orders
    source: {{connection: demo_src, table: orders}}
    target: {{connection: lake, table: shop.orders}}
    options: {{timestamp_precision: 3}}   # the lake keeps milliseconds
  - name: shipments
    source: {{connection: demo_src, table: shipments}}
    target: {{connection: lake, table: shop.shipments}}
"""


def _customers(rng: random.Random) -> list[Row]:
    names = ["Ada", "Bob", "Chloé", "Dmitri", "Eun-ji", "Fatima", "Gareth", "Hana"]
    return [
        {
            "id": i,
            "name": f"{rng.choice(names)} {i}",
            "email": f"user{i}@example.com",
            "signup": dt.date(2020, 1, 1) + dt.timedelta(days=rng.randrange(2000)),
            "vip": rng.random() < 0.1,
            "balance": decimal.Decimal(rng.randrange(-50_000, 5_000_000)) / 100,
            "profile": f'{{"tier": {rng.randrange(4)}, "tags": ["a", "b"]}}',
        }
        for i in range(1, 2001)
    ]


def _orders(rng: random.Random) -> list[Row]:
    start = dt.datetime(2025, 1, 1)
    return [
        {
            "id": i,
            "customer_id": rng.randrange(1, 2001),
            "amount": decimal.Decimal(rng.randrange(100, 100_000)) / 100,
            "placed_at": start + dt.timedelta(microseconds=rng.randrange(10**13)),
            "status": rng.choice(["new", "paid", "shipped", "returned"]),
            "weight": rng.random() * 30,
            "ref": str(uuid.UUID(int=rng.getrandbits(128))),
        }
        for i in range(1, 20_001)
    ]


def _shipments(rng: random.Random) -> list[Row]:
    return [
        {
            "region": region,
            "shipment_no": n,
            "carrier": rng.choice(["DHL", "UPS", "La Poste", "Яндекс"]),
            "shipped_at": dt.datetime(2025, 6, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=n * 37),
            "cost": round(rng.random() * 100, 2),
        }
        for region in ("eu", "us", "ap")
        for n in range(1, 1001)
    ]


def _create_source(path: Path, tables: dict[str, list[Row]]) -> None:
    import pyarrow as pa

    with driver_import("the demo"):
        import duckdb

    with duckdb.connect(str(path)) as connection:
        connection.execute("SET TimeZone = 'UTC'")
        connection.execute(SCHEMA_SQL)
        for table, rows in tables.items():
            # Bulk load through Arrow: row-by-row executemany takes a minute here.
            connection.register("incoming", pa.Table.from_pylist(rows))
            connection.execute(f"INSERT INTO {table} SELECT * FROM incoming")
            connection.unregister("incoming")


def _with_meta(rows: list[Row], op: str, position: int, txid: str) -> list[Row]:
    return [
        {**row, OP: op, COMMIT_POS: position, SEQ: seq, TXID: txid, COMMIT_TS: COMMIT_TIME}
        for seq, row in enumerate(rows)
    ]


def _write(lake: LakeTable, rows: list[Row], schema: Any, position: int) -> None:
    import pyarrow as pa

    append_changelog(lake, pa.Table.from_pylist(rows, schema), position, f"demo:{position}", APP_ID)


def _lake_schema(source: Path, table: str) -> Any:
    """The changelog schema: the source's Arrow types plus the bookkeeping columns."""
    import pyarrow as pa

    from cdc_core.lake.layout import meta_fields
    from connectors.duckdb.connector import DuckDBConnector

    connector = DuckDBConnector(f"duckdb:///{source}")
    reflected = connector.reflect(table)
    schema = connector.arrow_schema(reflected, [c.name for c in reflected.columns])
    if table == "orders":  # the precision trap: the copy keeps milliseconds
        schema = schema.set(
            schema.get_field_index("placed_at"), pa.field("placed_at", pa.timestamp("ms"))
        )
    return pa.schema([*schema, *meta_fields()])


def _to_millis(rows: list[Row]) -> list[Row]:
    """Round placed_at to milliseconds, half up, as the hash contract rounds."""
    rounded = []
    for row in rows:
        stamp = row["placed_at"]
        micros = stamp.microsecond + 500
        whole = stamp.replace(microsecond=0) + dt.timedelta(microseconds=micros // 1000 * 1000)
        rounded.append({**row, "placed_at": whole})
    return rounded


def _drift(tables: dict[str, list[Row]]) -> tuple[dict[str, list[tuple[str, Row]]], Expected]:
    customers = {r["id"]: r for r in tables["customers"]}
    orders = {r["id"]: r for r in tables["orders"]}
    shipments = {(r["region"], r["shipment_no"]): r for r in tables["shipments"]}
    events: dict[str, list[tuple[str, Row]]] = {
        "customers": [
            ("d", customers[17]),
            ("d", customers[404]),
            ("u", {**customers[99], "name": "Renamed Behind The Back"}),
            ("u", {**customers[123], "email": "leaked@example.com"}),
            ("c", {**customers[5], "id": 99_999}),
        ],
        "orders": [
            ("d", orders[3]),
            ("d", orders[10_000]),
            ("d", orders[19_999]),
            ("u", {**orders[5], "amount": orders[5]["amount"] + decimal.Decimal("0.01")}),
            ("u", {**orders[777], "placed_at": orders[777]["placed_at"] + dt.timedelta(seconds=1)}),
        ],
        "shipments": [
            ("d", shipments[("eu", 42)]),
            ("u", {**shipments[("us", 7)], "cost": shipments[("us", 7)]["cost"] + 1.5}),
            ("c", {**shipments[("ap", 9)], "shipment_no": 9999}),
        ],
    }
    expected: Expected = {
        ("customers", "missing_in_target", ("17",)),
        ("customers", "missing_in_target", ("404",)),
        ("customers", "changed", ("99",)),
        ("customers", "changed", ("123",)),
        ("customers", "extra_in_target", ("99999",)),
        ("orders", "missing_in_target", ("3",)),
        ("orders", "missing_in_target", ("10000",)),
        ("orders", "missing_in_target", ("19999",)),
        ("orders", "changed", ("5",)),
        ("orders", "changed", ("777",)),
        ("shipments", "missing_in_target", ("eu", "42")),
        ("shipments", "changed", ("us", "7")),
        ("shipments", "extra_in_target", ("ap", "9999")),
    }
    return events, expected


def build_demo(workdir: Path) -> DemoSetup:
    """Create the source, the drifted lake and the config file under ``workdir``."""
    workdir.mkdir(parents=True, exist_ok=True)
    source, lake_root = workdir / "shop.duckdb", workdir / "lake"
    for stale in (source, lake_root):
        if stale.is_file():
            stale.unlink()
        elif stale.is_dir():
            import shutil

            shutil.rmtree(stale)
    rng = random.Random(SEED)
    tables = {"customers": _customers(rng), "orders": _orders(rng), "shipments": _shipments(rng)}
    _create_source(source, tables)
    events, expected = _drift(tables)
    for table, rows in tables.items():
        lake = LakeTable(lake_root, f"shop.{table}")
        schema = _lake_schema(source, table)
        copy = _to_millis(rows) if table == "orders" else rows
        _write(lake, _with_meta(copy, "r", 1, "snapshot"), schema, position=1)
        drift = [{**row, **_with_meta([row], op, 2, "drift")[0]} for op, row in events[table]]
        drift = _to_millis(drift) if table == "orders" else drift
        for seq, row in enumerate(drift):
            row[SEQ] = seq
        _write(lake, drift, schema, position=2)
    config = workdir / "replcheck.yaml"
    config.write_text(CONFIG_TEMPLATE.format(source=source, lake=lake_root), encoding="utf-8")
    return DemoSetup(config, expected)
