"""Run ``replcheck`` as a user would, in a new process from the repository root: a config
file with one pipeline (and a comparison of its lake), a command run to its end, ``cdc run``
caught up, ``validate`` read back from its result file, and ``cdc run`` following the log in
the background until the test stops it."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CLI = (sys.executable, "-m", "validator.cli")
PIPELINE = "p"  # the pipeline of a config from write_config
WAIT_S = 120.0  # how long a background command may take to reach a point or to stop


def write_config(
    work: Path,
    url: str,
    tables: Sequence[str],
    *,
    options: str = "",
    compared: tuple[str, str] | None = None,
) -> Path:
    """``work/replcheck.yaml``: pipeline ``p`` of ``tables`` from ``url`` into ``work/lake``.

    Args:
        work: The test's directory; the lake and the state directory go below it.
        url: The source's URL.
        tables: The pipeline's tables, as the config names them.
        options: More settings of the pipeline, YAML flow-style (``retry: {attempts: 0}``).
        compared: A comparison of a source table with a lake table, validated locally.
    """
    work.mkdir(parents=True, exist_ok=True)
    settings = ", ".join(
        filter(None, [f"tables: {json.dumps(list(tables))}", _state_dir(work), options])
    )
    lines = [
        "connections:",
        f"  src: {{url: {json.dumps(url)}}}",
        f"  lake: {{lake: {json.dumps(str(work / 'lake'))}}}",
        "pipelines:",
        f"  - {{name: {PIPELINE}, source: src, target: lake, {settings}}}",
    ]
    if compared is not None:
        source, lake = (json.dumps(table) for table in compared)
        lines += [
            "comparisons:",
            f"  - {{name: {compared[0].rsplit('.', 1)[-1]}, source: {{connection: src, table:"
            f" {source}}}, target: {{connection: lake, table: {lake}}}}}",
            "validation: {engine: local, lake_wait_timeout_s: 60}",
        ]
    config = work / "replcheck.yaml"
    config.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return config


def _state_dir(work: Path) -> str:
    return f"state_dir: {json.dumps(str(work / 'state'))}"


def replcheck(*args: str) -> subprocess.CompletedProcess[str]:
    """Run ``replcheck ARGS`` to its end, its output captured."""
    return subprocess.run(
        [*CLI, *args], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )


def catch_up(
    config: Path, pipeline: str = PIPELINE, expect: int = 0
) -> subprocess.CompletedProcess[str]:
    """``cdc run --until-caught-up`` of ``pipeline``; fails unless it exits ``expect``."""
    done = replcheck(
        "cdc", "run", "--config", str(config), "--pipeline", pipeline, "--until-caught-up"
    )
    assert done.returncode == expect, done.stderr[-3000:]
    return done


def start_catching_up(config: Path, log: Path, pipeline: str) -> subprocess.Popen[bytes]:
    """``cdc run --until-caught-up`` of ``pipeline`` in the background (to be killed), its
    output appended to ``log``."""
    command = [*CLI, "cdc", "run", "--config", str(config), "--pipeline", pipeline]
    with log.open("ab") as output:
        return subprocess.Popen(
            [*command, "--until-caught-up"], cwd=ROOT, stdout=output, stderr=output
        )


def catch_up_logged(config: Path, log: Path, pipeline: str) -> None:
    """``start_catching_up`` run to its end; fails with the log's tail unless it exits 0."""
    assert start_catching_up(config, log, pipeline).wait(timeout=600) == 0, log.read_text()[-3000:]


def validate(config: Path, out: Path) -> tuple[int, dict[str, Any]]:
    """``validate`` of a config with one comparison: its exit code and that comparison."""
    finished = replcheck("validate", "--config", str(config), "--out", str(out))
    (comparison,) = json.loads((out / "result.json").read_text())["comparisons"]
    return finished.returncode, comparison


@contextlib.contextmanager
def cdc_running(
    config: Path, log: Path, *extra: str, pipeline: str = PIPELINE
) -> Iterator[subprocess.Popen[str]]:
    """``cdc run`` of ``pipeline`` in the background, its stderr going to ``log`` (read while
    it runs), its stdout to a pipe; killed on the way out if it still runs."""
    command = [*CLI, "cdc", "run", "--config", str(config), "--pipeline", pipeline, *extra]
    with log.open("w", encoding="utf-8") as stderr:
        process = subprocess.Popen(
            command, cwd=ROOT, stdout=subprocess.PIPE, stderr=stderr, text=True
        )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        if process.stdout is not None:
            process.stdout.close()
        process.wait()


def wait_for(done: Callable[[], bool], process: subprocess.Popen[str], log: Path) -> None:
    """Wait until ``done()``; fail with the command's log if it exits or takes too long."""
    deadline = time.monotonic() + WAIT_S
    while not done():
        if process.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"cdc run (rc {process.poll()}): {log.read_text()[-3000:]}")
        time.sleep(0.1)


def stop(process: subprocess.Popen[str]) -> str:
    """Stop a background command with SIGTERM, as a user would; its stdout once it exited."""
    process.send_signal(signal.SIGTERM)
    out, _ = process.communicate(timeout=WAIT_S)
    return out
