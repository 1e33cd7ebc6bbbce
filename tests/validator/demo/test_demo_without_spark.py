"""``replcheck demo`` installed without ``replcheck[spark]`` (issue 38 item 4).

Each demo runs in a new process where pyspark cannot be imported (``sys.modules['pyspark']
= None``, as ``tests/connectors/test_missing_drivers.py`` hides a driver): the default demo
validates in the local engine (SQLite and the lake hashed in DuckDB) and must pass; the
DuckDB demo validates in Spark and must exit 2 naming the extra, never 1 ("differences").
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

from cdc_core.errors import ConfigError
from validator.config import load_validator_config
from validator.plan import plan_comparison

ROOT = Path(__file__).resolve().parents[3]
WITHOUT_SPARK = (
    "import sys; sys.modules['pyspark'] = None; from validator import cli;"
    " raise SystemExit(cli.run(sys.argv[1:]))"
)


def _demo_without_spark(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_SPARK, "demo", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_default_demo_needs_no_spark(tmp_path: Path) -> None:
    done = _demo_without_spark("--workdir", str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "demo: exactly the 3 injected differences were found" in done.stdout
    assert done.stdout.rstrip().endswith("demo ok")
    found = json.loads((tmp_path / "out" / "result.json").read_text())
    differences = {
        (c["name"], d["kind"], tuple(d["key"]))
        for c in found["comparisons"]
        for d in c["differences"]
    }
    assert differences == {
        ("customers", "missing_in_target", ("17",)),
        ("customers", "changed", ("99",)),
        ("orders", "extra_in_target", ("999999",)),
    }
    renamed = next(d for c in found["comparisons"] for d in c["differences"] if d["key"] == ["99"])
    assert [c["column"] for c in renamed["columns"]] == ["name"]
    after = json.loads((tmp_path / "after" / "result.json").read_text())
    assert after["status"] == "in_sync"
    assert [c["target_rows"] for c in after["comparisons"]] == [1002, 5400]
    assert {c["engine"] for c in found["comparisons"] + after["comparisons"]} == {"local"}


def test_the_spark_demo_without_spark_exits_2_naming_the_extra(tmp_path: Path) -> None:
    done = _demo_without_spark("--source", "duckdb", "--workdir", str(tmp_path))
    assert done.returncode == 2, done.stdout + done.stderr[-3000:]
    assert "pip install 'replcheck[spark]'" in done.stderr
    assert "demo FAILED: missed" not in done.stdout + done.stderr
    assert not (tmp_path / "shop.duckdb").exists()  # refused before building anything


def _sqlite_to_lake(work: Path, engine: str, own: str = "") -> Path:
    """A SQLite table and a (not yet written) lake copy, with ``validation.engine``."""
    with closing(sqlite3.connect(work / "src.db")) as connection, connection:
        connection.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    config = work / "c.yaml"
    config.write_text(
        "connections:\n"
        f'  src: {{url: "sqlite:///{work / "src.db"}"}}\n'
        f'  lake: {{lake: "{work / "lake"}"}}\n'
        "comparisons:\n"
        f"  - {{name: t, source: {{connection: src, table: t}},"
        f" target: {{connection: lake, table: t}}{own}}}\n"
        f"validation: {{engine: {engine}}}\n",
        encoding="utf-8",
    )
    return config


@pytest.mark.parametrize(("engine", "planned"), [("local", "local"), ("auto", "spark")])
def test_a_source_without_digests_is_read_here_only_when_local_is_asked(
    tmp_path: Path, engine: str, planned: str
) -> None:
    config = load_validator_config(_sqlite_to_lake(tmp_path, engine), environ={})
    _write_empty_lake(tmp_path)
    plan = plan_comparison(config, config.comparison("t"))
    assert (plan.engine, plan.lake_source) == (planned, None)
    if planned == "local":
        assert "its rows are read and hashed in DuckDB" in plan.engine_reason


def test_local_is_refused_where_duckdb_cannot_hash_the_source(tmp_path: Path) -> None:
    own = ", expectations: [{kind: not_null, column: v}]"  # checked on a Spark frame
    config = load_validator_config(_sqlite_to_lake(tmp_path, "local", own), environ={})
    _write_empty_lake(tmp_path)
    with pytest.raises(ConfigError, match="the local engine cannot compare it"):
        plan_comparison(config, config.comparison("t"))


def _write_empty_lake(work: Path) -> None:
    """Lake table ``t`` with no rows yet (the planner reads the lake's schema)."""
    import pyarrow as pa

    from cdc_core.lake.layout import LakeTable, append_changelog, meta_fields

    schema = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string()), *meta_fields()])
    append_changelog(LakeTable(work / "lake", "t"), schema.empty_table(), 1, "test:1", "test")
