"""Agreed positions: waiting for the lake, and each key's position by its partition."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cdc_core.capture.position import Position
from cdc_core.errors import TerminalError, TransientError
from cdc_core.lake.layout import (
    ChangelogMoved,
    LakeTable,
    RefreshMarks,
    append_changelog,
    changelog_files,
    meta_fields,
    write_progress,
)
from connectors.registry import connector_for
from validator.engines.sides.spark.sources import plan_partitions
from validator.positions import (
    PartitionPosition,
    SourcePositions,
    confirm_exact,
    lake_at,
    lake_columns,
    wait_for_lake,
    wait_for_lake_table,
)


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


@pytest.mark.parametrize(
    ("keys", "parallelism", "count"),
    [((1, 40), 2, 2), ((1, 1_000_000), 2, 4), ((-(10**12), 10**12), 2, 256), ((5, 5), 4, 1)],
)
def test_large_key_spans_are_read_in_more_partitions(
    tmp_path: Path, keys: tuple[int, int], parallelism: int, count: int
) -> None:
    """A partition is read and cached by one task: about 250,000 keys a range at most, so
    a big table does not run an executor out of memory; 256 ranges at most."""
    import duckdb

    path = tmp_path / "span.duckdb"
    with duckdb.connect(str(path)) as conn:
        conn.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, v INTEGER)")
        conn.executemany("INSERT INTO t VALUES (?, 0)", [(k,) for k in set(keys)])
    connector = connector_for(f"duckdb:///{path}")
    partitions = plan_partitions(connector, connector.reflect("t"), ["id"], parallelism)
    assert len(partitions) == count
    assert partitions[0].low is None and partitions[-1].high is None  # open at both ends
    bounds = [p.high for p in partitions[:-1]]
    assert bounds == sorted(bounds)


def test_a_position_a_table_refresh_left_inexact_is_refused(tmp_path: Path) -> None:
    from cdc_core.capture.position import Position
    from cdc_core.lake.layout import LakeTable, RefreshMarks, write_progress
    from validator.positions import check_exact

    marks = RefreshMarks({}, {"shop.t": ((100, 150),)})
    write_progress(tmp_path, "p", Position.of(200), ["shop.t"], marks)
    table = LakeTable(tmp_path, "shop.t")
    check_exact(table, [99, 150, 200])  # before the DDL, and from the last chunk on: exact
    with pytest.raises(TransientError) as excinfo:
        check_exact(table, [120])
    assert "between 100 and 150" in str(excinfo.value) and "validate again" in str(excinfo.value)


def test_a_table_being_refreshed_holds_its_mark_below_the_refresh(tmp_path: Path) -> None:
    from cdc_core.capture.position import Position
    from cdc_core.lake.layout import LakeTable, RefreshMarks, high_water_mark, write_progress

    write_progress(
        tmp_path, "p", Position.of(200), ["shop.t", "shop.u"], RefreshMarks({"shop.t": 120})
    )
    assert high_water_mark(LakeTable(tmp_path, "shop.t")) == 119
    assert high_water_mark(LakeTable(tmp_path, "shop.u")) == 200
    write_progress(tmp_path, "p", Position.of(200), ["shop.t"], RefreshMarks({"shop.t": 0}))
    assert high_water_mark(LakeTable(tmp_path, "shop.t")) is None  # loading: nothing yet


def test_a_wait_for_the_lake_says_what_it_waits_for(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    marks = iter([None, 5, 20])
    caplog.set_level("INFO", logger="validator.positions")
    # A wait speaks once it lasts (tests/validator/test_quiet_waits.py): this one at once.
    monkeypatch.setattr("validator.positions.QUIET_FOR_S", 0.0)
    wait_for_lake(lambda: next(marks), 20, 60, "shop.t", sleep=lambda _s: None)
    said = caplog.text
    assert "shop.t" in said and "position 20" in said and "high-water mark is None" in said
    assert "a CDC pipeline must be running" in said


def test_a_table_a_running_pipeline_has_not_created_yet_is_waited_for(tmp_path: Path) -> None:
    write_progress(tmp_path, "p", Position(5, "5"), ["shop.t"])
    table = LakeTable(tmp_path, "shop.new")
    polls: list[float] = []

    def pipeline_catches_up(seconds: float) -> None:
        polls.append(seconds)
        if len(polls) == 3:  # the pipeline reaches the table's creation
            (table.changelog / "_delta_log").mkdir(parents=True)

    wait_for_lake_table(table, 60, sleep=pipeline_catches_up)
    assert len(polls) == 3 and table.exists()


def test_a_table_missing_from_a_lake_no_pipeline_writes_is_refused_at_once(
    tmp_path: Path,
) -> None:
    with pytest.raises(TerminalError, match=r"shop\.new.*no CDC pipeline"):
        wait_for_lake_table(LakeTable(tmp_path, "shop.new"), 60, sleep=pytest.fail)


def test_a_table_that_never_appears_names_the_pipelines_tables(tmp_path: Path) -> None:
    write_progress(tmp_path, "p", Position(5, "5"), ["shop.t"])
    with pytest.raises(TransientError, match=r"shop\.new.*pipeline's tables capture it"):
        wait_for_lake_table(LakeTable(tmp_path, "shop.new"), 0.05, poll_s=0.01)


def test_a_lake_a_pipeline_is_loading_counts_as_fed(tmp_path: Path) -> None:
    """Soak seeds 1011 (postgres-default), 1015 and 1019 (mariadb-full): validation started
    while the pipeline had only loaded tables (no progress yet); it must wait, not refuse."""
    (LakeTable(tmp_path, "shop.t").changelog / "_delta_log").mkdir(parents=True)
    table = LakeTable(tmp_path, "shop.new")

    def created(_seconds: float) -> None:
        (table.changelog / "_delta_log").mkdir(parents=True)

    wait_for_lake_table(table, 60, sleep=created)
    assert table.exists()


def test_the_lake_columns_are_read_once_the_lake_has_every_ddl_the_source_shows(
    tmp_path: Path,
) -> None:
    # The validator reflects the source, then reads the lake's columns: a lake still behind
    # the source's `ADD COLUMN` would show the column missing. It waits for the position.
    table = LakeTable(tmp_path, "shop.t")
    _changelog(table, ["id"], 120)

    def pipeline_reaches_the_ddl(_seconds: float) -> None:
        _changelog(table, ["id", "added"], 130)

    assert "added" in lake_columns(table, 130, 60, sleep=pipeline_reaches_the_ddl).names
    with pytest.raises(TransientError, match=r"shop\.t is behind.*mark is 130"):
        lake_columns(table, 140, 0.05, poll_s=0.01)


def test_the_lake_columns_are_read_again_when_a_reload_moves_the_table_under_the_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import validator.positions as positions

    table = LakeTable(tmp_path, "shop.t")
    _changelog(table, ["id"], 120)
    reads = iter([ChangelogMoved("lake table shop.t: moved aside; validate again")])

    def read(lake_table: LakeTable) -> Any:
        for moved in reads:  # the first read meets the move, the next the new table
            raise moved
        return changelog_files(lake_table)

    monkeypatch.setattr(positions, "changelog_files", read)
    sleeps: list[float] = []
    assert lake_columns(table, 120, 60, sleep=sleeps.append).names[0] == "id"
    assert len(sleeps) == 1


def _changelog(table: LakeTable, columns: list[str], position: int) -> None:
    import pyarrow as pa

    fields = [pa.field(name, pa.int64()) for name in columns]
    events = pa.Table.from_pylist([], pa.schema([*fields, *meta_fields()]))
    append_changelog(table, events, position, str(position), "test")


def test_a_table_a_reload_began_on_while_its_files_were_listed_is_read_again(
    tmp_path: Path,
) -> None:
    # A DDL after the source snapshot makes the pipeline load the table again: it marks the
    # table before it writes the new generation, which lacks the states before the reload.
    table = LakeTable(tmp_path, "shop.t")
    _changelog(table, ["id"], 120)
    write_progress(tmp_path, "p", Position(130, "130"), ["shop.t"])
    at = lake_at(table, SourcePositions("id", (PartitionPosition(0, 125),)), 60)
    confirm_exact(table, at)  # nothing began: the listed files hold the state at 125

    reloading = RefreshMarks(refreshing={"shop.t": 0})
    write_progress(tmp_path, "p", Position(130, "130"), ["shop.t"], reloading)
    with pytest.raises(TransientError, match=r"shop\.t began to be loaded again.*validate again"):
        confirm_exact(table, at)
