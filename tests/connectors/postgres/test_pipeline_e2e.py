"""End to end: a workload writes PostgreSQL while the CDC pipeline loads the table from the
slot's exported snapshot and streams it into the lake; the validator then compares source
and lake at an agreed LSN with zero differences while both keep running, and finds drift
injected behind the pipeline's back exactly."""

from __future__ import annotations

import contextlib
import decimal
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from cdc_core.capture.filters import TableFilter
from cdc_core.lake.layout import (
    LakeTable,
    high_water_mark,
)
from cdc_core.pipeline.loop import Pipeline, PipelineConfig
from connectors.registry import connector_for, log_source_for
from tests.connectors.postgres.helpers import PgCase
from validator.config import load_validator_config
from validator.demo.drift import change_mirror
from validator.demo.setup import found_differences
from validator.job import validate

pytestmark = [pytest.mark.integration, pytest.mark.postgres, pytest.mark.spark]

TABLE = "public.t"


class Workload:
    """Random transactions on ``t``: small ones, large streamed ones, rollbacks, savepoints."""

    def __init__(self, case: PgCase, seed: int) -> None:
        self.connection = psycopg.connect(case.server.dsn(case.database))
        self.rng = random.Random(seed)
        self.next_id = 1
        self.transactions = 0

    def insert(self, count: int) -> None:
        first, self.next_id = self.next_id, self.next_id + count
        self.connection.execute(
            "INSERT INTO t SELECT g, 'n' || g, g / 7.0, now(), jsonb_build_object('g', g),"
            " CASE WHEN g %% 50 = 0 THEN (SELECT string_agg(md5(i::text), '')"
            " FROM generate_series(1, 100) AS i) END"
            " FROM generate_series(%s::bigint, %s::bigint) AS g",
            (first, self.next_id - 1),
        )

    def transaction(self) -> None:
        kinds = ["small"] * 5 + ["large", "rollback", "savepoint"]
        kind = self.rng.choice(kinds)
        key = self.rng.randrange(1, self.next_id)
        if kind == "large":
            self.insert(600)  # larger than logical_decoding_work_mem: streamed
        else:
            self.connection.execute(
                "UPDATE t SET amount = amount + 1, name = 'u' WHERE id = %s", (key,)
            )
            self.connection.execute("DELETE FROM t WHERE id = %s", (key + 1,))
            self.insert(3)
        if kind == "savepoint":
            self.connection.execute("SAVEPOINT s")
            self.insert(200)
            self.connection.execute("ROLLBACK TO SAVEPOINT s")
        if kind == "rollback":
            self.connection.rollback()
        else:
            self.connection.commit()
        self.transactions += 1

    def close(self) -> None:
        self.connection.close()


@contextlib.contextmanager
def running(target: Any, name: str) -> Iterator[list[BaseException]]:
    """Run ``target`` in a thread for the block; errors it raised are in the list."""
    errors: list[BaseException] = []

    def guarded() -> None:
        try:
            target()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=guarded, name=name, daemon=True)
    thread.start()
    try:
        yield errors
    finally:
        thread.join(timeout=120)
        assert not thread.is_alive(), f"{name} did not stop"


def _config(case: PgCase, lake: Path, path: Path, table: str = "t") -> Path:
    path.write_text(f"""\
connections:
  src: {{url: "{case.server.url(case.database)}"}}
  lake: {{lake: "{lake}"}}
comparisons:
  - name: {table}
    source: {{connection: src, table: {table}}}
    target: {{connection: lake, table: public.{table}}}
validation: {{lake_wait_timeout_s: 120}}
""")
    return path


def _wait_until(condition: Any, what: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.2)


