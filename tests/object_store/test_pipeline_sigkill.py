"""SIGKILL ``replcheck cdc run`` writing into an S3 lake (moto on loopback) at random moments:
the bucket's changelog and mirror must get every change exactly once, as on local disk
(tests/cdc_core/pipeline/test_pipeline_sigkill.py). Kills land in the initial load, Delta
commits (a commit file is put with If-None-Match: a retried one lands once), between the
changelog and the mirror and in the progress file's PUT. More kills:
``bench/soak_pipeline_sigkill.py --store s3``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cdc_core.kill_loop import kill_loop
from tests.object_store.s3_server import S3Lake

pytestmark = [pytest.mark.object_store, pytest.mark.integration]

KILLS = 6
# About 3,000 log entries at 1,000/s, a big transaction that spills among them.
URL = (
    "synthetic:///?seed=12&transactions=600&tables=2&initial_rows=500&concurrency=4"
    "&big_every=300&big_changes=1200&pace=1000"
)


def test_a_sigkilled_pipeline_writes_every_change_to_s3_exactly_once(
    tmp_path: Path, s3_lake: S3Lake
) -> None:
    report = kill_loop(tmp_path, URL, kills=KILLS, seed=20261206, store=s3_lake.url)

    assert report.live_kills >= KILLS
    assert report.mismatches == []
    assert not (tmp_path / "scenario-0" / "lake").exists()  # the lake was the bucket
