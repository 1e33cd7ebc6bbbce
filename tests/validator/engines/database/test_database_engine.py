"""The database engine: two databases compute their own digests, and find what Spark finds.

Each scenario is validated by both engines on the same servers; the database engine must
report exactly the injected drift, and exactly what the Spark engine reports (kinds, keys,
changed columns and their shown values).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.private_servers import MariaDBServer, PostgresServer
from validator.config import load_validator_config
from validator.demo.setup import found_differences
from validator.engines.sides.spark.session import LazySparkSession
from validator.job import validate

pytestmark = [pytest.mark.integration, pytest.mark.mariadb, pytest.mark.postgres, pytest.mark.spark]

BASE = dt.datetime(2024, 5, 1, 8, 30, 0)
ROWS = 600


def source_rows() -> list[tuple[Any, ...]]:
    """(region, id, amount, price, placed, shipped, weight, flag, note, email, day, ref)."""
    return [
        (
            f"r{i % 3}",
            i,
            decimal.Decimal(i * 13) / 100,
            None if i % 11 == 0 else decimal.Decimal(i) / 1000,
            BASE + dt.timedelta(seconds=i * 37, microseconds=(i * 7919) % 10**6),
            None if i % 7 == 0 else dt.datetime(2024, 6, 1, tzinfo=dt.UTC) + dt.timedelta(i),
            None if i % 13 == 0 else i / 7,
            i % 2,
            None if i % 5 == 0 else f"note {i} — Zoë",
            f"user{i}@example.com",
            dt.date(1970, 1, 1) + dt.timedelta(days=i * 50),
            str(uuid.UUID(int=i * 7919)),
        )
        for i in range(1, ROWS + 1)
    ]


MARIADB_DDL = """CREATE TABLE orders (
  region VARCHAR(8) NOT NULL, id INT NOT NULL, amount DECIMAL(12,2) NOT NULL,
  price DECIMAL(14,3), placed DATETIME(6) NOT NULL, shipped TIMESTAMP(6) NULL,
  weight DOUBLE, flag TINYINT(1) NOT NULL, note TEXT, email VARCHAR(64),
  day DATE, ref UUID, PRIMARY KEY (region, id)) CHARSET utf8mb4"""
POSTGRES_DDL = """CREATE TABLE orders (
  region varchar(8) NOT NULL, id integer NOT NULL, amount numeric(12,2) NOT NULL,
  price numeric(14,3), placed timestamp(6) NOT NULL, shipped timestamptz(6),
  weight double precision, flag boolean NOT NULL, note text, email varchar(64),
  day date, ref uuid, PRIMARY KEY (region, id))"""
MARKS = ", ".join(["%s"] * 12)

# The drift injected into the target, and what it must be reported as.
MISSING = (5, 333)
EXTRA = (ROWS + 1, ROWS + 2)
CHANGED_SQL = {
    17: "UPDATE orders SET amount = amount + 0.01 WHERE id = 17",
    18: "UPDATE orders SET price = NULL WHERE id = 18",
    19: "UPDATE orders SET placed = placed + interval '1 microsecond' WHERE id = 19",
    20: "UPDATE orders SET weight = weight * (1 + 1e-15) WHERE id = 20",
    21: "UPDATE orders SET flag = NOT flag, note = 'edited' WHERE id = 21",
    23: "UPDATE orders SET email = 'leaked@example.com' WHERE id = 23",
    24: "UPDATE orders SET day = day + 1 WHERE id = 24",
    26: "UPDATE orders SET ref = gen_random_uuid() WHERE id = 26",
    27: "UPDATE orders SET shipped = shipped + interval '1 second' WHERE id = 27",
}


def _region(key: int) -> str:
    return f"r{key % 3}"


def expected() -> set[tuple[str, str, tuple[str, ...]]]:
    found = {("orders", "missing_in_target", (_region(k), str(k))) for k in MISSING}
    found |= {("orders", "extra_in_target", (_region(k), str(k))) for k in EXTRA}
    found |= {("orders", "changed", (_region(k), str(k))) for k in CHANGED_SQL}
    return found


@dataclass(frozen=True, slots=True)
class OrdersPair:
    """A MariaDB source database and a PostgreSQL target database, both empty at first."""

    mariadb: MariaDBServer
    source_db: str
    postgres: PostgresServer
    target_db: str

    def load(self, target: list[tuple[Any, ...]]) -> None:
        """``source_rows()`` into MariaDB, ``target`` (rows of the same shape) into
        PostgreSQL."""
        with contextlib.closing(self.mariadb.connect(self.source_db)) as conn, conn.cursor() as cur:
            cur.execute("SET time_zone = '+00:00'")
            cur.execute(MARIADB_DDL)
            utc = [(*r[:5], r[5] and r[5].replace(tzinfo=None), *r[6:]) for r in source_rows()]
            cur.executemany(f"INSERT INTO orders VALUES ({MARKS})", utc)
        with contextlib.closing(self.postgres.connect(self.target_db)) as conn:
            conn.execute(POSTGRES_DDL)
            with conn.cursor() as cur:
                booleans = [(*r[:7], bool(r[7]), *r[8:]) for r in target]
                cur.executemany(f"INSERT INTO orders VALUES ({MARKS})", booleans)

    def run_on_target(self, sql: str) -> None:
        with contextlib.closing(self.postgres.connect(self.target_db)) as conn:
            conn.execute(sql)

    @property
    def urls(self) -> tuple[str, str]:
        return self.mariadb.url(self.source_db), self.postgres.url(self.target_db)


@pytest.fixture
def pair(
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    postgres: PostgresServer,
    postgres_database: Callable[[PostgresServer], str],
) -> OrdersPair:
    return OrdersPair(
        mariadb_full, mariadb_database(mariadb_full), postgres, postgres_database(postgres)
    )


@pytest.fixture
def mariadb_to_postgres(pair: OrdersPair) -> tuple[str, str]:
    """A MariaDB source and a PostgreSQL copy of it with the drift above."""
    rows = source_rows()
    extra = [(_region(k), k, *rows[0][2:]) for k in EXTRA]
    pair.load([r for r in rows if r[1] not in MISSING] + extra)
    for sql in CHANGED_SQL.values():
        pair.run_on_target(sql)
    return pair.urls


def config_of(tmp_path: Path, source: str, target: str, engine: str, extra: str = "") -> Path:
    path = tmp_path / f"{engine}.yaml"
    path.write_text(f"""\