def test_workload_pipeline_lake_validation(case: PgCase, tmp_path: Path, spark: Any) -> None:
    case.sql(
        "CREATE TABLE t (id bigint PRIMARY KEY, name text, amount numeric(12,2),"
        " updated timestamptz, doc jsonb, big text)"
    )
    workload = Workload(case, seed=9)
    workload.insert(2000)
    workload.connection.commit()
    url = case.server.url(case.database) + "?idle_s=0.2&decoding_work_mem=64kB"
    source = log_source_for(url, None, [TABLE])
    lake = tmp_path / "lake"
    config = PipelineConfig("pg-e2e", lake, tmp_path / "state", TableFilter.of_tables([TABLE]))
    pipeline = Pipeline(config, source.reader, source.snapshots)
    stop_writing = threading.Event()

    def write() -> None:
        while not stop_writing.is_set() and workload.transactions < 1000:
            workload.transaction()
            time.sleep(0.1)  # a steady writer the pipeline keeps up with

    lake_table = LakeTable(lake, TABLE)
    validator_config = load_validator_config(_config(case, lake, tmp_path / "v.yaml"), environ={})
    with running(pipeline.run, "pipeline") as pipeline_errors:
        with running(write, "workload") as workload_errors:
            # The initial load runs while the workload writes; validate while both run.
            _wait_until(lambda: high_water_mark(lake_table) is not None, "the table is loaded")
            before = workload.transactions
            document = validate(spark, validator_config)
            during = workload.transactions - before
            stop_writing.set()
        assert not workload_errors, workload_errors
        comparison = document["comparisons"][0]
        assert comparison["error"] is None, comparison["error"]
        assert document["status"] == "in_sync", comparison["counts_by_kind"]
        assert during > 0, "the source did not change while it was validated"
        assert comparison["source_position"] is not None
        end = source.reader.end_position().value
        _wait_until(lambda: (high_water_mark(lake_table) or 0) >= end, "the lake caught up")
        # Drift behind the pipeline's back (it keeps running: the lake follows the source).
        gone, changed = _inject_drift(lake_table)
        document = validate(spark, validator_config)
        pipeline.stop()
    assert not pipeline_errors, pipeline_errors
    workload.close()
    assert found_differences(document) == {
        ("t", "missing_in_target", (str(gone),)),
        ("t", "changed", (str(changed),)),
        ("t", "extra_in_target", ("999999",)),
    }


def _inject_drift(table: LakeTable) -> tuple[int, int]:
    """Delete one row, change another and add row 999999 in the lake's mirror, as another
    writer would (``change_mirror``); returns the deleted and changed keys."""
    latest = _mirror_rows(table)
    gone, changed = sorted(latest)[:2]
    copied = {k: v for k, v in latest[changed].items() if not k.startswith("_")}
    drift = [
        ("d", gone, {}),
        ("u", changed, {"name": "drifted"}),
        ("c", 999_999, {**copied, "name": "drifted"}),
    ]
    change_mirror(table, "id", drift)
    return gone, changed


def _mirror_rows(table: LakeTable) -> dict[int, dict[str, Any]]:
    from deltalake import DeltaTable

    return {row["id"]: row for row in DeltaTable(str(table.mirror)).to_pyarrow_table().to_pylist()}


ARRAYS = "public.shapes"
_ARRAY_TABLE = """
CREATE TYPE mood AS ENUM ('sad', 'happy');
CREATE TABLE shapes (
    id bigint PRIMARY KEY, tags text[], nums numeric(10,2)[], clocks timetz[],
    times time(3)[], at timetz(3), stamps timestamptz[], docs jsonb[], moods mood[],
    big bigint[]
);
ALTER TABLE shapes ALTER COLUMN big SET STORAGE EXTERNAL; -- TOASTed out of line
"""
_ARRAY_ROWS = """
INSERT INTO shapes
SELECT g, ARRAY['a' || g, NULL, ''], ARRAY[g / 100.0, NULL]::numeric(10,2)[],
       ARRAY[('12:' || lpad((g %% 60)::text, 2, '0') || ':00.5+05:30')::timetz,
             '23:59:59.999999-15:59'],
       ARRAY['10:00:00.001', NULL, '24:00:00']::time(3)[],
       ('10:00:00.123+0' || (g %% 10))::timetz(3),
       ARRAY['2024-01-01 00:00+02', NULL]::timestamptz[],
       ARRAY[jsonb_build_object('g', g, 'x', 1.50)], ARRAY['happy', 'sad']::mood[],
       CASE WHEN g %% 50 = 0 THEN (SELECT array_agg(i) FROM generate_series(1, 2000) AS i) END
  FROM generate_series(%s::bigint, %s::bigint) AS g
"""


