"""SIGKILL a running ``replcheck cdc run`` at random moments, restart it, and check the lake.

Shared by the test (tests/cdc_core/pipeline/test_pipeline_sigkill.py, 20+ kill points) and the soak
script (bench/soak_pipeline_sigkill.py, as many as asked).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from cdc_core.lake.layout import LakeTable
from cdc_core.lake_location import LakeLocation
from connectors.synthetic.log_reader import spec_of_url
from connectors.synthetic.workload import Workload
from tests.cdc_core.lake_model import (
    changelog_events,
    expected_events,
    final_state,
    mirror_rows,
    read_delta,
)

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True, slots=True)
class KillReport:
    """What a kill loop did: kills that hit a running pipeline, and the final check."""

    live_kills: int
    runs: int
    mismatches: list[str]


def write_config(
    work: Path, url: str, tables: list[str] | None = None, lake: str | None = None
) -> Path:
    """A config with one pipeline reading the synthetic ``url`` into ``work/lake`` (or the
    object-store lake URL ``lake``)."""
    if tables is None:
        tables = [f"synthetic.t{i}" for i in range(spec_of_url(url).tables)]
    config = work / "pipeline.yaml"
    config.write_text(
        "connections:\n"
        f'  src: {{url: "{url}"}}\n'
        f"  lake: {{lake: {lake or work / 'lake'}}}\n"
        "pipelines:\n"
        "  - name: soak\n"
        "    source: src\n"
        "    target: lake\n"
        f"    tables: {tables}\n"
        f"    state_dir: {work / 'state'}\n"
        "    buffer: {memory_budget_mb: 0.05}\n"
        "    batch: {max_events: 300, max_seconds: 0.5}\n",
        encoding="utf-8",
    )
    return config


def _start(config: Path, log: Path) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "validator.cli", "cdc", "run", "--config", str(config)]
    command += ["--pipeline", "soak", "--until-caught-up"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with log.open("ab") as output:
        return subprocess.Popen(command, cwd=ROOT, env=env, stdout=output, stderr=output)


def kill_loop(
    work: Path,
    url: str,
    kills: int,
    seed: int,
    max_alive_s: float = 2.5,
    store: str | None = None,
) -> KillReport:
    """Kill running pipelines ``kills`` times in all, checking the lake after each scenario.

    A scenario starts from an empty lake and state directory, kills and restarts the
    pipeline until a run finishes by itself, then compares the lake with the model. With
    ``store`` (an object-store URL), each scenario's lake is a prefix of it.
    """
    rng = random.Random(seed)
    live, runs, problems = 0, 0, []
    scenario = 0
    while live < kills:
        directory = work / f"scenario-{scenario}"
        directory.mkdir(parents=True)
        lake = f"{store}/scenario-{scenario}" if store else None
        config = write_config(directory, url, lake=lake)
        killed, started = _kill_until_done(config, rng, max_alive_s, kills - live)
        live, runs, scenario = live + killed, runs + started, scenario + 1
        where = LakeLocation.from_config(lake, {}) if lake else directory / "lake"
        checked = compare_lake(where, Workload(spec_of_url(url)))
        problems += [f"scenario {scenario}: {problem}" for problem in checked]
    return KillReport(live, runs, problems)


def _kill_until_done(
    config: Path, rng: random.Random, max_alive_s: float, budget: int
) -> tuple[int, int]:
    """(kills that hit a running pipeline, runs started); the last run ran to its end."""
    log = config.parent / "pipeline.log"
    killed, runs = 0, 0
    while killed < budget:
        process = _start(config, log)
        runs += 1
        time.sleep(rng.uniform(0.2, max_alive_s))
        if process.poll() is not None:
            _check_exit(process, log)
            return killed, runs
        process.send_signal(signal.SIGKILL)
        process.wait()
        killed += 1
    final = _start(config, log)
    final.wait(timeout=600)
    _check_exit(final, log)
    return killed, runs + 1


def _check_exit(process: subprocess.Popen[bytes], log: Path) -> None:
    if process.wait() != 0:
        raise AssertionError(f"a run failed; see {log}:\n{log.read_text()[-3000:]}")


def compare_lake(lake: Path | LakeLocation, workload: Workload) -> list[str]:
    """Each table's differences from the reference model (empty: exactly once)."""
    problems = []
    for table in workload.spec.table_names:
        written, expected = changelog_events(lake, table), expected_events(workload, table)
        if written != expected:
            problems.append(
                f"{table}: changelog lost {sum((expected - written).values())} and duplicated"
                f" or invented {sum((written - expected).values())} events"
            )
        loaded = Counter(
            row["id"]
            for row in read_delta(LakeTable(lake, table).changelog_at)
            if row["_op"] == "r"
        )
        if loaded != Counter(row["id"] for row in workload.initial_rows(table)):
            problems.append(f"{table}: the initial load is not in the changelog exactly once")
        if mirror_rows(lake, table) != final_state(workload, table):
            problems.append(f"{table}: the mirror differs from the final state")
    return problems
