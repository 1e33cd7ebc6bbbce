"""The command line: real commands, and stubs that say so and exit 2."""

from __future__ import annotations

import subprocess
import sys

import pytest


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "validator.cli", *args], capture_output=True, text=True, check=False
    )


@pytest.mark.parametrize(
    "command", [["validate"], ["gate"], ["demo"], ["resync"], ["report"], ["cdc", "run"]]
)
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
