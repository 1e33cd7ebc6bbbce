"""A table refresh in the lake's progress file: the window it leaves inexact is recorded,
and no refresh is left marked as under way once it has finished."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from cdc_core.capture.filters import TableFilter
from cdc_core.capture.source import TableDescription
from cdc_core.lake.layout import read_marks, read_progress
from cdc_core.pipeline.loop import Pipeline, PipelineConfig
from tests.cdc_core.scripted_source import ChunkedSource

ORDERS = "shop.orders"
SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("qty", pa.int32())])


def test_a_refresh_whose_last_chunk_is_empty_still_records_its_end(tmp_path: Path) -> None:
    """Its last chunk, read where the lake already is, writes no event; the progress file
    must still say the refresh is over (the Oracle generative tester found it: the lake
    kept the table marked as being refreshed, so its high-water mark never moved again)."""
    source = ChunkedSource({ORDERS: TableDescription(ORDERS, SCHEMA, ("id",))})
    source.commit([("c", ORDERS, {"id": 1, "qty": 5})])
    config = PipelineConfig(
        "p1", tmp_path / "lake", tmp_path / "state", TableFilter.of_tables([ORDERS]),
        refresh_chunk_rows=1,
    )  # fmt: skip
    Pipeline(config, source, source).run_until_caught_up()  # the initial load
    ddl = source.ddl(ORDERS)

    reached = Pipeline(config, source, source).run_until_caught_up()

    assert reached == source.end_position()
    marks = read_marks(tmp_path / "lake")
    assert ORDERS not in marks.refreshing
    assert marks.stale[ORDERS] == ((ddl.value, source.end_position().value),)
    assert read_progress(tmp_path / "lake")["p1"][0] == reached
