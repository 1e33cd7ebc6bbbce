"""``replcheck cdc run``: a pipeline as a long-running command.

Progress goes to the terminal every few seconds (position, events/s, lag, open
transactions, spilled bytes; never row values). SIGTERM and SIGINT stop it cleanly: the
pending batch is written, a checkpoint recorded, and the command exits 0. With
``until_caught_up`` it stops by itself once everything committed at the source when it
started is in the lake.

A lost source -- any ``TransientError`` once the pipeline has a checkpoint: the server
closed the connection, cannot be reached, or still holds the replication slot -- is retried as
Debezium retries retriable errors (``errors.max.retries``, ``retriable.restart.connector
.wait.ms``, https://debezium.io/documentation/reference/3.1/connectors/postgresql.html),
with waits that double as its reconnections' do (``connect.backoff.initial.delay.ms`` /
``connect.backoff.max.delay.ms``), but bounded by default (``pipelines[].retry``,
``RetryPolicy``). Each attempt opens the pipeline again (``open_pipeline``), so it resumes
from its checkpoint exactly as a new ``cdc run`` would: nothing is lost or written twice.
Once the attempts are spent it exits 2, naming how far the lake is and that a restart
resumes from there. Terminal errors are never retried.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from cdc_core.capture.position import Position
from cdc_core.errors import TransientError
from cdc_core.pipeline.checkpoint import read_checkpoint
from cdc_core.pipeline.config import PipelineSetup, RetryPolicy, load_pipeline_config
from cdc_core.pipeline.loop import Pipeline
from cdc_core.pipeline.metrics import LoadFigures, PipelineMetrics
from connectors.pipeline import open_pipeline
from connectors.registry import log_status_for
from validator.commands.cdc_status import holds_words

logger = logging.getLogger(__name__)
PROGRESS_EVERY_S = 5.0
STOP_POLL_S = 0.1  # how soon a wait between attempts notices SIGTERM/SIGINT


def run_pipeline(
    config_path: Path,
    name: str,
    *,
    until_caught_up: bool = False,
    overrides: dict[str, str] | None = None,
) -> Position | None:
    """Run the named pipeline of a config file; returns the position the lake reached.

    Raises:
        TransientError: The source stayed lost through every attempt of ``retry``.
    """
    setup = load_pipeline_config(config_path, name, overrides)
    run = _Run(config_path, name, overrides, until_caught_up)
    with _stop_on_signals(run.stop):
        reached = _run_retrying(run, setup)
    holds = holds_words(setup)
    logger.info("pipeline %s stopped cleanly; %s holds everything up to %s", name, holds, reached)
    _warn_while_stopped(setup, reached)
    return reached


def reached_line(
    config_path: Path, name: str, reached: Position | None, overrides: dict[str, str] | None
) -> str:
    """The line ``cdc run`` ends with: what the lake (or the database target) holds."""
    holds = holds_words(load_pipeline_config(config_path, name, overrides))
    if reached is None:
        return f"pipeline {name}: {holds} holds nothing yet (the source wrote nothing)"
    return f"pipeline {name}: {holds} holds everything up to position {reached}"


def _warn_while_stopped(setup: PipelineSetup, reached: Position | None) -> None:
    """Say what the stopped pipeline costs its source: a PostgreSQL slot keeps WAL growing,
    MariaDB purges the binlog it resumes from after a while (``LogStatus.while_stopped``)."""
    url = setup.source.url
    reader = log_status_for(url) if url is not None else None
    if url is None or reader is None:
        return
    password = setup.source.password.reveal() if setup.source.password else None
    checkpoint = read_checkpoint(setup.config.state_dir)
    resume_at = checkpoint.resume_at if checkpoint is not None else None
    try:
        status = reader(url, password, reached, resume_at or reached)
    except Exception as exc:  # only a warning is lost: the run itself ended well
        logger.info("the source's log retention could not be read (%s)", type(exc).__name__)
        return
    if status.while_stopped is not None:
        logger.warning("pipeline %s stopped: %s", setup.config.name, status.while_stopped)


class _Run:
    """One ``cdc run``: its pipeline, opened again from the checkpoint after a lost source."""

    def __init__(
        self,
        config_path: Path,
        name: str,
        overrides: dict[str, str] | None,
        until_caught_up: bool,
    ) -> None:
        self.config_path, self.name, self.overrides = config_path, name, overrides
        self.until_caught_up = until_caught_up
        self.stop_requested = False  # a plain flag: the signal handler must take no lock
        self._pipeline: Pipeline | None = None
        self._until: Position | None = None  # the source's end when the first attempt ran

    def stop(self) -> None:
        """Stop the pipeline running, or the wait for the next attempt (signal handler)."""
        self.stop_requested = True
        pipeline = self._pipeline
        if pipeline is not None:
            pipeline.stop()

    def attempt(self) -> Position | None:
        """Open the pipeline (it resumes from its checkpoint) and run it until it stops."""
        with open_pipeline(self.config_path, self.name, overrides=self.overrides) as pipeline:
            self._pipeline = pipeline
            try:
                if self.stop_requested:  # asked before the pipeline was there to be told
                    pipeline.stop()
                with _progress(pipeline):
                    reached = self._run(pipeline)
            finally:
                self._pipeline = None
            return reached or pipeline.metrics().position  # an initial load's snapshot

    def _run(self, pipeline: Pipeline) -> Position | None:
        if not self.until_caught_up:
            return pipeline.run()
        if self._until is None:  # later attempts stop where the first one would have
            self._until = pipeline.end_position()
        return pipeline.run_until(self._until)

    def wait(self, seconds: float) -> bool:
        """Wait ``seconds``, or less once a stop is asked for; True: it was."""
        deadline = time.monotonic() + seconds
        while not self.stop_requested and (left := deadline - time.monotonic()) > 0:
            time.sleep(min(left, STOP_POLL_S))
        return self.stop_requested


@dataclass(slots=True)
class _Outage:
    """A source lost since ``since`` (monotonic): its first error, the latest, attempts."""

    first: TransientError
    since: float
    latest: TransientError
    attempts: int = 0


def _run_retrying(run: _Run, setup: PipelineSetup) -> Position | None:
    """Attempts until one ends by itself; a lost source is retried within ``setup.retry``.

    The count of attempts starts again once an attempt has moved the lake on (its
    checkpoint advanced), so a service that runs for months survives many short outages.
    """
    policy = setup.retry
    outage: _Outage | None = None
    while True:
        before = _held(setup)
        try:
            return run.attempt()
        except TransientError as exc:
            if run.stop_requested:
                raise
            if _held(setup) is None:  # never reached (a wrong URL?): said at once
                raise _never_reached(exc) from exc
            if outage is None or _held(setup) != before:
                outage = _Outage(exc, time.monotonic(), exc)
            outage.latest = exc
            if outage.attempts >= policy.attempts:
                raise _gave_up(outage, policy, setup) from exc
            outage.attempts += 1
            wait = policy.wait_before(outage.attempts)
            logger.warning(
                "source %s unreachable (%s); retrying in %s s, attempt %d of %d",
                setup.source.display(),
                _first_line(exc),
                f"{wait:g}",
                outage.attempts,
                policy.attempts,
            )
            if run.wait(wait):
                return _held(setup)  # stopped while waiting: the target holds that far


def _never_reached(exc: TransientError) -> TransientError:
    """A pipeline that never reached its source (no checkpoint yet) is not waited for: a
    wrong URL would otherwise cost minutes of retries before its error."""
    message = f"{exc.message}; not retried: the pipeline has never reached its source (no"
    message += " checkpoint yet; check its URL and that it is up; once it has, a lost source"
    message += " is retried as pipelines[].retry says)"
    return TransientError(message, exc.context)


def _held(setup: PipelineSetup) -> Position | None:
    """The position the pipeline's checkpoint says its target holds everything up to."""
    if not setup.config.state_dir.is_dir():  # open_pipeline names what is wrong with it
        return None
    checkpoint = read_checkpoint(setup.config.state_dir)
    return checkpoint.lake_position if checkpoint is not None else None


