"""The local engine's cold and warm runs in one process, with no Spark.

Run by ``bench.bench_lake_validation`` (a fresh process) with a config whose comparison
the local engine runs; prints one JSON object, step -> seconds, in the order taken:

    python -m bench.lake_validation_local CONFIG

The steps: importing the validator and DuckDB; then ``validate`` twice in the same process
(the first pays DuckDB's and the drivers' first use, the second is warm), each whole and by
phase. A comparison that asked for Spark fails the run: the local engine never starts it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import NoReturn

from bench.lake_validation_phases import Clock


def _no_spark() -> NoReturn:
    raise RuntimeError("the local engine started Spark")


def main(argv: list[str]) -> int:
    clock = Clock()
    with clock("import validator + duckdb"):
        import duckdb  # noqa: F401

        from validator.config import load_validator_config
        from validator.job import validate

    config = load_validator_config(Path(argv[0]))
    for run in ("first run", "second run, same process"):
        with clock(f"{run}: validate, whole"):
            document = validate(_no_spark, config)
        (comparison,) = document["comparisons"]
        if comparison["engine"] != "local" or comparison["error"]:
            raise RuntimeError(f"not a local run: {comparison['engine']} {comparison['error']}")
        for phase, seconds in comparison["timings"].items():
            clock.steps[f"{run}: phase {phase}"] = seconds
    print(json.dumps(clock.steps))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
