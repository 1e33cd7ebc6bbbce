"""``replcheck cdc run`` as a command: catch up, clean stop on SIGTERM, clear errors."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cdc_core.pipeline.checkpoint import read_checkpoint
from connectors.synthetic.log_reader import spec_of_url
from connectors.synthetic.workload import Workload
from tests.cdc_core.kill_loop import ROOT, compare_lake, write_config

URL = "synthetic:///?seed=21&transactions=600&tables=2&initial_rows=200"


def _cdc_run(config: Path, *extra: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "validator.cli", "cdc", "run", "--config", str(config)]
    return subprocess.Popen(
        [*command, "--pipeline", "soak", *extra],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.integration
def test_until_caught_up_replicates_everything_and_exits_0(tmp_path: Path) -> None:
    config = write_config(tmp_path, URL)

    process = _cdc_run(config, "--until-caught-up")
    out, err = process.communicate(timeout=300)

    assert process.returncode == 0, err
    end = Workload(spec_of_url(URL)).end_position()
    assert f"everything up to position {end}" in out
    assert compare_lake(tmp_path / "lake", Workload(spec_of_url(URL))) == []


@pytest.mark.integration
def test_sigterm_flushes_checkpoints_and_exits_0(tmp_path: Path) -> None:
    paced = URL.replace("transactions=600", "transactions=3000") + "&pace=1000"
    config = write_config(tmp_path, paced)
    process = _cdc_run(config)
    checkpoint = tmp_path / "state" / "checkpoint"
    while not checkpoint.exists() and process.poll() is None:
        time.sleep(0.1)
    time.sleep(1.0)  # let it stream for a while after the initial load

    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=120)

    assert process.returncode == 0, err
    assert "stopped cleanly" in err
    saved = read_checkpoint(tmp_path / "state")
    assert saved is not None and saved.lake_position is not None
    assert f"everything up to position {saved.lake_position}" in out
    assert saved.lake_position < Workload(spec_of_url(paced)).end_position()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("duckdb:///x.db", "no log reader for URL scheme 'duckdb'"),
        ("sqlite:///x.db", "SQLite trigger capture covers the main schema only"),
        ("synthetic:///?tables=2&colour=red", "synthetic URL parameter 'colour' unknown"),
    ],
)
def test_bad_source_exits_2_with_the_cause(tmp_path: Path, url: str, message: str) -> None:
    process = _cdc_run(write_config(tmp_path, url, ["synthetic.t0"]), "--until-caught-up")
    _, err = process.communicate(timeout=120)

    assert process.returncode == 2
    assert message in err


@pytest.mark.integration
def test_table_globs_are_matched_against_the_source_tables(tmp_path: Path) -> None:
    config = write_config(tmp_path, URL, ["synthetic.t*"])

    process = _cdc_run(config, "--until-caught-up")
    _, err = process.communicate(timeout=300)

    assert process.returncode == 0, err
    assert compare_lake(tmp_path / "lake", Workload(spec_of_url(URL))) == []
