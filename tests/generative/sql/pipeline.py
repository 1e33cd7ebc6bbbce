"""``replcheck cdc run`` as a real subprocess: started, SIGKILLed, restarted, and finally run
with ``--until-caught-up`` (which ends once everything committed at the source when it
started is in the lake, table refreshes included): the judges wait on that, not on time.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from cdc_core.lake.layout import LakeTable
from cdc_core.lake_location import LakeLocation

ROOT = Path(__file__).resolve().parents[3]
NAME = "gen"
RUN_TIMEOUT_S = 600
READY_TIMEOUT_S = 120


def write_config(
    work: Path, url: str, tables: str, memory_budget_mb: float, lake: Path | LakeLocation
) -> Path:
    """The pipeline's config: small buffer (transactions spill), small batches and chunks."""
    config = work / "pipeline.yaml"
    config.write_text(
        "connections:\n"
        f"  src: {{url: {json.dumps(url)}}}\n"
        f"  lake: {{lake: {json.dumps(str(lake))}}}\n"
        "pipelines:\n"
        f"  - name: {NAME}\n"
        "    source: src\n"
        "    target: lake\n"
        f"    tables: [{json.dumps(tables)}]\n"
        f"    state_dir: {json.dumps(str(work / 'state'))}\n"
        f"    buffer: {{memory_budget_mb: {memory_budget_mb}}}\n"
        "    batch: {max_events: 200, max_seconds: 0.3}\n"
        "    refresh: {chunk_rows: 50}\n",
        encoding="utf-8",
    )
    return config


class PipelineProcess:
    """The pipeline of one seed; at most one process runs at a time."""

    def __init__(self, config: Path, log: Path, lake: Path | LakeLocation) -> None:
        self.config = config
        self.log = log
        self.lake = lake
        self.process: subprocess.Popen[bytes] | None = None
        self.kills = 0
        self.ready = False  # the running process is known to have installed its handlers

    def _command(self, *extra: str) -> list[str]:
        # --verbose: a replcheck bug's traceback lands in the kept log.
        command = [sys.executable, "-m", "validator.cli", "--verbose", "cdc", "run"]
        return [*command, "--config", str(self.config), "--pipeline", NAME, *extra]

    def _popen(self, *extra: str) -> subprocess.Popen[bytes]:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        with self.log.open("ab") as output:
            return subprocess.Popen(
                self._command(*extra), cwd=ROOT, env=env, stdout=output, stderr=output
            )

    def start(self) -> None:
        """Start following the log in the background."""
        assert self.process is None, "a pipeline process is running already"
        self.process = self._popen()

    def wait_ready(self, tables: list[str]) -> None:
        """Wait until the running process has loaded ``tables`` (canonical names) into the
        lake: its signal handlers are installed and it follows the log. A process that exits
        first is a finding."""
        assert self.process is not None
        logs = [LakeTable(self.lake, table).mirror_at.join("_delta_log") for table in tables]
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not all(log.is_dir() for log in logs):
            if self.process.poll() is not None:
                raise AssertionError(
                    f"cdc run exited with {self.process.returncode}: {self.tail()}"
                )
            if time.monotonic() > deadline:
                raise AssertionError(f"cdc run loaded no tables in {READY_TIMEOUT_S} s")
            time.sleep(0.05)
        self.ready = True

    def check_running(self) -> None:
        """A background process that died on its own is a finding (a validator would wait
        for the lake in vain: postgres-default catalog seed 403)."""
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"cdc run exited with {self.process.returncode}: {self.tail()}")

    def kill(self) -> None:
        """SIGKILL the running process (if it died on its own, that is a finding) and
        start it again."""
        self.check_running()
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        self.kills += 1
        self.process = None
        self.ready = False
        self.start()

    def finish(self) -> None:
        """Stop the background process (SIGTERM: it writes what it has and exits 0), then run
        until caught up."""
        if self.process is not None:
            # SIGTERM before the handler is installed would kill it: a restarted process
            # not known to be ready is SIGKILLed instead (one more crash to recover from).
            stop = signal.SIGTERM if self.ready else signal.SIGKILL
            self.kills += stop == signal.SIGKILL
            self.process.send_signal(stop)
            code = self.process.wait(RUN_TIMEOUT_S)
            self.process = None
            if code != 0 and stop == signal.SIGTERM:
                raise AssertionError(f"cdc run exited with {code} on SIGTERM: {self.tail()}")
        last = self._popen("--until-caught-up")
        code = last.wait(RUN_TIMEOUT_S)
        if code != 0:
            raise AssertionError(f"cdc run --until-caught-up exited with {code}: {self.tail()}")

    def dump_stacks(self) -> None:
        """Have the running process print every thread's stack into its log (SIGUSR1)."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGUSR1)
            time.sleep(1.0)

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
        self.process = None

    def tail(self, size: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-size:] if self.log.exists() else ""
