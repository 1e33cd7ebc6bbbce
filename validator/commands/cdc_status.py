"""``replcheck cdc status``: how a pipeline stands, read without running or changing it.

It reads the pipeline's state directory (its checkpoint, read-only: a version-1 checkpoint
is not migrated here; the lock, to tell whether a run holds it) and asks the source's
product where its log ends and what it keeps for the pipeline (``connectors/<product>/
log_status.py``): the position the target holds, the commit time of the newest transaction
there, the lag (the log's bytes between that position and the log's end; 0 when caught up,
or when none of them is a change of a captured table, which the product's ``QuietLog``
tells for a stopped pipeline), and the retention (a PostgreSQL slot's ``wal_status`` and
retained bytes, MariaDB's binlog files and expiry).

Every finding is healthy, needs attention, or cannot be told; the command exits with the
worst: 0 healthy, 1 attention needed, 2 cannot tell (``Health``). Positions are spelled by
the source product's one function (``Position.text``, from its ``position.py``), URLs
masked (``ConnectionConfig.display``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import IntEnum
from pathlib import Path

from cdc_core.capture.position import Position
from cdc_core.config import mask_url
from cdc_core.errors import ReplcheckError
from cdc_core.pipeline.checkpoint import Checkpoint
from cdc_core.pipeline.config import PipelineSetup, load_pipeline_config
from cdc_core.state.directory import StateDirectory
from cdc_core.state.lock import holder
from connectors.model import LogStatus
from connectors.registry import log_status_for, quiet_log_for


class Health(IntEnum):
    """How a finding stands; its value is the command's exit code."""

    HEALTHY = 0
    ATTENTION = 1
    UNKNOWN = 2


@dataclass(frozen=True, slots=True)
class Finding:
    """One line of a status: its topic, what it says, and how it stands."""

    topic: str
    text: str
    health: Health = Health.HEALTHY


@dataclass(frozen=True, slots=True)
class PipelineStatus:
    """A pipeline's findings, in the order they are printed."""

    name: str
    findings: tuple[Finding, ...]

    @property
    def health(self) -> Health:
        """The worst finding's health (the exit code)."""
        return max((finding.health for finding in self.findings), default=Health.HEALTHY)

    def lines(self) -> list[str]:
        """The status as printed: one line per finding, then the verdict."""
        lines = [f"{finding.topic}: {finding.text}" for finding in self.findings]
        return [*lines, self.verdict()]

    def verdict(self) -> str:
        """The last line: healthy, or which topics need attention or cannot be told."""
        health = self.health
        if health is Health.HEALTHY:
            return f"pipeline {self.name}: healthy"
        topics = ", ".join(f.topic for f in self.findings if f.health is health)
        said = "attention needed" if health is Health.ATTENTION else "cannot tell"
        return f"pipeline {self.name}: {said} ({topics})"


@dataclass(frozen=True, slots=True)
class _State:
    """What the state directory says: its checkpoint, who runs the pipeline, and how."""

    checkpoint: Checkpoint | None
    running: str | None
    findings: tuple[Finding, ...]


def pipeline_status(
    config_path: Path, name: str, overrides: dict[str, str] | None = None
) -> PipelineStatus:
    """The status of the named pipeline of a config file (nothing is written anywhere)."""
    setup = load_pipeline_config(config_path, name, overrides)
    findings = [Finding(f"pipeline {name}", _route(setup))]
    state = _read_state(setup)
    findings += state.findings
    if state.checkpoint is not None:
        findings += _position_findings(setup, state.checkpoint)
        findings += _log_findings(setup, state.checkpoint, state.running)
    return PipelineStatus(name, tuple(findings))


def _route(setup: PipelineSetup) -> str:
    return f"{setup.source.display()} -> {setup.target.display()}"


def holds_words(setup: PipelineSetup) -> str:
    """Who holds the pipeline's changes: "the lake", or "the target <database>"."""
    return "the lake" if setup.target.is_lake else f"the target {setup.target.display()}"


# -- the state directory --------------------------------------------------------------------


def _read_state(setup: PipelineSetup) -> _State:
    """The state directory's checkpoint and lock, read without writing either."""
    directory = setup.config.state_dir
    if not directory.is_dir():
        what = "is not a directory" if directory.exists() else "does not exist"
        text = f"{directory} {what}: the pipeline never ran with this state_dir, or it was"
        text += " removed (a `cdc run` would load every table anew)"
        return _State(None, None, (Finding("state directory", text, Health.UNKNOWN),))
    running = holder(directory)
    said = f"yes ({running})" if running else "no (no process holds the state directory)"
    run = Finding("running", said)
    checkpoint, found = _read_checkpoint(setup, directory, running)
    return _State(checkpoint, running, (found, run))


def _read_checkpoint(
    setup: PipelineSetup, directory: Path, running: str | None
) -> tuple[Checkpoint | None, Finding]:
    path = StateDirectory(directory).checkpoint
    topic = "state directory"
    if not path.is_file():
        if running:  # an initial load writes its first checkpoint when it is done
            return None, Finding(topic, f"{directory}: no checkpoint yet (the first run loads)")
        text = f"{directory} holds no checkpoint ({path}): the pipeline never finished a batch"
        return None, Finding(topic, text, Health.UNKNOWN)
    try:
        checkpoint = Checkpoint.from_bytes(path.read_bytes(), path)
    except (ReplcheckError, OSError) as exc:
        return None, Finding(topic, f"{directory}: {_message(exc)}", Health.UNKNOWN)
    if checkpoint.pipeline != setup.config.name:
        text = f"{directory} belongs to pipeline {checkpoint.pipeline!r}, not this one"
        return None, Finding(topic, text, Health.UNKNOWN)
    if not os.access(directory, os.W_OK):
        text = f"{directory} is not writable: the pipeline cannot record its checkpoints"
        return checkpoint, Finding(topic, text, Health.ATTENTION)
    return checkpoint, Finding(topic, f"{directory}: checkpoint of {_when(_mtime(path))}")


