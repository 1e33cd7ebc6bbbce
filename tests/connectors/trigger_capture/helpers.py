"""Helpers of the trigger capture tests: read a reader to its next ``Idle``, show raw changes
as compact tuples that tests compare exactly, and run ``replcheck`` as a user would (the
pipeline, and ``validate`` as the product's own judge of the lake)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from cdc_core.capture.events import Begin, Commit, RawChange, RowChange
from cdc_core.capture.position import Position
from cdc_core.capture.source import Idle, TableChanged
from tests.cdc_core.kill_loop import ROOT

Shown = tuple[object, ...]


def read_to_idle(
    changes: Iterator[RawChange | TableChanged | Idle],
) -> tuple[list[RawChange], Position | None]:
    """The raw changes up to the next ``Idle``, and the ``Idle``'s position."""
    read: list[RawChange] = []
    for item in changes:
        if isinstance(item, Idle):
            return read, item.position
        assert not isinstance(item, TableChanged)
        read.append(item)
    raise AssertionError("the reader stopped")


def show(change: RawChange) -> Shown:
    """A raw change as (kind, position, op/table/key/values): transaction ids are left out
    where the product makes them up."""
    if isinstance(change, Begin):
        return ("begin", change.position.value)
    if isinstance(change, Commit):
        return ("commit", change.position.value)
    assert isinstance(change, RowChange)
    image = change.after if change.after is not None else change.before
    shown = dict(image) if image is not None else {}
    return (change.op, change.position.value, change.table, change.locator, shown)


def transactions(changes: list[RawChange]) -> list[tuple[str, int, int]]:
    """(txid, commit position, row changes) per transaction, in the order read."""
    found: list[tuple[str, int, int]] = []
    count = 0
    for change in changes:
        if isinstance(change, RowChange):
            count += 1
        elif isinstance(change, Commit):
            found.append((change.txid, change.position.value, count))
            count = 0
    return found


def replcheck(*arguments: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run ``replcheck`` in a new process (as a user would)."""
    command = [sys.executable, "-m", "validator.cli", *arguments]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def start_replcheck(log: Path, *arguments: str) -> subprocess.Popen[bytes]:
    """Start ``replcheck`` in a new process writing to ``log``."""
    command = [sys.executable, "-m", "validator.cli", *arguments]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with log.open("ab") as output:
        return subprocess.Popen(command, cwd=ROOT, env=env, stdout=output, stderr=output)


def pipeline_config(work: Path, url: str, tables: list[str]) -> Path:
    """A config with pipeline ``p`` from ``url`` into ``work/lake``."""
    config = work / "pipeline.yaml"
    config.write_text(
        "connections:\n"
        f'  src: {{url: "{url}"}}\n'
        f"  lake: {{lake: {work / 'lake'}}}\n"
        "pipelines:\n"
        "  - name: p\n"
        "    source: src\n"
        "    target: lake\n"
        f"    tables: {tables}\n"
        f"    state_dir: {work / 'state'}\n"
        "    batch: {max_events: 200, max_seconds: 0.3}\n",
        encoding="utf-8",
    )
    return config


def validate_in_sync(config: Path, source_table: str, lake_table: str, out: Path) -> None:
    """Run ``replcheck validate`` of ``source_table`` against the lake of ``config`` (written
    by ``pipeline_config``) and fail unless it reports them in sync."""
    text = config.read_text(encoding="utf-8") + (
        "comparisons:\n"
        f"  - {{name: judged, source: {{connection: src, table: {source_table}}},"
        f" target: {{connection: lake, table: {lake_table}}}}}\n"
        "spark: {master: 'local[1]'}\n"
    )
    judged = config.with_name("validate.yaml")
    judged.write_text(text, encoding="utf-8")
    result = replcheck("validate", "-c", str(judged), "--out", str(out))
    document = json.loads((out / "result.json").read_text(encoding="utf-8"))
    counts = [c["counts_by_kind"] for c in document["comparisons"]]
    assert result.returncode == 0, (counts, result.stdout[-2000:], result.stderr[-2000:])
    assert document["status"] == "in_sync", counts
