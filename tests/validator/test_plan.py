"""One plan per comparison, built once: the config is read once per command, and an engine
gets the plan (sides, layout, settings, engine choice), never the whole config."""

from __future__ import annotations

import inspect
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from cdc_core.errors import ConfigError
from tests.validator.resync.helpers import write_config
from validator import cli
from validator.config import load_validator_config
from validator.engines.database.engine import DatabaseEngine
from validator.engines.hybrid.engine import HybridEngine
from validator.engines.lake_flow import compare_with_lake
from validator.engines.local.engine import LocalEngine
from validator.engines.spark import engine as spark_engine
from validator.plan import ComparisonPlan, plan_comparison


def _config(tmp_path: Path, extra: str = "") -> Path:
    for name in ("src", "tgt"):
        with closing(sqlite3.connect(tmp_path / f"{name}.db")) as conn, conn:
            conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    return write_config(
        tmp_path / "c.yaml",
        {"src": f"sqlite:///{tmp_path / 'src.db'}", "tgt": f"sqlite:///{tmp_path / 'tgt.db'}"},
        "  - {name: t, source: {connection: src, table: t}, target: {connection: tgt, table: t}}",
        "validation: {lake_wait_timeout_s: 7, database_parallelism: 3}" + extra,
    )


def test_the_plan_carries_what_the_engines_need(tmp_path: Path) -> None:
    config = load_validator_config(_config(tmp_path), environ={})
    plan = plan_comparison(config, config.comparison("t"))
    assert plan.databases is plan.lake_source is None  # SQLite computes no digests: Spark
    assert plan.settings.lake_wait_timeout_s == 7 and plan.parallelism == 3
    assert plan.reflected.reconciled.layout.key == ("id",)


def test_engines_take_a_plan_not_the_config() -> None:
    engines = (DatabaseEngine, spark_engine.SparkEngine, HybridEngine, LocalEngine)
    for engine in engines:
        assert list(inspect.signature(engine.__call__).parameters) == ["self", "plan"]
    for function in (spark_engine.compare_in_spark, spark_engine.target_side, compare_with_lake):
        hints = inspect.signature(function).parameters
        assert "config" not in hints and hints["plan"].annotation in (
            ComparisonPlan,
            "ComparisonPlan",
        )


def test_insisting_on_the_database_engine_where_it_cannot_run_is_an_error(tmp_path: Path) -> None:
    config = load_validator_config(_config(tmp_path, "\nspark: {master: 'local[1]'}"), environ={})
    comparison = config.comparison("t")
    forced = type(comparison)(**{**_fields(comparison), "engine": "database"})
    with pytest.raises(ConfigError, match="database engine cannot compare it"):
        plan_comparison(config, forced)


def test_a_command_reads_its_config_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import validator.config as config_module

    calls: list[Path] = []
    load = config_module.load_validator_config

    def counted(path: Path, *args: Any, **kwargs: Any) -> Any:
        calls.append(path)
        return load(path, *args, **kwargs)

    monkeypatch.setattr(config_module, "load_validator_config", counted)
    config = _config(tmp_path)
    config.write_text(config.read_text().replace("table: t}, target", "table: gone}, target"))
    # The source table is missing: the run ends in an error result without starting Spark.
    assert cli.run(["validate", "-c", str(config), "--out", str(tmp_path / "o")]) == 2
    assert len(calls) == 1


def _fields(comparison: object) -> dict[str, object]:
    return {name: getattr(comparison, name) for name in comparison.__dataclass_fields__}  # type: ignore[attr-defined]
