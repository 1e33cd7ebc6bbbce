"""The hybrid and the local engine: MariaDB computes its own digests, Spark (hybrid) or
DuckDB (local) the lake's, and together they find exactly what the Spark engine finds.

A lake is built from a MariaDB database by the product's pipeline, then another writer
changes the lake's mirror behind the pipeline's back (one Delta commit of its own): rows
missing from the lake, extra in it, and changed, each both in leaves that also hold
unchanged rows and alone in a leaf. Each comparison runs in the local engine
(``auto`` chooses it), the hybrid engine and the Spark engine; all must report exactly the
injected drift, with the same changed columns and shown values.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cdc_core.lake.layout import LakeTable
from cdc_core.names import format_table
from reports.json_schema import validate_result
from tests.connectors.mariadb.pipeline_helpers import execute, mariadb_pipeline
from tests.private_servers import MariaDBServer
from validator.config import load_validator_config
from validator.demo.drift import change_mirror
from validator.demo.setup import found_differences
from validator.job import validate

pytestmark = [pytest.mark.integration, pytest.mark.mariadb, pytest.mark.spark]

BASE = dt.datetime(2024, 5, 1, 8, 30, 0)
# Keys 1..400 without 333, and two lone keys: with 256 rows a leaf, the range 1..2000 is 8
# leaves of 250 keys; leaves 0 and 1 hold many rows, 1500 and 2000 are alone in 5 and 7.
ORDER_KEYS = [k for k in range(1, 401) if k != 333] + [1500, 2000]
ORDERS_DDL = """CREATE TABLE orders (id INT PRIMARY KEY, amount DECIMAL(12,2) NOT NULL,
  placed DATETIME(6) NOT NULL, note VARCHAR(40), email VARCHAR(64)) CHARSET utf8mb4"""
ITEMS_DDL = """CREATE TABLE items (sku VARCHAR(40) PRIMARY KEY, qty INT, label TEXT)
  CHARSET utf8mb4"""
EVENTS_DDL = "CREATE TABLE events (id INT PRIMARY KEY, doc JSON)"


def _order(key: int) -> str:
    placed = BASE + dt.timedelta(seconds=key * 37, microseconds=(key * 7919) % 10**6)
    note = "NULL" if key % 5 == 0 else f"'note {key} — Zoë'"
    return f"({key}, {decimal.Decimal(key * 13) / 100}, '{placed}', {note}, 'u{key}@x.org')"


def _create(server: MariaDBServer, database: str) -> None:
    items = ", ".join(f"('sku-{i:04d}-ü', {i}, 'item {i}')" for i in range(1, 201))
    events = ", ".join(f'({i}, \'{{"n": {i}, "tags": ["a"]}}\')' for i in range(1, 51))
    execute(
        server,
        database,
        ORDERS_DDL,
        f"INSERT INTO orders VALUES {', '.join(_order(k) for k in ORDER_KEYS)}",
        ITEMS_DDL,
        f"INSERT INTO items VALUES {items}",
        EVENTS_DDL,
        f"INSERT INTO events VALUES {events}",
    )


def _inject(lake: LakeTable, key: str, drift: list[tuple[str, Any, dict[str, Any]]]) -> None:
    """Change the lake's mirror behind the pipeline's back, as another writer would
    (``change_mirror``): a ``u`` or ``d`` of a key starts from its row, a ``c`` of a new
    key from the oldest row."""
    change_mirror(lake, key, drift)


ORDERS_DRIFT: list[tuple[str, Any, dict[str, Any]]] = [
    ("d", 5, {}),  # missing, in leaf 0 with unchanged rows
    ("d", 2000, {}),  # missing, alone in leaf 7
    ("c", 333, {"note": "extra"}),  # extra, in leaf 1 with unchanged rows
    ("c", 1000, {"note": "extra"}),  # extra, alone in leaf 3
    ("c", 5000, {"note": "beyond"}),  # extra, beyond the source's range: into leaf 7
    ("u", 17, {"amount": decimal.Decimal("2.22")}),  # changed, with unchanged rows
    ("u", 18, {"note": None}),
    ("u", 19, {"placed": BASE}),
    ("u", 1500, {"note": "edited", "email": "leaked@x.org"}),  # changed, alone in leaf 5
]
ORDERS_FOUND = {
    ("orders", "missing_in_target", ("5",)),
    ("orders", "missing_in_target", ("2000",)),
    ("orders", "extra_in_target", ("333",)),
    ("orders", "extra_in_target", ("1000",)),
    ("orders", "extra_in_target", ("5000",)),
    ("orders", "changed", ("17",)),
    ("orders", "changed", ("18",)),
    ("orders", "changed", ("19",)),
    ("orders", "changed", ("1500",)),
}
ITEMS_DRIFT: list[tuple[str, Any, dict[str, Any]]] = [
    ("d", "sku-0010-ü", {}),
    ("c", "sku-9999-x", {"qty": 9999}),
    ("u", "sku-0020-ü", {"qty": 21}),
]
ITEMS_FOUND = {
    ("missing_in_target", ("sku-0010-ü",)),
    ("extra_in_target", ("sku-9999-x",)),
    ("changed", ("sku-0020-ü",)),
}


Drifted = tuple[MariaDBServer, str, Path]


@pytest.fixture(scope="module")
def drifted(
    mariadb_full: MariaDBServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Drifted]:
    """A MariaDB database, its lake written by the pipeline, and drift in the lake (built
    once for the module: a pipeline run and a lake cost seconds)."""
    work = tmp_path_factory.mktemp("hybrid")
    database = f"t_{uuid.uuid4().hex[:12]}"
    execute(mariadb_full, "mysql", f"CREATE DATABASE `{database}`")
    try:
        yield _build(mariadb_full, database, work)
    finally:
        execute(mariadb_full, "mysql", f"DROP DATABASE `{database}`")


def _build(server: MariaDBServer, database: str, work: Path) -> Drifted:
    _create(server, database)
    tables = ["orders", "items", "events"]
    with mariadb_pipeline(server, database, tables, work) as (pipeline, _):
        pipeline.run_until_caught_up()
    lake = work / "lake"
    _inject(LakeTable(lake, format_table(database, "orders")), "id", ORDERS_DRIFT)
    _inject(LakeTable(lake, format_table(database, "items")), "sku", ITEMS_DRIFT)
    _inject(LakeTable(lake, format_table(database, "events")), "id", [("d", 7, {})])
    return server, database, lake


def _validate(spark: Any, tmp_path: Path, drifted: Drifted, engine: str) -> dict[str, Any]:
    """Every comparison of the drifted database with its lake, in ``engine``."""
    server, database, lake = drifted

    def comparison(name: str, table: str, extra: str = "") -> str:
        target = json.dumps(format_table(database, table))
        return (
            f"  - {{name: {name}, source: {{connection: src, table: {table}}},\n"
            f"     target: {{connection: lake, table: {target}}}{extra}}}\n"
        )

    path = tmp_path / f"{engine}.yaml"
    path.write_text(
        "connections:\n"
        f"  src: {{url: {json.dumps(server.url(database))}}}\n"
        f"  lake: {{lake: {json.dumps(str(lake))}}}\n"
        "comparisons:\n"
        + comparison("orders", "orders", ", columns: {sensitive: [email]}")
        + comparison("items", "items")
        + comparison("items_shared", "items", ", options: {depth: 2}")
        + comparison("events", "events")
        + f"validation: {{lake_wait_timeout_s: 60, engine: {engine}}}\n",
        encoding="utf-8",
    )
    document = validate(spark, load_validator_config(path, environ={}))
    validate_result(document)  # result.json's schema knows the engine
    return document


def _detail(comparison: dict[str, Any]) -> set[tuple[Any, ...]]:
    return {
        (
            d["kind"],
            tuple(d["key"]),
            tuple((c["column"], c["source"], c["target"]) for c in d.get("columns", ())),
        )
        for d in comparison["differences"]
    }


@pytest.fixture(scope="module")
def runs(
    spark: Any, drifted: Drifted, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict[str, dict[str, Any]]]:
    """Every comparison, validated by ``engine: auto`` (local), ``hybrid`` and ``spark``."""
    work = tmp_path_factory.mktemp("configs")
    return {
        engine: {c["name"]: c for c in _validate(spark, work, drifted, engine)["comparisons"]}
        for engine in ("auto", "hybrid", "spark")
    }


def _same_findings(local: dict[str, Any], hybrid: dict[str, Any]) -> None:
    """The local engine found what the hybrid engine found, in the same leaves."""
    assert _found(local) == _found(hybrid)
    assert _detail(local) == _detail(hybrid)
    for field in ("counts_by_kind", "mismatched_leaves", "leaves_compared", "depth"):
        assert local[field] == hybrid[field], field
    for field in ("source_rows", "target_rows", "target_position"):
        assert local[field] == hybrid[field], field


def _found(comparison: dict[str, Any]) -> set[tuple[Any, ...]]:
    assert comparison["error"] is None, comparison["error"]
    return found_differences({"comparisons": [comparison]})


def test_integer_keys_use_range_leaves_and_find_exactly_the_drift(
    runs: dict[str, dict[str, dict[str, Any]]],
) -> None:
    hybrid, in_spark = runs["hybrid"]["orders"], runs["spark"]["orders"]
    local = runs["auto"]["orders"]
    assert (local["engine"], hybrid["engine"], in_spark["engine"]) == ("local", "hybrid", "spark")
    _same_findings(local, hybrid)
    assert local["timings"].keys() == hybrid["timings"].keys()
    assert _found(hybrid) == _found(in_spark) == ORDERS_FOUND
    assert _detail(hybrid) == _detail(in_spark)
    assert hybrid["counts_by_kind"] == in_spark["counts_by_kind"]
    assert (hybrid["source_rows"], hybrid["target_rows"]) == (len(ORDER_KEYS), len(ORDER_KEYS) + 1)
    assert (hybrid["depth"], hybrid["leaves_compared"]) == (3, 8)  # key ranges of 250
    assert hybrid["mismatched_leaves"] == {"0": 4, "1": 1, "3": 1, "5": 1, "7": 2}
    changed = {d["key"][0]: d["columns"] for d in hybrid["differences"] if d.get("columns")}
    assert changed["1500"] == [
        {"column": "note", "source": None, "target": "edited"},
        {"column": "email", "source": "***", "target": "***"},
    ]
    assert hybrid["source_position"] is not None
    assert hybrid["source_position"] == hybrid["target_position"]


def test_string_keys_use_hash_leaves_alone_and_shared(
    runs: dict[str, dict[str, dict[str, Any]]],
) -> None:
    for name, leaves in (("items", 2**16), ("items_shared", 4)):
        hybrid, in_spark = runs["hybrid"][name], runs["spark"][name]
        assert (runs["auto"][name]["engine"], hybrid["engine"]) == ("local", "hybrid")
        _same_findings(runs["auto"][name], hybrid)
        assert {f[1:] for f in _found(hybrid)} == {f[1:] for f in _found(in_spark)} == ITEMS_FOUND
        assert _detail(hybrid) == _detail(in_spark)
        assert hybrid["leaves_compared"] == leaves
    shared = runs["hybrid"]["items_shared"]
    assert shared["leaves_mismatched"] <= 3  # some drift shares a leaf of 4 with other rows


def test_a_column_the_source_cannot_hash_falls_back_to_spark(
    runs: dict[str, dict[str, dict[str, Any]]],
) -> None:
    events = runs["auto"]["events"]
    assert events["engine"] == "spark"  # MariaDB writes no canonical JSON in SQL
    assert runs["hybrid"]["events"]["error"] is not None
    assert _found(events) == {("events", "missing_in_target", ("7",))}


def test_insisting_on_the_hybrid_engine_where_it_cannot_run_is_an_error(
    spark: Any, drifted: Drifted, tmp_path: Path
) -> None:
    for engine in ("hybrid", "local"):
        document = _validate(spark, tmp_path, drifted, engine)
        errors = {c["name"]: c["error"] for c in document["comparisons"]}
        assert errors["orders"] is None
        assert f"{engine} engine cannot compare it" in errors["events"]
        assert "json" in errors["events"]
