"""A true verdict (issue 34): every comparison's terminal line says what was checked (a full
run, or the leaves an incremental run re-hashed) and which engine checked it and why; the
plan names its engine and the reason once, and the result keeps both; a run asked to be
incremental whose engine keeps no state says it was full, and why; every package's progress
reaches the terminal. No server and no Spark: the engines' own runs are in
``test_engine_progress.py``."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from reports.json_schema import validate_result
from tests.reports.sample import wrap
from tests.validator.resync.helpers import write_config
from validator import cli
from validator.commands.package import PACKAGES
from validator.config import load_validator_config
from validator.incremental.guarantee import full_coverage, incremental_coverage
from validator.job import _as_planned
from validator.plan import ComparisonPlan, plan_comparison
from validator.result import ComparisonResult, Coverage, Status, to_dict

CHANGED: dict[str, Any] = {"differences_total": 1, "counts_by_kind": {"changed": 1}}
LOCAL_REASON = "auto: the source database computes its digests, DuckDB hashes every compared"


def _result(status: Status = Status.IN_SYNC, **fields: Any) -> ComparisonResult:
    return ComparisonResult(
        name="orders", status=status, source="src:orders", target="lake:orders", **fields
    )


def _summary(capsys: pytest.CaptureFixture[str], *results: ComparisonResult) -> list[str]:
    """The terminal lines ``validate`` prints for ``results`` (their schema checked first)."""
    document = {**wrap([to_dict(r) for r in results]), "mask_key_id": "***#0123456789abcdef"}
    validate_result(document)
    cli._print_summary(document)
    return capsys.readouterr().out.splitlines()


def test_an_incremental_line_says_how_many_leaves_were_rehashed_and_when_all_are_swept(
    capsys: pytest.CaptureFixture[str],
) -> None:
    coverage = incremental_coverage(("p0", "p1"), 3, 4, 9, (4, 2))
    reason = f"{LOCAL_REASON} column of the lake exactly"
    line, overall = _summary(
        capsys, _result(engine="local", engine_reason=reason, coverage=coverage)
    )
    assert line.startswith("orders ") and " in_sync " in line
    assert line.endswith(
        "no differences; 7 of 16 leaves re-hashed; every leaf swept within 2 more incremental"
        f" runs; engine local ({reason})"
    )
    assert overall.startswith("overall: in_sync")
    ended = incremental_coverage(("p0", "p1"), 0, 4, 12, (4, 0))
    assert ended.summary() == "4 of 16 leaves re-hashed; this run completed a sweep of every leaf"


def test_a_full_line_says_so_and_why_incremental_did_not_apply(
    capsys: pytest.CaptureFixture[str],
) -> None:
    first = full_coverage("p1", 16, "first run: no validation state stored at /lake/x.arrow")
    why = "validation.engine is spark"
    refused = Coverage(
        mode="full",
        reason=f"incremental runs need a lake target and the local or hybrid engine; engine"
        f" spark was chosen because {why}",
    )
    lines = _summary(
        capsys,
        _result(engine="hybrid", engine_reason="validation.engine is hybrid", coverage=first),
        _result(Status.DIFFERENCES, engine_reason=why, coverage=refused, **CHANGED),
    )
    assert lines[0].endswith(
        "; full run (first run: no validation state stored at /lake/x.arrow);"
        " engine hybrid (validation.engine is hybrid)"
    )
    # The coverage says why the engine was chosen: the line does not say it twice.
    assert lines[1].endswith(f"changed: 1; full run ({refused.reason}); engine spark")


def test_a_line_without_coverage_is_a_full_run_and_an_error_line_claims_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    reason = "auto: both databases compute their own digests"
    full, failed = _summary(
        capsys,
        _result(engine="database", engine_reason=reason),
        _result(Status.ERROR, error="source table orders does not exist"),
    )[:2]
    assert full.endswith(f"no differences; full run; engine database ({reason})")
    assert failed.endswith("source table orders does not exist")


def _sqlite_plan(work: Path, validation: str, own: str = "") -> ComparisonPlan:
    """SQLite on both sides: no database computes digests, so Spark compares (``own``: the
    comparison's own settings)."""
    work.mkdir(exist_ok=True)
    for name in ("src", "tgt"):
        with closing(sqlite3.connect(work / f"{name}.db")) as conn, conn:
            conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    path = write_config(
        work / "c.yaml",
        {"src": f"sqlite:///{work / 'src.db'}", "tgt": f"sqlite:///{work / 'tgt.db'}"},
        "  - {name: t, source: {connection: src, table: t},"
        f" target: {{connection: tgt, table: t}}{own}}}",
        f"validation: {{{validation}}}",
    )
    config = load_validator_config(path, environ={})
    return plan_comparison(config, config.comparison("t"))


def test_the_plan_names_its_engine_and_why_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="validator.plan")
    plan = _sqlite_plan(tmp_path, "engine: auto")
    assert plan.engine == "spark" and not plan.local
    assert plan.engine_reason.startswith("auto: the databases cannot compute the digests (")
    assert "this server cannot compute leaf digests" in plan.engine_reason
    said = [r.getMessage() for r in caplog.records if r.name == "validator.plan"]
    assert said == [f"comparison t: spark engine: {plan.engine_reason}"]
    assert plan.not_incremental is None  # not asked to be incremental
    own = _sqlite_plan(tmp_path / "own", "engine: auto", ", engine: spark")
    assert own.engine == "spark" and own.engine_reason == "comparison t sets engine: spark"