connections:
  src: {{url: "{source}"}}
  dst: {{url: "{target}"}}
comparisons:
  - name: orders
    source: {{connection: src, table: orders}}
    target: {{connection: dst, table: orders}}
    engine: {engine}
    columns: {{boolean: [flag], sensitive: [email]}}
{extra}validation: {{recheck_lag_s: 0}}
""")
    return path


def run(spark: Any, path: Path) -> dict[str, Any]:
    comparison: dict[str, Any] = validate(spark, load_validator_config(path, environ={}))[
        "comparisons"
    ][0]
    assert comparison["error"] is None, comparison["error"]
    return comparison


def detail(comparison: dict[str, Any]) -> set[tuple[Any, ...]]:
    """Every difference with its changed columns and their shown values."""
    return {
        (
            d["kind"],
            tuple(d["key"]),
            tuple((c["column"], c["source"], c["target"]) for c in d.get("columns", ())),
        )
        for d in comparison["differences"]
    }


def test_the_database_engine_finds_exactly_the_drift_and_what_spark_finds(
    spark: Any, mariadb_to_postgres: tuple[str, str], tmp_path: Path
) -> None:
    source, target = mariadb_to_postgres
    in_databases = run(spark, config_of(tmp_path, source, target, "database"))
    in_spark = run(spark, config_of(tmp_path, source, target, "spark"))
    assert (in_databases["engine"], in_spark["engine"]) == ("database", "spark")
    document = {"comparisons": [in_databases]}
    assert found_differences(document) == expected()
    assert detail(in_databases) == detail(in_spark)
    assert in_databases["counts_by_kind"] == {"missing_in_target": 2, "extra_in_target": 2,
                                              "changed": len(CHANGED_SQL)}  # fmt: skip
    assert (in_databases["source_rows"], in_databases["target_rows"]) == (ROWS, ROWS)
    assert in_databases["source_position"] is not None  # the binlog position of the snapshot
    changed = {d["key"][1]: d["columns"] for d in in_databases["differences"] if "columns" in d}
    assert [c["column"] for c in changed["21"]] == ["flag", "note"]
    assert changed["23"] == [{"column": "email", "source": "***", "target": "***"}]
    assert changed["18"][0]["target"] is None


def test_an_in_sync_copy_reads_no_keys(spark: Any, pair: OrdersPair, tmp_path: Path) -> None:
    """Equal tables compare equal leaf by leaf: nothing beyond the digests is read."""
    pair.load(source_rows())
    path = config_of(tmp_path, *pair.urls, "database")
    comparison = run(spark, path)
    assert comparison["status"] == "in_sync"
    assert comparison["leaves_mismatched"] == 0 and comparison["differences"] == []


@pytest.fixture
def string_keys(
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    postgres: PostgresServer,
    postgres_database: Callable[[PostgresServer], str],
) -> tuple[str, str]:
    """A PostgreSQL source keyed by text and a MariaDB copy with drift and a duplicate key
    (the copy has no primary key)."""
    source_db, target_db = postgres_database(postgres), mariadb_database(mariadb_full)
    rows = [(f"sku-{i:04d}-ü", i, f"item {i}") for i in range(1, 301)]
    with contextlib.closing(postgres.connect(source_db)) as conn:
        conn.execute("CREATE TABLE items (sku text PRIMARY KEY, qty integer, label text)")
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO items VALUES (%s, %s, %s)", rows)
    copy = [r for r in rows if r[1] != 10]
    copy = [(r[0], r[1] + 1, r[2]) if r[1] == 20 else r for r in copy]
    copy += [("sku-9999-x", 9999, "extra"), rows[29]]  # rows[29] (qty 30) twice
    with contextlib.closing(mariadb_full.connect(target_db)) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE items (sku VARCHAR(40), qty INT, label TEXT) CHARSET utf8mb4")
        cur.executemany("INSERT INTO items VALUES (%s, %s, %s)", copy)
    return postgres.url(source_db), mariadb_full.url(target_db)


def test_text_keys_are_bucketed_by_hash_and_duplicates_are_reported(
    spark: Any, string_keys: tuple[str, str], tmp_path: Path
) -> None:
    source, target = string_keys
    results = {}
    for engine in ("database", "spark"):
        path = tmp_path / f"{engine}.yaml"
        path.write_text(f"""\
