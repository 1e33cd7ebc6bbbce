"""MariaDB compared with PostgreSQL: exactly the injected differences, nothing from types."""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.private_servers import MariaDBServer, PostgresServer
from validator.config import load_validator_config
from validator.demo.setup import found_differences
from validator.job import validate

pytestmark = [pytest.mark.integration, pytest.mark.mariadb, pytest.mark.postgres, pytest.mark.spark]

BASE = dt.datetime(2025, 3, 1, 12, 0, 0)


def rows() -> list[tuple[Any, ...]]:
    return [
        (
            i,
            f"client-{i % 17}",
            decimal.Decimal(i * 7) / 100,
            BASE + dt.timedelta(seconds=i, microseconds=(i * 1237) % 1_000_000),
            f"note {i} 😀",
            i / 3,
            i % 2,
        )
        for i in range(1, 301)
    ]


def millis(stamp: dt.datetime) -> dt.datetime:
    """What PostgreSQL's timestamp(3) stores: rounded half up to milliseconds."""
    return stamp.replace(microsecond=0) + dt.timedelta(
        microseconds=(stamp.microsecond + 500) // 1000 * 1000
    )


@pytest.fixture
def databases(
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    postgres: PostgresServer,
    postgres_database: Callable[[PostgresServer], str],
) -> tuple[str, str]:
    source_db, target_db = mariadb_database(mariadb_full), postgres_database(postgres)
    data = rows()
    with contextlib.closing(mariadb_full.connect(source_db)) as conn, conn.cursor() as cur:
        cur.execute(
            "CREATE TABLE orders (id INT PRIMARY KEY, customer VARCHAR(20), amount DECIMAL(10,2),"
            " placed DATETIME(6), note TEXT, ratio DOUBLE, flag TINYINT)"
        )
        cur.executemany("INSERT INTO orders VALUES (%s, %s, %s, %s, %s, %s, %s)", data)
    target = [r for r in data if r[0] not in (7, 250)]
    target = [(*r[:3], millis(r[3]), *r[4:]) for r in target]
    target = [(r[0], "renamed", *r[2:]) if r[0] == 42 else r for r in target]
    target = [(*r[:5], r[5] + 1e-9, r[6]) if r[0] == 43 else r for r in target]
    target.append((9000, "extra", decimal.Decimal("1.00"), BASE, "", 0.0, 0))
    with contextlib.closing(postgres.connect(target_db)) as conn:
        conn.execute(
            "CREATE TABLE orders (id int PRIMARY KEY, customer varchar(20), amount numeric(10,2),"
            " placed timestamp(3), note text, ratio double precision, flag smallint)"
        )
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO orders VALUES (%s, %s, %s, %s, %s, %s, %s)", target)
    return mariadb_full.url(source_db), postgres.url(target_db)


def test_mariadb_against_postgres_finds_exactly_the_drift(
    spark: Any, databases: tuple[str, str], tmp_path: Path
) -> None:
    source_url, target_url = databases
    config = tmp_path / "replcheck.yaml"
    config.write_text(f"""\
connections:
  shop_src: {{url: "{source_url}"}}
  shop_pg:  {{url: "{target_url}"}}
comparisons:
  - name: orders
    source: {{connection: shop_src, table: orders}}
    target: {{connection: shop_pg, table: orders}}
    options: {{timestamp_precision: 3}}
validation: {{recheck_lag_s: 1}}
""")
    document = validate(spark, load_validator_config(config, environ={}))
    assert found_differences(document) == {
        ("orders", "missing_in_target", ("7",)),
        ("orders", "missing_in_target", ("250",)),
        ("orders", "extra_in_target", ("9000",)),
        ("orders", "changed", ("42",)),
        ("orders", "changed", ("43",)),
    }
    orders = document["comparisons"][0]
    assert orders["schema_differences"] == []
    assert orders["in_flight"] == []  # static drift is confirmed by the re-check
    assert orders["source_rows"] == 300 and orders["target_rows"] == 299
    changed = {d["key"][0]: d["columns"] for d in orders["differences"] if d["kind"] == "changed"}
    assert [c["column"] for c in changed["42"]] == ["customer"]
    assert [c["column"] for c in changed["43"]] == ["ratio"]