def test_arrays_and_timetz_through_the_lake(case: PgCase, tmp_path: Path, spark: Any) -> None:
    """Arrays and timetz columns: initial load, streamed and small transactions (an update
    that leaves a TOASTed array unchanged included) into the lake, validated with zero
    differences; then one-unit changes of an element and of an offset are found exactly."""
    case.sql(_ARRAY_TABLE)
    case.connection.execute(_ARRAY_ROWS, (1, 120))
    url = case.server.url(case.database) + "?idle_s=0.2&decoding_work_mem=64kB"
    source = log_source_for(url, None, [ARRAYS])
    lake = tmp_path / "lake"
    config = PipelineConfig("pg-arrays", lake, tmp_path / "state", TableFilter.of_tables([ARRAYS]))
    pipeline = Pipeline(config, source.reader, source.snapshots)
    lake_table = LakeTable(lake, ARRAYS)
    validator_config = load_validator_config(
        _config(case, lake, tmp_path / "v.yaml", "shapes"), environ={}
    )
    with running(pipeline.run, "pipeline") as pipeline_errors:
        _wait_until(lambda: high_water_mark(lake_table) is not None, "the table is loaded")
        with psycopg.connect(case.server.dsn(case.database)) as big:
            big.execute(_ARRAY_ROWS, (1000, 1599))  # larger than 64kB: streamed
        case.sql(
            "UPDATE shapes SET nums[1] = nums[1] + 1, at = at + interval '1 second',"
            " tags = array_append(tags, 'more') WHERE id % 7 = 0 OR id IN (50, 1050)",
            "DELETE FROM shapes WHERE id % 11 = 0",
        )
        end = source.reader.end_position().value
        _wait_until(lambda: (high_water_mark(lake_table) or 0) >= end, "the lake caught up")
        document = validate(spark, validator_config)
        comparison = document["comparisons"][0]
        assert comparison["error"] is None, comparison["error"]
        assert document["status"] == "in_sync", comparison["counts_by_kind"]
        assert comparison["schema_differences"] == []  # every column compared
        drifted = _inject_element_drift(lake_table)
        drift_document = validate(spark, validator_config)
        pipeline.stop()
    assert not pipeline_errors, pipeline_errors
    assert found_differences(drift_document) == {
        ("shapes", "changed", (str(key),)) for key in drifted
    }


def _inject_element_drift(table: LakeTable) -> list[int]:
    """Change one unit in three rows of the lake's mirror: a decimal element, a time zone
    offset (one second) and a timetz element's clock (one microsecond); returns their keys."""
    latest = _mirror_rows(table)
    first, second, third = sorted(latest)[3:6]
    nums = latest[first]["nums"]
    at = latest[second]["at"]
    clocks = latest[third]["clocks"]
    drift: list[tuple[str, Any, dict[str, Any]]] = [
        ("u", first, {"nums": [nums[0] + decimal.Decimal("0.01"), *nums[1:]]}),
        ("u", second, {"at": {**at, "offset_seconds": at["offset_seconds"] + 1}}),
        ("u", third, {"clocks": [{**clocks[0], "micros": clocks[0]["micros"] + 1}, clocks[1]]}),
    ]
    change_mirror(table, "id", drift)
    return [first, second, third]


INTERVALS = "public.spans"
_INTERVAL_TABLE = (
    "CREATE TABLE spans (id bigint PRIMARY KEY, span interval,"
    " short interval day to second(3), spans interval[])"
)
# Months, days and microseconds of mixed signs; a typmod that rounds; arrays with NULLs.
_INTERVAL_ROWS = """
INSERT INTO spans
SELECT g,
       make_interval(months => (g %% 13 - 6)::int, days => (g %% 40 - 20)::int)
           + (g * 7919 - 400000) * interval '1 microsecond',
       make_interval(days => (g %% 5)::int) + g * interval '1.5 ms',
       ARRAY[make_interval(months => (g %% 3 - 1)::int), NULL, g * interval '30 days']
  FROM generate_series(%s::bigint, %s::bigint) AS g
"""


