"""Shared by the source-outage tests (``tests/connectors/<product>/test_source_outage.py``):
``cdc run`` follows table ``a`` of a server of the test's own, which the test halts and
resumes. What every product must show is checked here: with retries off, the message that
names where a restart resumes; with retries, a changelog holding each change exactly once."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from cdc_core.lake.layout import LakeTable
from cdc_core.names import COMMIT_POS, OP, SEQ
from cdc_core.pipeline.checkpoint import read_checkpoint
from tests.cdc_core.lake_model import mirror_rows, read_delta
from tests.cli_runs import write_config

RETRIES = "{attempts: 30, first_wait_s: 0.2, max_wait_s: 0.5}"  # the server is back within


def outage_config(work: Path, url: str, table: str, retry: str) -> Path:
    """A config of pipeline ``p`` following ``table`` from ``url``, retrying as ``retry``
    says (the ``pipelines[].retry`` setting)."""
    return write_config(work, url, [table], options=f"retry: {retry}")


def mirror(work: Path, table: str) -> dict[object, dict[str, object]]:
    """The lake's mirror of ``table`` by id (empty before the initial load wrote it)."""
    if not (LakeTable(work / "lake", table).mirror / "_delta_log").exists():
        return {}
    return mirror_rows(work / "lake", table)


def lake_position(work: Path) -> str:
    """The lake position of the pipeline's checkpoint: where a restart resumes."""
    held = read_checkpoint(work / "state")
    assert held is not None and held.lake_position is not None
    return str(held.lake_position)


def assert_not_retried(err: str, work: Path) -> None:
    """With retries off: the lost source was not retried, and the message says where the lake
    is and that a restart resumes from there."""
    assert "not retried (pipelines[].retry.attempts is 0)" in err
    assert f"The lake holds every change up to {lake_position(work)}; once the source" in err
    assert "`replcheck cdc run` started again resumes from there" in err
    assert "retrying" not in err


def assert_each_change_once(work: Path, table: str, by_op: dict[str, int]) -> None:
    """The changelog of ``table`` holds ``by_op`` events of each operation, no two at the same
    position: nothing lost or written twice across the outage."""
    events = read_delta(LakeTable(work / "lake", table).changelog)
    assert Counter(event[OP] for event in events) == by_op
    assert len({(event[COMMIT_POS], event[SEQ]) for event in events}) == len(events)
