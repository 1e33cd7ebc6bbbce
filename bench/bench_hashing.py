"""Rows per second of pure-Python and Spark-native hashing of a 6-column table.

Both engines hash the same generated rows (Python builds them in a loop, Spark with
``spark.range`` expressions) into leaf digests, and the digests must be equal: a benchmark
that measured two different computations would be worthless.

    python -m bench.bench_hashing [--rows 1000000] [--depth 8]
"""

from __future__ import annotations

import argparse
import datetime as dt
import decimal
import os
import platform
import time
from collections.abc import Iterator

from merkle.layout import RowLayout
from merkle.tree import leaf_digests_of_rows
from merkle.types import (
    BooleanType,
    DecimalType,
    FloatType,
    IntegerType,
    StringType,
    TimestampTzType,
)

LAYOUT = RowLayout.of(
    [
        ("id", IntegerType()),
        ("name", StringType()),
        ("amount", DecimalType(12, 2)),
        ("ratio", FloatType(64)),
        ("created", TimestampTzType()),
        ("active", BooleanType()),
    ],
    key=["id"],
)
BASE_MICROS = 1_600_000_000_000_000
CENT = decimal.Decimal("0.01")
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def python_rows(count: int) -> Iterator[tuple[object, ...]]:
    """The benchmark table, as a database driver would return it."""
    for i in range(count):
        created = EPOCH + dt.timedelta(microseconds=BASE_MICROS + i * 1_000_003)
        amount = decimal.Decimal(i % 100_000) * CENT
        yield (i, f"customer-{i}", amount, i / 7.0, created, i % 3 == 0)


def spark_frame(spark: object, count: int) -> object:
    """The same table, generated inside Spark."""
    from pyspark.sql import functions as F

    ids = spark.range(count)  # type: ignore[attr-defined]
    micros = F.lit(BASE_MICROS) + F.col("id") * F.lit(1_000_003)
    return ids.select(
        F.col("id"),
        F.concat(F.lit("customer-"), F.col("id").cast("string")).alias("name"),
        ((F.col("id") % 100_000).cast("decimal(12,0)") / 100).cast("decimal(12,2)").alias("amount"),
        (F.col("id").cast("double") / F.lit(7.0)).alias("ratio"),
        F.timestamp_micros(micros).alias("created"),
        (F.col("id") % 3 == 0).alias("active"),
    )


def bench_python(rows: int, depth: int) -> tuple[float, dict[int, object]]:
    start = time.perf_counter()
    digests = leaf_digests_of_rows(python_rows(rows), LAYOUT, depth)
    return time.perf_counter() - start, dict(digests)


def bench_spark(rows: int, depth: int) -> tuple[float, float, dict[int, object]]:
    from merkle.spark import leaf_digests
    from validator.engines.sides.spark.session import build_spark_session

    start = time.perf_counter()
    spark = build_spark_session(app_name="replcheck-bench")
    spark.range(1).count()  # JVM and first-job warm-up, reported separately
    startup = time.perf_counter() - start
    start = time.perf_counter()
    digests = leaf_digests(spark_frame(spark, rows), LAYOUT, depth)  # type: ignore[arg-type]
    return startup, time.perf_counter() - start, dict(digests)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--depth", type=int, default=8)
    args = parser.parse_args()
    py_seconds, py_digests = bench_python(args.rows, args.depth)
    startup, spark_seconds, spark_digests = bench_spark(args.rows, args.depth)
    if py_digests != spark_digests:
        raise SystemExit("FAIL: Spark and Python leaf digests differ")
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    print(f"rows: {args.rows:,} x 6 columns, depth {args.depth}, digests equal: yes")
    print(f"python: {py_seconds:8.2f} s  {args.rows / py_seconds:12,.0f} rows/s")
    print(
        f"spark:  {spark_seconds:8.2f} s  {args.rows / spark_seconds:12,.0f} rows/s"
        f"  (plus {startup:.1f} s session start-up, local[2])"
    )


if __name__ == "__main__":
    main()
