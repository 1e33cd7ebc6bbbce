"""The command line: real commands, and stubs that say so and exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "validator.cli", *args], capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize("command", [["resync"], ["cdc", "run"]])
def test_unfinished_commands_say_so_and_exit_2(command: list[str]) -> None:
    result = run_cli(*command)
    assert result.returncode == 2
    assert "not available yet" in result.stderr
    assert "nothing was done" in result.stderr


def test_check_contract_passes_with_python_only() -> None:
    result = run_cli("check-contract", "--no-spark")
    assert result.returncode == 0, result.stderr
    assert "python: 332 golden vectors, ok" in result.stdout


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


@pytest.mark.spark
def test_demo_finds_exactly_the_injected_drift(tmp_path: Path) -> None:
    result = run_cli("demo", "--workdir", str(tmp_path))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "demo ok: exactly the 13 injected differences were found" in result.stdout
    assert (tmp_path / "out" / "result.json").exists()
    assert (tmp_path / "out" / "report.html").exists()
