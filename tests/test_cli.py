"""The command line: real commands, and stubs that say so and exit 2."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from merkle.golden import load_vectors


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli_env(None, *args)


def run_cli_env(env: dict[str, str] | None, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "validator.cli", *args]
    return subprocess.run(command, capture_output=True, text=True, check=False, env=env)


def test_resync_without_a_result_exits_2_naming_the_option() -> None:
    result = run_cli("resync", "--config", "replcheck.yaml")
    assert result.returncode == 2
    assert "--result" in result.stderr


def test_check_contract_passes_with_python_only() -> None:
    result = run_cli("check-contract", "--no-spark")
    assert result.returncode == 0, result.stderr
    assert f"python: {len(load_vectors())} golden vectors, ok" in result.stdout
    assert "duckdb: 483 golden vectors, ok" in result.stdout  # all but those it refuses


def test_version_prints_the_installed_version_and_exits_0() -> None:
    """Issue 38, item 6: there was no ``--version``."""
    from importlib import metadata

    result = run_cli("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"replcheck {metadata.version('replcheck')}"


def test_help_lists_the_commands() -> None:
    result = run_cli("--help")
    assert result.returncode == 0
    for command in ("validate", "gate", "demo", "resync", "report", "cdc", "check-contract"):
        assert command in result.stdout


def test_validate_with_a_broken_config_exits_2_naming_the_key(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("connections: {}\ncomparisons:\n  - name: x\n    sauce: {}\n")
    result = run_cli("validate", "--config", str(config), "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    assert "line 4" in result.stderr and "sauce" in result.stderr
    assert not (tmp_path / "out").exists()


def test_validate_and_gate_take_incremental_and_full(tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text(
        "connections: {src: {url: 'sqlite:///none.db'}, lake: {lake: lake}}\n"
        "comparisons: [{name: t, source: {connection: src, table: t},"
        " target: {connection: lake, table: t}}]\n"
        "validation: {sweep_share: 2}\n"
    )
    for command in ("validate", "gate"):
        result = run_cli(command, "--config", str(config), "--incremental", "--full")
        assert result.returncode == 2  # the flags are taken; the config's share is refused
        assert "sweep_share: must be above 0 and at most 1" in result.stderr


def test_report_renders_an_existing_result(tmp_path: Path) -> None:
    from tests.reports.sample import make_result

    result_path = tmp_path / "result.json"
    result_path.write_text(json.dumps(make_result(comparisons=2, differences=3)))
    html, junit = tmp_path / "r.html", tmp_path / "r.xml"
    result = run_cli("report", str(result_path), "--html", str(html), "--junit", str(junit))
    assert result.returncode == 0, result.stderr
    assert html.read_text().startswith("<!DOCTYPE html>")
    assert "<testsuite" in junit.read_text()
    assert run_cli("report", str(result_path)).returncode == 2


# What the JVM prints when nobody quiets it: log4j's profile and level notices, its WARN lines
# (NativeCodeLoader, deprecated SQL), and the JVM's own start-up warning.
JVM_CHATTER = re.compile(r"log4j|NativeCodeLoader|setLogLevel|\bWARN\b|deprecated|incubator")
# replcheck's own stderr lines: Python logging ("WARNING validator.reconcile: ..."), progress
# ("19:02:36 comparison orders: leaves (in Spark)", "19:02:36 lake table main.orders:
# replaying its changelog": only replcheck's handler starts a line with the time; log4j's
# start with the date) and the commands' own notes.
OWN_LINE = re.compile(
    r"(WARNING|ERROR) (cdc_core|connectors|merkle|validator|reports)[.\w]*: "
    r"|\d\d:\d\d:\d\d \S"
    r"|validating \d+ comparison"
    r"|demo source, lake and config |(source|capture|pipeline|drift): "
)


@pytest.mark.spark
def test_the_default_demo_captures_replicates_finds_the_drift_and_repairs_it(
    tmp_path: Path,
) -> None:
    """``replcheck demo`` (``make demo``): SQLite with trigger capture, the pipeline into the
    lake, three rows drifted, found exactly, re-synced, then the lake in sync."""
    result = run_cli("demo", "--workdir", str(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "demo: exactly the 3 injected differences were found" in result.stdout
    assert "capture: 20 statements installed logging tables and triggers" in result.stderr
    assert "pipeline: the workload replicated from the capture tables up to capture:" in (
        result.stderr
    )
    assert result.stdout.rstrip().endswith("demo ok")
    after = json.loads((tmp_path / "after" / "result.json").read_text())
    assert after["status"] == "in_sync"
    assert [c["target_rows"] for c in after["comparisons"]] == [1002, 5400]
    written = "".join(p.read_text(errors="replace") for p in tmp_path.rglob("*.*") if _out(p))
    assert "@example.com" not in result.stdout + result.stderr + written
    assert not JVM_CHATTER.search(result.stderr + result.stdout), result.stderr
    foreign = [line for line in result.stderr.splitlines() if not OWN_LINE.match(line)]
    assert foreign == []


def _out(path: Path) -> bool:
    """An output file of the demo (not its source database, lake or state)."""
    return path.suffix in (".json", ".html", ".xml", ".md") and "lake" not in path.parts


# About 70 s: the DuckDB demo end to end, its Spark engine in a JVM of its own, as a user
# runs it (a cold JVM is the point).
@pytest.mark.spark
def test_demo_finds_exactly_the_injected_drift(tmp_path: Path) -> None:
    result = run_cli("demo", "--source", "duckdb", "--workdir", str(tmp_path))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "demo: exactly the 13 injected differences were found" in result.stdout
    assert (tmp_path / "out" / "result.json").exists()
    assert (tmp_path / "out" / "report.html").exists()
    # customers.email is sensitive: its values (user<N>@example.com) reach no output.
    written = "".join(p.read_text(errors="replace") for p in (tmp_path / "out").rglob("*.*"))
    assert "@example.com" not in result.stdout + result.stderr + written
    # The terminal shows replcheck's lines only: nothing of the JVM's (issue 15).
    assert not JVM_CHATTER.search(result.stderr + result.stdout), result.stderr
    foreign = [line for line in result.stderr.splitlines() if not OWN_LINE.match(line)]
    assert foreign == []

    # --verbose shows the JVM's log again (one comparison of the demo's config is enough), and
    # in it no deprecation warning about replcheck's own SQL (customers has a DECIMAL column).
    config, out = str(tmp_path / "replcheck.yaml"), str(tmp_path / "verbose")
    verbose = run_cli(
        "--verbose", "validate", "-c", config, "--comparison", "customers", "--out", out
    )
    assert verbose.returncode == 1, verbose.stderr[-2000:]
    assert JVM_CHATTER.search(verbose.stderr), verbose.stderr
    assert "deprecated" not in verbose.stderr


def _mariadb_config(tmp_path: Path, url: str, comparison: str) -> Path:
    config = tmp_path / "replcheck.yaml"
    lake = tmp_path / "lake"
    config.write_text(
        "connections:\n"
        f'  src: {{url: "{url}", password: {{env: TEST_SRC_PW}}}}\n'
        f'  lake: {{lake: "{lake}"}}\n'
        "comparisons:\n" + comparison
    )
    return config


@pytest.mark.integration
@pytest.mark.mariadb
@pytest.mark.spark
def test_wrong_password_missing_table_and_missing_key_exit_2(
    tmp_path: Path, mariadb_full: Any
) -> None:
    import contextlib

    with contextlib.closing(mariadb_full.connect("test")) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE IF NOT EXISTS cli_t (id INT PRIMARY KEY, v INT)")
        cur.execute("CREATE USER IF NOT EXISTS 'cli_user'@'%' IDENTIFIED BY 'right-password'")
        cur.execute("GRANT SELECT ON test.* TO 'cli_user'@'%'")
    url = f"mysql+pymysql://cli_user@127.0.0.1:{mariadb_full.port}/test"
    comparisons = (
        "  - {name: missing_table, source: {connection: src, table: nope},"
        " target: {connection: lake, table: shop.nope}}\n"
        "  - {name: missing_key, source: {connection: src, table: cli_t},"
        " target: {connection: lake, table: shop.cli_t}, key: [customer_no]}\n"
    )
    config = _mariadb_config(tmp_path, url, comparisons)
    env_wrong = {**os.environ, "TEST_SRC_PW": "wrong-password"}
    result = run_cli_env(env_wrong, "validate", "-c", str(config), "--out", str(tmp_path / "o1"))
    assert result.returncode == 2
    assert "access denied (check user and password)" in result.stdout
    assert "wrong-password" not in result.stdout + result.stderr
    env_right = {**os.environ, "TEST_SRC_PW": "right-password"}
    result = run_cli_env(env_right, "validate", "-c", str(config), "--out", str(tmp_path / "o2"))
    assert result.returncode == 2
    assert "table 'nope' not found" in result.stdout
    assert "key columns ['customer_no'] do not exist" in result.stdout
    assert json.loads((tmp_path / "o2" / "result.json").read_text())["status"] == "error"


def _validated(monkeypatch: pytest.MonkeyPatch, document: dict[str, Any]) -> None:
    """``validate`` and ``gate`` get ``document`` as their run's result (no database)."""
    from validator import cli
    from validator.key_masks import KeyMasker

    def run_validation(config: Path, names: list[str], sets: list[str]) -> cli.Validated:
        return cli.Validated(document, KeyMasker.for_run(None), None)

    monkeypatch.setattr(cli, "_run_validation", run_validation)