connections:
  src: {{url: "{source}"}}
  dst: {{url: "{target}"}}
comparisons:
  - {{name: items, source: {{connection: src, table: items}},
      target: {{connection: dst, table: items}}, engine: {engine}}}
validation: {{recheck_lag_s: 0}}
""")
        results[engine] = run(spark, path)
    in_databases = results["database"]
    assert found_differences({"comparisons": [in_databases]}) == {
        ("items", "missing_in_target", ("sku-0010-ü",)),
        ("items", "changed", ("sku-0020-ü",)),
        ("items", "extra_in_target", ("sku-9999-x",)),
        ("items", "duplicate_key", ("sku-0030-ü",)),
    }
    duplicate = next(d for d in in_databases["differences"] if d["kind"] == "duplicate_key")
    assert (duplicate["side"], duplicate["count"]) == ("target", 2)
    assert in_databases["leaves_compared"] == 2**16  # hash leaves, not key ranges
    # A database target is read as it is now: the source's snapshot needs no log position
    # (no replication slot), and none is claimed.
    assert in_databases["source_position"] is None
    assert detail(in_databases) == detail(results["spark"])


def test_auto_uses_the_databases_without_starting_spark(
    mariadb_to_postgres: tuple[str, str], tmp_path: Path
) -> None:
    source, target = mariadb_to_postgres
    lazy = LazySparkSession()
    document = validate(lazy, load_validator_config(config_of(tmp_path, source, target, "auto")))
    assert document["comparisons"][0]["engine"] == "database"
    assert found_differences(document) == expected()
    assert not lazy.started


def test_what_the_databases_cannot_write_exactly_goes_to_spark(
    spark: Any, mariadb_to_postgres: tuple[str, str], tmp_path: Path
) -> None:
    source, target = mariadb_to_postgres
    path = config_of(tmp_path, source, target, "auto", "    options: {float_digits: 12}\n")
    comparison = run(spark, path)
    assert comparison["engine"] == "spark"
    assert found_differences({"comparisons": [comparison]}) == expected() - {
        ("orders", "changed", ("r2", "20"))  # a 1e-15 relative change at 12 digits
    }


def test_insisting_on_the_database_engine_names_what_it_cannot_do(
    spark: Any, mariadb_to_postgres: tuple[str, str], tmp_path: Path
) -> None:
    source, target = mariadb_to_postgres
    path = config_of(
        tmp_path, source, target, "database", "    options: {case_insensitive: true}\n"
    )
    document = validate(spark, load_validator_config(path, environ={}))
    comparison = document["comparisons"][0]
    assert document["status"] == "error"
    assert "database engine cannot compare it" in comparison["error"]
    assert "case_insensitive" in comparison["error"] and "engine: auto" in comparison["error"]


@contextlib.contextmanager
def replicating_writer(source: Any, target: Any, stop: threading.Event) -> Iterator[list[int]]:
    """Keep updating rows on the source and, a moment later, on the target (a replica
    with a small lag), until ``stop`` is set; yields the keys it changed."""
    changed: list[int] = []

    def write() -> None:
        key = 100
        while not stop.is_set():
            key = 100 + (key - 99) % 300
            with source.cursor() as cur:
                cur.execute("UPDATE orders SET amount = amount + 1 WHERE id = %s", (key,))
            time.sleep(0.01)
            target.execute("UPDATE orders SET amount = amount + 1 WHERE id = %s", (key,))
            changed.append(key)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    try:
        yield changed
    finally:
        stop.set()
        thread.join()


def test_a_replica_written_during_the_run_shows_no_false_drift(
    spark: Any, pair: OrdersPair, tmp_path: Path
) -> None:
    """Rows replicated during the run are either caught up at the re-check or reported as
    in flight, never as drift; the one real difference is found."""
    pair.load(source_rows())
    pair.run_on_target("UPDATE orders SET note = 'drift' WHERE id = 50")
    path = config_of(tmp_path, *pair.urls, "database")
    path.write_text(path.read_text().replace("recheck_lag_s: 0", "recheck_lag_s: 1"))
    stop = threading.Event()
    with (
        contextlib.closing(pair.mariadb.connect(pair.source_db)) as source,
        contextlib.closing(pair.postgres.connect(pair.target_db)) as target,
        replicating_writer(source, target, stop) as changed,
    ):
        comparison = run(spark, path)
    assert changed, "the writer ran during the comparison"
    assert found_differences({"comparisons": [comparison]}) == {("orders", "changed", ("r2", "50"))}


def test_an_interval_key_is_compared_and_reported_as_its_text(
    postgres: PostgresServer, postgres_database: Callable[[PostgresServer], str], tmp_path: Path
) -> None:
    """PostgreSQL intervals are carried as their ISO 8601 text (issue 36): the digest SQL
    selects an interval key as is, and a session of the connector reads it as that text,
    so '1 mon' and '30 days' (equal to the type's `=`) are two keys, named as the text."""
    source, target = postgres_database(postgres), postgres_database(postgres)
    rows = "('1 mon', 'a'), ('-1 year 2 days -00:00:00.5', 'b'), ('2 mons', 'c')"
    for database, changes in (
        (source, ()),
        (
            target,
            ("UPDATE k SET span = '30 days' WHERE v = 'a'", "UPDATE k SET v = 'x' WHERE v = 'c'"),
        ),
    ):
        with contextlib.closing(postgres.connect(database)) as conn:
            conn.execute("CREATE TABLE k (span interval PRIMARY KEY, v text)")
            conn.execute(f"INSERT INTO k VALUES {rows}")
            for sql in changes:
                conn.execute(sql)
    path = tmp_path / "k.yaml"
    path.write_text(f"""\
connections:
  src: {{url: "{postgres.url(source)}"}}
  dst: {{url: "{postgres.url(target)}"}}
comparisons:
  - name: k
    source: {{connection: src, table: k}}
    target: {{connection: dst, table: k}}
    engine: database
validation: {{recheck_lag_s: 0}}
""")
    lazy = LazySparkSession()
    document = validate(lazy, load_validator_config(path, environ={}))
    assert document["comparisons"][0]["error"] is None, document["comparisons"][0]["error"]
    assert found_differences(document) == {
        ("k", "missing_in_target", ("P1M",)),
        ("k", "extra_in_target", ("P30D",)),
        ("k", "changed", ("P2M",)),
    }
    assert not lazy.started