def _interval_config(case: PgCase, lake: Path, path: Path) -> Path:
    """The Spark engine's comparison, and the local engine's (the source hashed by
    PostgreSQL's digest SQL, the lake by DuckDB; arrays have no SQL form there)."""
    path.write_text(f"""\
connections:
  src: {{url: "{case.server.url(case.database)}"}}
  lake: {{lake: "{lake}"}}
comparisons:
  - name: spans
    source: {{connection: src, table: spans}}
    target: {{connection: lake, table: {INTERVALS}}}
  - name: spans_local
    source: {{connection: src, table: spans}}
    target: {{connection: lake, table: {INTERVALS}}}
    columns: {{exclude: [spans]}}
    engine: local
validation: {{lake_wait_timeout_s: 120}}
""")
    return path


def _interval_texts(case: PgCase, sql: str) -> dict[int, str]:
    """id -> an interval's text, as a session of the connector reads it (``SESSION_OPTIONS``)."""
    connector = connector_for(case.server.url(case.database))
    with connector.connect() as connection:
        return {int(row[0]): row[1] for row in connection.execute(sql).fetchall()}


def test_intervals_through_the_lake(case: PgCase, tmp_path: Path, spark: Any) -> None:
    """Intervals (issue 36): initial load, streamed and small transactions into the lake as
    their ISO 8601 text, validated with zero differences by the Spark and the local engine;
    an update to a value PostgreSQL's `=` holds equal ('1 mon' for '30 days') is carried,
    and the same change made behind the pipeline's back is found by both."""
    case.sql(_INTERVAL_TABLE)
    case.connection.execute(_INTERVAL_ROWS, (1, 120))
    url = case.server.url(case.database) + "?idle_s=0.2&decoding_work_mem=64kB"
    source = log_source_for(url, None, [INTERVALS])
    lake = tmp_path / "lake"
    filters = TableFilter.of_tables([INTERVALS])
    pipeline = Pipeline(
        PipelineConfig("pg-spans", lake, tmp_path / "state", filters),
        source.reader,
        source.snapshots,
    )
    lake_table = LakeTable(lake, INTERVALS)
    config = _interval_config(case, lake, tmp_path / "v.yaml")
    validator_config = load_validator_config(config, environ={})
    with running(pipeline.run, "pipeline") as pipeline_errors:
        _wait_until(lambda: high_water_mark(lake_table) is not None, "the table is loaded")
        with psycopg.connect(case.server.dsn(case.database)) as big:
            big.execute(_INTERVAL_ROWS, (1000, 1599))  # larger than 64kB: streamed
        case.sql(
            "UPDATE spans SET span = span + interval '1 mon' - interval '30 days'"
            " WHERE id % 7 = 0",  # equal by `=`, another value
            "UPDATE spans SET span = -span, spans = array_append(spans, interval '-1 year 1 day')"
            " WHERE id % 5 = 0 OR id = 1050",
            "UPDATE spans SET short = short + interval '0.001 s' WHERE id IN (3, 1003)",
            "DELETE FROM spans WHERE id % 11 = 0",
        )
        end = source.reader.end_position().value
        _wait_until(lambda: (high_water_mark(lake_table) or 0) >= end, "the lake caught up")
        document = validate(spark, validator_config)
        for comparison in document["comparisons"]:
            assert comparison["error"] is None, comparison["error"]
            assert comparison["schema_differences"] == [], comparison["name"]
            assert comparison["source_rows"] == comparison["target_rows"] > 600
        assert document["status"] == "in_sync", document["comparisons"]
        source_texts = _interval_texts(case, "SELECT id, span::text FROM spans")
        lake_rows = _mirror_rows(lake_table)
        assert {key: row["span"] for key, row in lake_rows.items()} == source_texts
        assert source_texts[7] == "P2M-43DT-0.344567S"  # months, days, time apart
        key = sorted(lake_rows)[3]
        drifted = _interval_texts(
            case,
            "SELECT id, (span - interval '1 mon' + interval '30 days')::text FROM spans"
            f" WHERE id = {key}",
        )
        change_mirror(lake_table, "id", [("u", key, {"span": drifted[key]})])
        drift_document = validate(spark, validator_config)
        pipeline.stop()
    assert not pipeline_errors, pipeline_errors
    assert found_differences(drift_document) == {
        (name, "changed", (str(key),)) for name in ("spans", "spans_local")
    }
