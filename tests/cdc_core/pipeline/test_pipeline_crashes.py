"""Crash the pipeline at random points and restart it: the lake must equal the model.

Hypothesis draws the workload (interleaving, rollbacks, partial rollbacks, big
transactions, minimal images), the buffer's spill budget, the batch size and where the
crashes happen: any call of the reader, the sink's changelog and mirror commits, the
progress record, the row image store's flush or the checkpoint write. A crash is an
exception out of that call; the pipeline object is dropped and a new one restarts from the
state directory. The process-level version of this (SIGKILL) is test_pipeline_sigkill.py.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import cdc_core.lake.sink
import cdc_core.pipeline.checkpoint
import cdc_core.pipeline.loop
from cdc_core.capture.filters import TableFilter
from cdc_core.capture.source import Idle
from cdc_core.lake.sink import LakeSink
from cdc_core.pipeline.loop import Pipeline, PipelineConfig
from cdc_core.rebuild.image_store import RowImageStore
from connectors.synthetic.log_reader import SyntheticSource
from connectors.synthetic.workload import Workload, WorkloadSpec
from tests.cdc_core.lake_model import changelog_events, expected_events, final_state, mirror_rows


class SimulatedCrash(Exception):
    """Raised at the chosen crash point."""


CRASH_POINTS = (
    "reader",
    *(
        f"{when} {what}"
        for what in (
            "_append",
            "_merge_mirror",
            "_create_mirror",
            "write_snapshot",
            "write_part",
            "_write",
            "flush",
            "progress",
            "checkpoint",
        )
        for when in ("before", "after")
    ),
)


class CrashPoints:
    """Counts the calls of each crash point and raises at the chosen ones.

    Args:
        crash_at: (crash point, n): crash at the n-th call of that point.
    """

    def __init__(self, crash_at: list[tuple[str, int]]) -> None:
        self.pending = set(crash_at)
        self.calls: dict[str, int] = {}
        self.crashed: list[str] = []

    def hit(self, where: str) -> None:
        count = self.calls[where] = self.calls.get(where, 0) + 1
        if (where, count) in self.pending:
            self.pending.discard((where, count))
            self.crashed.append(where)
            raise SimulatedCrash(f"crash at call {count} of {where}")


def _wrap(points: CrashPoints, where: str, function: Callable[..., Any]) -> Callable[..., Any]:
    def crashing(*args: Any, **kwargs: Any) -> Any:
        points.hit(f"before {where}")
        result = function(*args, **kwargs)
        points.hit(f"after {where}")  # the call's effect is durable, the caller never knew
        return result

    return crashing


class CrashingSource(SyntheticSource):
    """The synthetic source, crashing between changes."""

    def __init__(self, workload: Workload, points: CrashPoints) -> None:
        super().__init__(workload)
        self.points = points

    def iter_changes(self, start: Any) -> Iterator[Any]:
        for item in super().iter_changes(start):
            self.points.hit("reader")
            yield item
            if isinstance(item, Idle):
                self.points.hit("reader")  # one call per idle poll, like a quiet log


def _install(monkeypatch: pytest.MonkeyPatch, points: CrashPoints) -> None:
    for name in (
        "_merge_mirror",
        "_create_mirror",
        "write_snapshot",
        "write_part",
        "_write",
    ):
        monkeypatch.setattr(LakeSink, name, _wrap(points, name, getattr(LakeSink, name)))
    monkeypatch.setattr(RowImageStore, "flush", _wrap(points, "flush", RowImageStore.flush))
    monkeypatch.setattr(
        cdc_core.lake.sink,
        "write_progress",
        _wrap(points, "progress", cdc_core.lake.sink.write_progress),
    )
    monkeypatch.setattr(
        cdc_core.pipeline.loop,
        "write_checkpoint",
        _wrap(points, "checkpoint", cdc_core.pipeline.checkpoint.write_checkpoint),
    )


workloads = st.builds(
    WorkloadSpec,
    seed=st.integers(0, 10_000),
    transactions=st.integers(5, 90),
    tables=st.integers(1, 3),
    initial_rows=st.integers(0, 30),
    max_changes=st.integers(1, 8),
    concurrency=st.integers(1, 6),
    rollback_rate=st.sampled_from([0.0, 0.1, 0.3]),
    partial_rollback_rate=st.sampled_from([0.0, 0.1, 0.3]),
    big_every=st.sampled_from([0, 25]),
    big_changes=st.integers(50, 300),
    minimal=st.booleans(),
)


# About 20 s on two idle cores: 30 random workloads, each crashed and restarted up to four
# times; fewer examples would miss the rarer crash points. Batches of 4 events or more, and
# crashes within a point's first 6 calls: batches of 1-3 events made a workload hundreds of
# Delta commits (up to 20 s each, 90 s in all) and left later calls' crashes unreached.
@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    spec=workloads,
    budget=st.sampled_from([0, 2_000, 50_000, 1 << 20]),
    batch=st.integers(4, 120),
    crashes=st.lists(
        st.one_of(
            st.tuples(st.just("reader"), st.integers(1, 1500)),
            st.tuples(st.sampled_from(CRASH_POINTS[1:]), st.integers(1, 6)),
        ),
        max_size=4,
        unique=True,
    ),
)
def test_crashes_and_restarts_lose_and_duplicate_nothing(
    monkeypatch: pytest.MonkeyPatch,
    spec: WorkloadSpec,
    budget: int,
    batch: int,
    crashes: list[tuple[str, int]],
) -> None:
    for where in _crash_and_check(monkeypatch, spec, budget, batch, crashes):
        event(f"crashed: {where}")


def test_a_crash_between_a_first_load_and_its_checkpoint_keeps_the_log(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The load of every table finished, then the store's flush before the checkpoint
    crashed: the restart must read the log from the load's position, not from its end
    (found by a random run of the test above: every change after the load was lost)."""
    spec = WorkloadSpec(seed=8659, transactions=83, tables=2, initial_rows=10, minimal=True)
    _crash_and_check(monkeypatch, spec, 2000, 31, [("before flush", 3)])


def _crash_and_check(
    monkeypatch: pytest.MonkeyPatch,
    spec: WorkloadSpec,
    budget: int,
    batch: int,
    crashes: list[tuple[str, int]],
) -> list[str]:
    """Run until a run ends by itself, crashing as listed; check the lake; the crashes."""
    workload = Workload(spec)
    points = CrashPoints(crashes)
    with monkeypatch.context() as patch, tempfile.TemporaryDirectory() as work:
        _install(patch, points)
        root = Path(work)
        config = PipelineConfig(
            "crashy",
            root / "lake",
            root / "state",
            TableFilter.of_tables(spec.table_names),
            memory_budget_bytes=budget,
            batch_max_events=batch,
        )
        for _attempt in range(len(crashes) + 1):
            source = CrashingSource(workload, points)
            try:
                Pipeline(config, source, source).run_until_caught_up()
                break
            except SimulatedCrash:
                continue
        else:
            raise AssertionError("the pipeline did not finish after its last crash")
        patch.undo()
        for table in spec.table_names:
            assert changelog_events(root / "lake", table) == expected_events(workload, table)
            assert mirror_rows(root / "lake", table) == final_state(workload, table)
    return points.crashed
