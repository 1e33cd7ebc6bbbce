"""One running process per state directory (issue 19, item 4).

Two real ``replcheck cdc run`` processes on one pipeline's state directory: the second is
refused with exit code 2 and a message naming the running one, and the first keeps going.
After the first dies by SIGKILL the OS has dropped its ``flock``: a new run starts.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cdc_core.state.lock import StateDirLockedError, StateLock
from connectors.synthetic.log_reader import spec_of_url
from connectors.synthetic.workload import Workload
from tests.cdc_core.kill_loop import ROOT, compare_lake, write_config

URL = "synthetic:///?seed=23&transactions=300&tables=2&initial_rows=100"


def _cdc_run(config: Path, *extra: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "validator.cli", "cdc", "run", "--config", str(config)]
    return subprocess.Popen(
        [*command, "--pipeline", "soak", *extra],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_checkpoint(process: subprocess.Popen[str], state: Path) -> None:
    while not (state / "checkpoint").exists():
        assert process.poll() is None, process.communicate()[1]
        time.sleep(0.1)


@pytest.mark.integration
def test_a_second_run_on_the_state_dir_exits_2_naming_the_first(tmp_path: Path) -> None:
    config = write_config(tmp_path, URL)
    first = _cdc_run(config)  # no --until-caught-up: it idles at the log's end, holding on
    try:
        _wait_for_checkpoint(first, tmp_path / "state")

        second = _cdc_run(config, "--until-caught-up")
        _, err = second.communicate(timeout=120)

        assert second.returncode == 2, err
        lines = [line for line in err.splitlines() if line.startswith("error:")]
        assert len(lines) == 1, err
        assert f"is in use by pid {first.pid} on host " in lines[0]
        assert "started 20" in lines[0] and "stop that run first" in lines[0]
        assert first.poll() is None  # the first run was not disturbed
    finally:
        first.kill()
        first.communicate(timeout=60)


@pytest.mark.integration
def test_a_run_killed_by_sigkill_leaves_no_stale_lock(tmp_path: Path) -> None:
    config = write_config(tmp_path, URL)
    first = _cdc_run(config)
    _wait_for_checkpoint(first, tmp_path / "state")
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=60)
    assert (tmp_path / "state" / "lock").exists()  # its text outlives it; the lock does not

    again = _cdc_run(config, "--until-caught-up")
    _, err = again.communicate(timeout=300)

    assert again.returncode == 0, err
    assert compare_lake(tmp_path / "lake", Workload(spec_of_url(URL))) == []


def test_the_lock_is_exclusive_until_released(tmp_path: Path) -> None:
    held = f"in use by pid {os.getpid()} on host"
    with StateLock(tmp_path, "shop"), pytest.raises(StateDirLockedError, match=held):
        StateLock(tmp_path, "shop").acquire()
    with StateLock(tmp_path, "shop"):
        pass
