"""What a Great Expectations suite costs a validation, and what its import costs a run.

1. ``import great_expectations`` in fresh interpreters (the cost runs without a suite skip,
   because ``validator.expectations`` imports GX only when a suite exists).
2. One DuckDB source table and its lake copy (in sync), validated in one Spark session
   without a suite, then twice with a seven-kind suite (the first run pays the GX import):
   the run's time and the ``expectations`` phase. The suite must pass (a benchmark of a
   failing run would measure the failure).

    python -m bench.bench_expectations [--rows 100000] [--imports 3]
"""

from __future__ import annotations

import argparse
import datetime as dt
import decimal
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SUITE = """\
    expectations:
      - {kind: key_not_null_unique}
      - {kind: not_null, column: sku}
      - {kind: unique, column: sku}
      - {kind: between, column: price, min: 0, max: 1000000}
      - {kind: in_set, column: status, values: [new, paid, shipped]}
      - {kind: regex, column: email, pattern: '^user[0-9]+@example[.]com$'}
      - {kind: row_count, tolerance: 0.1%}
"""
IMPORT_TIMER = (
    "import time; t = time.perf_counter(); import great_expectations; "
    "print(time.perf_counter() - t)"
)


def import_seconds(times: int) -> list[float]:
    """Wall time of ``import great_expectations`` in ``times`` fresh interpreters."""
    env = {**os.environ, "GX_ANALYTICS_ENABLED": "false"}
    runs = [
        subprocess.run(
            [sys.executable, "-c", IMPORT_TIMER],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        for _ in range(times)
    ]
    return [float(run.stdout.strip()) for run in runs]


def build(workdir: Path, rows: int) -> tuple[Path, Path]:
    """A DuckDB ``items`` table and its lake copy; config files without and with a suite."""
    import duckdb
    import pyarrow as pa

    from cdc_core.lake.layout import LakeTable, append_changelog, meta_fields
    from cdc_core.names import COMMIT_POS, COMMIT_TS, OP, SEQ, TXID

    table = pa.table(
        {
            "id": pa.array(range(1, rows + 1), pa.int32()),
            "sku": [f"SKU-{i:08d}" for i in range(1, rows + 1)],
            "price": pa.array(
                [decimal.Decimal(i % 100_000) / 4 for i in range(rows)], pa.decimal128(10, 2)
            ),
            "status": [("new", "paid", "shipped")[i % 3] for i in range(rows)],
            "email": [f"user{i}@example.com" for i in range(rows)],
        }
    )
    source = workdir / "shop.duckdb"
    with duckdb.connect(str(source)) as connection:
        connection.execute(
            "CREATE TABLE items (id INTEGER PRIMARY KEY, sku VARCHAR, price DECIMAL(10,2),"
            " status VARCHAR, email VARCHAR)"
        )
        connection.register("incoming", table)
        connection.execute("INSERT INTO items SELECT * FROM incoming")
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    meta = {OP: "r", COMMIT_POS: 1, TXID: "1", COMMIT_TS: now}
    events = table
    for field in meta_fields():  # one snapshot commit at position 1
        values = list(range(rows)) if field.name == SEQ else [meta[field.name]] * rows
        events = events.append_column(field, pa.array(values, field.type))
    append_changelog(LakeTable(workdir / "lake", "shop.items"), events, 1, "1", "bench")
    text = f"""\
connections:
  src: {{url: "duckdb:///{source}"}}
  lake: {{lake: "{workdir / "lake"}"}}
comparisons:
  - name: items
    source: {{connection: src, table: items}}
    target: {{connection: lake, table: shop.items}}
    columns: {{sensitive: [email]}}
"""
    plain, suited = workdir / "plain.yaml", workdir / "suited.yaml"
    plain.write_text(text, encoding="utf-8")
    suited.write_text(text + SUITE, encoding="utf-8")
    return plain, suited


def timed_run(spark: Any, config: Path) -> tuple[float, dict[str, Any]]:
    from validator.config import load_validator_config
    from validator.job import validate

    started = time.perf_counter()
    document = validate(spark, load_validator_config(config, environ={}))
    return time.perf_counter() - started, document["comparisons"][0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--imports", type=int, default=3)
    args = parser.parse_args()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    imports = import_seconds(args.imports)
    print(f"import great_expectations: median {statistics.median(imports):.2f} s of {imports}")
    from validator.engines.sides.spark.session import build_spark_session

    spark = build_spark_session(app_name="bench-expectations")
    with tempfile.TemporaryDirectory() as workdir:
        plain, suited = build(Path(workdir), args.rows)
        timed_run(spark, plain)  # warm-up: JIT, first jobs
        runs = (
            ("without a suite", plain),
            ("with the suite, first (imports GX)", suited),
            ("with the suite, again", suited),
        )
        for label, config in runs:
            seconds, comparison = timed_run(spark, config)
            checked = comparison["expectations"]
            failed = sum(1 for e in checked if not e["success"])
            if comparison["status"] != "in_sync" or failed:
                raise SystemExit(f"{label}: not in sync or {failed} expectations failed")
            phase = comparison["timings"].get("expectations")
            detail = f", expectations phase {phase:.2f} s ({len(checked)} checked)" if phase else ""
            print(f"{args.rows:,} rows {label}: {seconds:.2f} s{detail}")
    spark.stop()


if __name__ == "__main__":
    main()
