"""Issue 38, item 7: a pipeline's lag is its distance to the source's log end, 0 once caught
up (it never grows while the pipeline is caught up and the source is quiet), and its
events/s figure is a recent rate, not an average since the start."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cdc_core.capture.events import CommittedTransaction
from cdc_core.capture.position import Position
from cdc_core.pipeline.metrics import RATE_WINDOW_S, MetricsTracker
from connectors.pipeline import open_pipeline
from tests.cli_runs import catch_up, write_config
from tests.private_servers import PostgresServer
from validator.commands.cdc import describe_progress


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _transaction(committed: datetime) -> CommittedTransaction:
    return CommittedTransaction("tx", Position.of(1), Position.of(2), committed, 0, ())


def test_the_rate_is_the_recent_one_not_the_average_since_the_start() -> None:
    clock = _Clock()
    tracker = MetricsTracker(clock)
    tracker.committed(_transaction(datetime.now(UTC)), 100_000)  # a burst at the start
    clock.now += 10 * RATE_WINDOW_S
    tracker.committed(_transaction(datetime.now(UTC)), 30)
    clock.now += 1
    assert tracker.snapshot().events_per_second == 30 / RATE_WINDOW_S
    clock.now += RATE_WINDOW_S
    assert tracker.snapshot().events_per_second == 0  # quiet: nothing lately


def test_the_lag_is_0_once_caught_up_however_old_the_last_commit() -> None:
    tracker = MetricsTracker(_Clock())
    tracker.committed(_transaction(datetime.now(UTC) - timedelta(seconds=618)), 1)
    assert (tracker.snapshot().lag_seconds or 0) >= 618  # reading: the commit's age
    tracker.caught_up()
    assert tracker.snapshot().lag_seconds == 0
    tracker.committed(_transaction(datetime.now(UTC) - timedelta(seconds=5)), 1)
    assert (tracker.snapshot().lag_seconds or 0) >= 5  # the log held more again


@pytest.mark.integration
@pytest.mark.postgres
def test_a_caught_up_pipeline_reports_lag_0(
    postgres: PostgresServer, postgres_database: Callable[[PostgresServer], str], tmp_path: Path
) -> None:
    database = postgres_database(postgres)
    with contextlib.closing(postgres.connect(database)) as connection:
        connection.execute("CREATE TABLE items (id int PRIMARY KEY, v text)")
        connection.commit()
    config = write_config(tmp_path, postgres.url(database) + "?idle_s=0.2", ["public.items"])
    catch_up(config)  # the initial load
    with contextlib.closing(postgres.connect(database)) as connection:
        connection.execute("INSERT INTO items VALUES (1, 'a')")
        connection.commit()
    with open_pipeline(config, "p") as pipeline:  # a restart that reads one event
        pipeline.run_until_caught_up()
        figures = pipeline.metrics()
    assert figures.events == 1
    assert figures.lag_seconds == 0
    assert "lag 0 (caught up)" in describe_progress(figures)