def test_a_spark_run_asked_to_be_incremental_is_full_and_says_why(tmp_path: Path) -> None:
    plan = _sqlite_plan(tmp_path, "engine: spark, incremental: true")
    assert plan.engine_reason == "validation.engine is spark"
    result = _as_planned(_result(leaves_compared=16, source_position="p1"), plan)
    assert result.engine_reason == "validation.engine is spark"
    coverage = result.coverage
    assert coverage is not None and coverage.mode == "full"
    assert coverage.reason == (
        "incremental runs need a lake target and the local or hybrid engine; engine spark"
        " was chosen because validation.engine is spark"
    )
    assert coverage.to_position == "p1" and coverage.leaves_swept == 16
    validate_result(wrap([to_dict(result)]))
    # A run that was not asked to keep state keeps its coverage empty.
    asked_nothing = _as_planned(_result(), _sqlite_plan(tmp_path / "n", "engine: spark"))
    assert asked_nothing.coverage is None


@pytest.fixture
def logging_restored() -> Iterator[None]:
    """The CLI's handler removed again, the root's and the packages' levels as they were:
    the CLI's logging set-up is process-wide (pytest's own handlers are left to pytest)."""
    root = logging.getLogger()
    levels = {name: logging.getLogger(name).level for name in ("", *PACKAGES)}
    yield
    for handler in [h for h in root.handlers if isinstance(h, cli._StandardError)]:
        root.removeHandler(handler)
    for name, before in levels.items():
        logging.getLogger(name).setLevel(before)


@pytest.mark.usefixtures("logging_restored")
def test_progress_of_every_package_reaches_stderr_and_other_loggers_stay_quiet(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    cli._configure_logging()
    cli._configure_logging()  # run() may be called many times in one process: one handler
    for name in ("validator.engines.progress", "validator.plan", "connectors.x", "cdc_core.x"):
        logging.getLogger(name).info("comparison t: %s", name)
    logging.getLogger("py4j.clientserver").info("Received command c on object id p0")
    logging.getLogger("validator.positions").warning("lake table t: %s", "late")
    err = capsys.readouterr().err.splitlines()
    progress = [line.split(" ", 1)[1] for line in err if "comparison t:" in line]
    assert progress == [
        "comparison t: validator.engines.progress",
        "comparison t: validator.plan",
        "comparison t: connectors.x",
        "comparison t: cdc_core.x",
    ]
    assert "Received command" not in "\n".join(err)
    assert err[-1] == "WARNING validator.positions: lake table t: late"
    # Records still propagate: a host's (here pytest's) handlers see them too.
    assert "validator.engines.progress" in caplog.text


def test_a_change_no_column_explains_is_no_verdict() -> None:
    """MariaDB YEAR 0000 hashed as '0000' by the digest SQL and read back as 0 (issue 34,
    case 3): a row whose hashes differ while every compared column reads back equal means
    the readers disagree; the comparison could not be validated, and says which key."""
    from validator.job import _refuse_unexplained
    from validator.result import Changed, ColumnChange

    unexplained = _result(
        Status.DIFFERENCES, differences=(Changed(("7",), ()),), differences_total=1
    )
    refused = _refuse_unexplained(unexplained)
    assert refused.status is Status.ERROR and refused.error is not None
    assert "['7']" in refused.error and "readers" in refused.error
    validate_result(wrap([to_dict(refused)]))
    explained = _result(
        Status.DIFFERENCES,
        differences=(Changed(("7",), (ColumnChange("y", "0", "1"),)),),
        differences_total=1,
    )
    assert _refuse_unexplained(explained) is explained
