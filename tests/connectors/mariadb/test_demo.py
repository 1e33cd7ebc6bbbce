"""``replcheck demo --source mariadb``: a private server, the real pipeline, the validation."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def _demo(workdir: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "validator.cli", "demo", "--source", "mariadb"]
    return subprocess.run(
        [*command, "--workdir", str(workdir)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=1200,
    )


@pytest.mark.integration
@pytest.mark.mariadb
@pytest.mark.spark
def test_the_mariadb_demo_replicates_and_finds_exactly_the_drift(tmp_path: Path) -> None:
    result = _demo(tmp_path)

    assert result.returncode == 0, result.stderr[-3000:]
    assert "demo: exactly the 3 injected differences were found" in result.stdout
    assert "the workload replicated from the binlog up to mariadb-bin." in result.stderr
    assert (tmp_path / "out" / "result.json").exists()
    assert (tmp_path / "out" / "report.html").exists()
    assert "pipelines:" in (tmp_path / "replcheck.yaml").read_text()
    assert (tmp_path / "state" / "checkpoint").exists()
    leftover = [line for line in result.stderr.splitlines() if "data in /tmp/" in line]
    assert leftover and not Path(leftover[0].split("data in ")[1].rstrip(")")).exists()


def test_without_mariadb_binaries_the_demo_exits_2_naming_the_fix(tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    result = _demo(tmp_path / "demo", {**os.environ, "REPLCHECK_MARIADB_BIN": str(empty)})

    assert result.returncode == 2
    assert "mariadbd is not installed" in result.stderr
    assert "apt-get install mariadb-server" in result.stderr
