"""SIGKILL ``replcheck cdc run`` at 20+ random moments; the lake must get everything once.

The source is the synthetic log, paced so a run takes several seconds. Each scenario starts
from an empty lake, kills and restarts the pipeline until a run finishes by itself, and
compares the lake with the reference model; scenarios repeat until 20 kills hit a running
pipeline. Kills land in start-up, the initial load, Delta commits, between changelog and
mirror, in checkpoints and in spills. More kills: bench/soak_pipeline_sigkill.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cdc_core.kill_loop import kill_loop

KILLS = 20
# About 12,000 log entries at 1,500/s (a big transaction that spills among them).
URL = (
    "synthetic:///?seed=11&transactions=1500&tables=3&initial_rows=1000&concurrency=6"
    "&big_every=700&big_changes=2000&pace=1500"
)


@pytest.mark.integration
def test_sigkilled_pipeline_delivers_every_change_exactly_once(tmp_path: Path) -> None:
    report = kill_loop(tmp_path, URL, kills=KILLS, seed=20261122)

    assert report.live_kills >= KILLS
    assert report.mismatches == []