def test_gate_writes_markdown_and_prints_every_path_it_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 38, item 6: the gate printed neither the result's nor the report's path, and
    had no ``--markdown`` (a CI step summary)."""
    from tests.reports.sample import make_result
    from validator import cli

    _validated(monkeypatch, make_result(comparisons=1, differences=2))
    out, junit, markdown = tmp_path / "out", tmp_path / "j.xml", tmp_path / "summary.md"
    argv = ["gate", "-c", "c.yaml", "--out", str(out), "--junit", str(junit)]
    code = cli.run([*argv, "--markdown", str(markdown), "--max-differences", "5"])
    printed = capsys.readouterr().out.splitlines()
    assert code == 0
    assert markdown.read_text(encoding="utf-8").startswith("⚠️ **replcheck: differences**")
    assert [line for line in printed if line.split(":")[0] in PATH_LABELS] == [
        f"result: {out / 'result.json'}",
        f"report: {out / 'report.html'}",
        f"junit: {junit}",
        f"markdown: {markdown}",
    ]
    assert printed[-1] == "gate passed: 2 difference(s), 5 allowed"


PATH_LABELS = ("result", "report", "junit", "markdown")


def test_the_terminal_says_a_failed_comparison_was_not_compared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 38, item 8: "0 / 0" rows for a comparison its error stopped read as empty."""
    from tests.reports.sample import make_error, wrap
    from validator import cli

    failed = make_error("gone", "no such table")
    failed.update(source_rows=0, target_rows=0)
    _validated(monkeypatch, wrap([failed]))
    assert cli.run(["validate", "-c", "c.yaml", "--out", str(tmp_path / "out")]) == 2
    line = capsys.readouterr().out.splitlines()[0]
    assert line.split() == ["gone", "error", "not", "compared", "no", "such", "table"]


