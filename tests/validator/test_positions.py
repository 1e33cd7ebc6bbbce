"""Agreed positions: waiting for the lake, and each key's position by its partition."""

from __future__ import annotations

from typing import Any

import pytest

from cdc_core.errors import TransientError
from validator.positions import PartitionPosition, SourcePositions, wait_for_lake


def test_waiting_ends_when_the_lake_reaches_the_position() -> None:
    marks = iter([None, 10, 19, 20, 25])
    sleeps: list[float] = []
    reached = wait_for_lake(lambda: next(marks), 20, 60, "shop.t", sleep=sleeps.append)
    assert reached == 20
    assert len(sleeps) == 3


def test_a_lake_that_stays_behind_is_a_clear_transient_error() -> None:
    with pytest.raises(TransientError) as excinfo:
        wait_for_lake(lambda: 7, 20, timeout_s=0.05, table="shop.t", poll_s=0.01)
    message = str(excinfo.value)
    assert "shop.t is behind" in message and "high-water mark is 7" in message
    assert "snapshot is at 20" in message and "lake_wait_timeout_s" in message


@pytest.mark.spark
def test_each_key_is_compared_at_its_partitions_position(spark: Any) -> None:
    from pyspark.sql import functions as F

    positions = SourcePositions(
        "id",
        (
            PartitionPosition(0, 100, None, 10),
            PartitionPosition(1, 105, 10, 20),
            PartitionPosition(2, 103, 20, None),
        ),
    )
    frame = spark.createDataFrame([(-5,), (9,), (10,), (19,), (20,), (10**9,)], "id bigint")
    cutoffs = [r.c for r in frame.select(positions.cutoff(F.col("id")).alias("c")).collect()]
    assert cutoffs == [100, 100, 105, 105, 103, 103]
    assert positions.highest == 105
    assert positions.describe() == "100..105 (3 partitions)"
    single = SourcePositions(None, (PartitionPosition(0, 42),))
    assert single.describe() == "42"
