"""The pipeline end to end over a generated log: exactly once, full width, in the lake."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc_core.capture.filters import TableFilter
from cdc_core.lake.layout import LakeTable, high_water_mark
from cdc_core.pipeline.loop import Pipeline, PipelineConfig
from connectors.synthetic.log_reader import SyntheticSource
from connectors.synthetic.workload import Workload, WorkloadSpec
from tests.cdc_core.lake_model import (
    changelog_events,
    expected_events,
    final_state,
    mirror_rows,
)


def _config(tmp_path: Path, tables: list[str], **overrides: object) -> PipelineConfig:
    settings: dict[str, object] = {"batch_max_events": 200, "memory_budget_bytes": 1 << 20}
    settings.update(overrides)
    return PipelineConfig(
        "test",
        tmp_path / "lake",
        tmp_path / "state",
        TableFilter.of_tables(tables),
        **settings,  # type: ignore[arg-type]
    )


def _assert_lake_equals_model(lake: Path, workload: Workload) -> None:
    for table in workload.spec.table_names:
        assert changelog_events(lake, table) == expected_events(workload, table)
        assert mirror_rows(lake, table) == final_state(workload, table)


@pytest.mark.parametrize("minimal", [True, False], ids=["minimal-images", "full-images"])
def test_pipeline_writes_every_committed_change_once(tmp_path: Path, minimal: bool) -> None:
    workload = Workload(WorkloadSpec(seed=5, transactions=300, minimal=minimal))
    source = SyntheticSource(workload)
    pipeline = Pipeline(_config(tmp_path, workload.spec.table_names), source, source)

    reached = pipeline.run_until_caught_up()

    assert reached == workload.end_position()
    _assert_lake_equals_model(tmp_path / "lake", workload)
    for table in workload.spec.table_names:
        assert high_water_mark(LakeTable(tmp_path / "lake", table)) == reached.value