def test_no_command_summary_breaks_mid_sentence() -> None:
    """Issue 38, item 6: typer's rich help keeps a docstring's line breaks in the command
    list, so summaries broke where the source wrapped ("exit 0" / "all repaired ..."): on a
    wide terminal every command's first paragraph is one line of the list."""
    import inspect

    import typer

    from validator import cli

    wide = {**os.environ, "COLUMNS": "250"}
    broken = []
    for path in ((), ("cdc",), ("hana",)):
        group: Any = typer.main.get_command(cli.app)
        for name in path:
            group = group.commands[name]
        listed = run_cli_env(wide, *path, "--help").stdout
        for name, command in group.commands.items():
            first = " ".join(inspect.cleandoc(command.help or "").split("\n\n")[0].split())
            if not re.search(rf"│ {re.escape(name)} +{re.escape(first)} +│", listed):
                broken.append(" ".join((*path, name)))
    assert broken == []


def test_check_contract_without_pyspark_runs_the_rest_and_says_what_it_skipped(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 38, item 8: ``check-contract`` exited 2 where pyspark is not installed."""
    from tests.connectors.test_missing_drivers import _block
    from validator import cli

    _block(monkeypatch, "pyspark")
    code = cli.run(["check-contract"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert f" python: {len(load_vectors())} golden vectors, ok" in printed
    assert "  spark: skipped: pyspark is not installed (pip install 'replcheck[spark]')" in printed
    assert cli.run(["check-contract", "--spark"]) == 2  # asked for, Spark must run
    assert "pip install 'replcheck[spark]'" in capsys.readouterr().err