# -- where the target is ----------------------------------------------------------------------


def _position_findings(setup: PipelineSetup, checkpoint: Checkpoint) -> list[Finding]:
    held = checkpoint.lake_position
    where = holds_words(setup)
    said = "nothing yet" if held is None else f"everything up to position {held}"
    last = checkpoint.last_commit
    committed = f"committed at the source {_when(last)}" if last else "none written yet"
    return [Finding("position", f"{where} holds {said}"), Finding("last commit", committed)]


# -- the source's log -------------------------------------------------------------------------


def _log_findings(
    setup: PipelineSetup, checkpoint: Checkpoint, running: str | None
) -> list[Finding]:
    url, password = _source(setup)
    reader = log_status_for(url)
    if reader is None:
        text = "not measured for this source (trigger capture, or a product without a log)"
        return [Finding("lag", text)]
    held = checkpoint.lake_position
    resume_at = checkpoint.resume_at or held
    try:
        status = reader(url, password, held, resume_at)
    except Exception as exc:  # any failure to read the source: it cannot be told
        text = f"cannot read the log of {setup.source.display()}: {_message(exc)}"
        return [Finding("source", text, Health.UNKNOWN)]
    findings = [_lag(setup, checkpoint, status, running), _retention(status)]
    if not running and status.while_stopped:
        findings.append(Finding("while stopped", status.while_stopped))
    return findings


def _lag(
    setup: PipelineSetup, checkpoint: Checkpoint, status: LogStatus, running: str | None
) -> Finding:
    """The log's bytes between the target's position and its end: 0 once caught up (or when
    none of them changes a captured table: a stopped pipeline has nothing to read)."""
    held, behind = checkpoint.lake_position, status.behind_bytes
    if held is None or behind is None:
        return Finding("lag", f"not known (the log ends at {status.end})")
    if behind == 0:
        return Finding("lag", f"0 (caught up with the log's end, {status.end})")
    moved = f"the log moved on {behind:,} bytes to {status.end}"
    if not running:
        why = _changes_since(setup, checkpoint, held, status.end)
        if why is None:
            return Finding("lag", f"0 (caught up: {moved}, none of them a captured change)")
        text = f"{behind:,} bytes of log to {status.end} ({why}) and the pipeline is stopped;"
        text += " start `replcheck cdc run`"
        return Finding("lag", text, Health.ATTENTION)
    return Finding("lag", f"{behind:,} bytes of log to its end, {status.end}")


def _changes_since(
    setup: PipelineSetup, checkpoint: Checkpoint, held: Position, end: Position
) -> str | None:
    """Why the log may hold a change of a captured table after ``held`` (None: it does not,
    as the product's ``QuietLog`` reads it)."""
    url, password = _source(setup)
    try:
        quiet = quiet_log_for(url, password)
    except Exception as exc:  # a log it cannot read: the lag stands as counted
        return f"its log cannot be read between the positions: {_message(exc)}"
    if quiet is None:
        return "its product cannot tell which tables they change"
    for table in _captured(setup, checkpoint):
        try:
            why = quiet(table, held.value, end.value)
        except Exception as exc:  # a log it cannot read: the lag stands as counted
            return f"its log cannot be read between the positions: {_message(exc)}"
        if why is not None:
            return why
    return None


def _captured(setup: PipelineSetup, checkpoint: Checkpoint) -> list[str]:
    """The tables the pipeline captures, as its checkpoint and config name them."""
    named = [t for t in setup.config.tables.accept if not any(c in t for c in "*?[")]
    known = {*checkpoint.loaded, *checkpoint.keys, *checkpoint.shapes}
    return sorted(known.union(named) if setup.config.tables.policy == "drop" else known)


def _retention(status: LogStatus) -> Finding:
    if status.attention is not None:
        return Finding("retention", f"{status.retention}; {status.attention}", Health.ATTENTION)
    return Finding("retention", status.retention)


# -- small helpers ----------------------------------------------------------------------------


def _source(setup: PipelineSetup) -> tuple[str, str | None]:
    connection = setup.source
    assert connection.url is not None  # a pipeline's source is a database connection
    password = connection.password.reveal() if connection.password else None
    return connection.url, password


def _message(exc: BaseException) -> str:
    """An error's first line, any URL in it masked (driver messages may quote one)."""
    text = exc.message if isinstance(exc, ReplcheckError) else f"{type(exc).__name__}: {exc}"
    lines = text.strip().splitlines()
    return mask_url(lines[0] if lines else type(exc).__name__)


def _mtime(path: Path) -> datetime:
    return datetime.fromtimestamp(path.stat().st_mtime, UTC)


def _when(moment: datetime) -> str:
    """``2026-05-01 12:00:03 UTC (35 s ago)``."""
    age = max((datetime.now(UTC) - moment).total_seconds(), 0.0)
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC ({age:,.0f} s ago)"
