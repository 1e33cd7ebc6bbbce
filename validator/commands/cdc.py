"""``replcheck cdc run``: a pipeline as a long-running command.

Progress goes to the terminal every few seconds (position, events/s, lag, open
transactions, spilled bytes; never row values). SIGTERM and SIGINT stop it cleanly: the
pending batch is written, a checkpoint recorded, and the command exits 0. With
``until_caught_up`` it stops by itself once everything committed at the source when it
started is in the lake.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from cdc_core.metrics import LoadFigures, PipelineMetrics
from cdc_core.pipeline import Pipeline
from cdc_core.position import Position
from validator.cdc_pipeline import open_pipeline

logger = logging.getLogger(__name__)
PROGRESS_EVERY_S = 5.0


def run_pipeline(
    config_path: Path,
    name: str,
    *,
    until_caught_up: bool = False,
    overrides: dict[str, str] | None = None,
) -> Position | None:
    """Run the named pipeline of a config file; returns the position the lake reached."""
    with open_pipeline(config_path, name, overrides=overrides) as pipeline:
        with _stop_on_signals(pipeline.stop), _progress(pipeline):
            reached = pipeline.run_until_caught_up() if until_caught_up else pipeline.run()
        reached = reached or pipeline.metrics().position  # an initial load's snapshot
        logger.info(
            "pipeline %s stopped cleanly; the lake holds everything up to %s", name, reached
        )
        return reached


@contextmanager
def _stop_on_signals(stop: Callable[[], None]) -> Iterator[None]:
    """SIGTERM/SIGINT ask the pipeline to stop; the previous handlers come back after."""

    def handler(_signum: int, _frame: FrameType | None) -> None:
        stop()  # no logging here: a signal handler must not take the logging lock

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def describe_progress(figures: PipelineMetrics) -> str:
    """One progress line: the initial load's table, rows and rate while it runs; else
    position, throughput, lag, the oldest open transaction, spill."""
    if figures.load is not None:
        return describe_load(figures.load)
    lag = "-" if figures.lag_seconds is None else f"{figures.lag_seconds:.1f} s"
    line = (
        f"position {figures.position}, {figures.events} events"
        f" ({figures.events_per_second:.0f}/s), lag {lag},"
        f" {figures.open_transactions} open transactions"
    )
    if figures.oldest_open is not None:
        txid, begin, changes = figures.oldest_open
        age = figures.oldest_open_age_seconds or 0.0
        line += f" (oldest {txid} from {begin}, {age:.0f} s, {changes} changes)"
    return line + f", {figures.spilled_bytes} bytes spilled"


def describe_load(load: LoadFigures) -> str:
    """The initial load's progress line: which table, rows so far, rate, what is left."""
    line = (
        f"initial load: table {load.table_number}/{load.tables} {load.table},"
        f" {load.rows:,} rows ({load.rows_per_second:,.0f} rows/s)"
    )
    if load.estimated_rows is not None:
        line += f" of about {load.estimated_rows:,}"
    left = load.seconds_left
    return line + ("" if left is None else f", about {left:,.0f} s left")


@contextmanager
def _progress(pipeline: Pipeline) -> Iterator[None]:
    """Log the pipeline's figures every few seconds from a side thread."""
    done = threading.Event()

    def report() -> None:
        while not done.wait(PROGRESS_EVERY_S):
            logger.info("%s", describe_progress(pipeline.metrics()))

    thread = threading.Thread(target=report, name="cdc-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
