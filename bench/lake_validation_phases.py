"""Where the seconds of a validation against the lake go, in one cold process.

Run by ``bench.bench_lake_validation`` (a fresh process, so the JVM starts cold) with the
config it wrote; prints one JSON object, step -> seconds, in the order taken:

    python -m bench.lake_validation_phases CONFIG

The steps: importing pyspark; starting the JVM and the session; Spark's first job; the
Delta work of the lake read (the histories that prove a mirror version, the changelog's
file listing); reading the lake's state into Spark (one count); then ``validate`` twice in
the same session: the first run's phases, and the whole of a second (warm) run.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class Clock:
    """Wall seconds of named steps, in the order taken."""

    def __init__(self) -> None:
        self.steps: dict[str, float] = {}

    @contextmanager
    def __call__(self, step: str) -> Iterator[None]:
        began = time.perf_counter()
        yield
        self.steps[step] = round(time.perf_counter() - began, 3)


def main(argv: list[str]) -> int:
    clock = Clock()
    with clock("import pyspark"):
        import pyspark.sql  # noqa: F401

    from cdc_core.lake.layout import LakeTable, changelog_files, high_water_mark
    from cdc_core.lake.mirror_state import mirror_version_at
    from validator.config import load_validator_config
    from validator.engines.sides.spark.lake_target import lake_state_at
    from validator.engines.sides.spark.session import build_spark_session
    from validator.job import validate

    config = load_validator_config(Path(argv[0]))
    comparison = config.comparisons[0]
    lake = config.connections[comparison.target.connection].lake
    assert lake is not None
    table = LakeTable(lake, comparison.target.table)
    with clock("JVM start + Spark session"):
        spark = build_spark_session()
    with clock("first Spark job (range count)"):
        spark.range(1).count()
    with clock("Delta: histories proving the mirror version"):
        mirror = mirror_version_at(table, high_water_mark(table))
    with clock("Delta: changelog file listing"):
        changelog_files(table)
    with clock(f"lake state into Spark, one count ({'mirror' if mirror else 'replay'})"):
        lake_state_at(spark, table, ("id",), high_water_mark(table)).count()
    for run in ("first run", "second run, same session"):
        with clock(f"{run}: validate, whole"):
            document = validate(spark, config)
        for phase, seconds in document["comparisons"][0]["timings"].items():
            clock.steps[f"{run}: phase {phase}"] = seconds
    print(json.dumps(clock.steps))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