def _gave_up(outage: _Outage, policy: RetryPolicy, setup: PipelineSetup) -> TransientError:
    """The error ``cdc run`` exits 2 with: what was lost, what was tried, how far the target
    is, and that a restart resumes from there."""
    if policy.attempts == 0:
        tried = "not retried (pipelines[].retry.attempts is 0)"
    else:
        seconds = time.monotonic() - outage.since
        tried = (
            f"still unreachable after {outage.attempts} attempts over {seconds:.0f} s"
            f" ({_first_line(outage.latest)}; pipelines[].retry sets the attempts and waits)"
        )
    holds = holds_words(setup)
    target = holds[0].upper() + holds[1:]
    held = _held(setup)
    if held is None:
        resume = f"{target} holds nothing yet; once the source is back, `replcheck cdc run`"
        resume += " started again loads it anew"
    else:
        resume = f"{target} holds every change up to {held}; once the source is back,"
        resume += " `replcheck cdc run` started again resumes from there"
    message = f"{outage.first.message}; {tried}. {resume}"
    return TransientError(message, outage.first.context)


def _first_line(error: TransientError) -> str:
    lines = error.message.strip().splitlines()
    return lines[0] if lines else type(error).__name__


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
    line = (
        f"position {figures.position}, {figures.events} events"
        f" ({figures.events_per_second:.0f}/s lately), lag {_lag_text(figures.lag_seconds)},"
        f" {figures.open_transactions} open transactions"
    )
    if figures.oldest_open is not None:
        txid, begin, changes = figures.oldest_open
        age = figures.oldest_open_age_seconds or 0.0
        line += f" (oldest {txid} from {begin}, {age:.0f} s, {changes} changes)"
    return line + f", {figures.spilled_bytes} bytes spilled"


def _lag_text(seconds: float | None) -> str:
    """``0 (caught up)`` at the source's log end, else how old the newest commit written is."""
    if seconds is None:
        return "-"
    return "0 (caught up)" if seconds == 0 else f"{seconds:.1f} s"


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
