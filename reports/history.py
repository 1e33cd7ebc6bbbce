"""Run history: one summary per validation run, kept so reports can show drift over time.

A nightly job's report should tell whether drift is new, growing or shrinking, so each run
appends a :class:`RunSummary` (counts only, never row values) to a history store and the HTML
report draws the last runs as a trend per comparison. Two stores implement
:class:`HistoryStore`:

* :class:`DeltaHistory`, a Delta table with one row per (run, comparison), used when a lake
  is configured: it lives with the data it describes, survives the machine running the job,
  and can be queried with Spark or SQL.
* :class:`JsonLinesHistory`, one JSON line per run in a local file, used without a lake.

:func:`history_for` chooses between them; :func:`record_run` is what a command that runs a
validation calls, :func:`trend_before` what one that re-renders a stored result calls.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import IO, TYPE_CHECKING, Any, Protocol
from urllib.parse import unquote

from cdc_core.files import open_for_append
from cdc_core.lake_location import LakeLocation, as_location

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger(__name__)

STATUSES = ("in_sync", "differences", "error")
DEFAULT_RUNS = 30
LAKE_HISTORY = ("_replcheck", "history")
JSONL_NAME = "history.jsonl"


class Drift(StrEnum):
    """How a comparison's differences moved since the run before (see :func:`classify`)."""

    NEW = "new"
    GROWING = "growing"
    SHRINKING = "shrinking"
    STEADY = "steady"
    RESOLVED = "resolved"


@dataclass(frozen=True, slots=True)
class ComparisonSummary:
    """What the history keeps of one comparison of a run.

    Attributes:
        status: ``in_sync``, ``differences`` or ``error``.
        differences_total: Differences counted (0 when the comparison failed).
        counts_by_kind: Differences per kind, as in ``result.json``.
    """

    status: str
    differences_total: int
    counts_by_kind: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown comparison status {self.status!r}")
        if self.differences_total < 0:
            raise ValueError("differences_total must be >= 0")
        # Read-only copy: the summary is a value, a caller's dict must not change it.
        object.__setattr__(self, "counts_by_kind", MappingProxyType(dict(self.counts_by_kind)))

    def to_dict(self) -> dict[str, Any]:
        """The JSON form ``{"status", "differences_total", "counts_by_kind"}``."""
        return {
            "status": self.status,
            "differences_total": self.differences_total,
            "counts_by_kind": dict(self.counts_by_kind),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ComparisonSummary:
        """The inverse of :meth:`to_dict`."""
        counts = {str(kind): int(count) for kind, count in data["counts_by_kind"].items()}
        return cls(str(data["status"]), int(data["differences_total"]), counts)


@dataclass(frozen=True, slots=True)
class RunSummary:
    """One validation run as the history keeps it.

    Attributes:
        finished: When the run finished, ISO 8601 in UTC (normalised, so stores agree).
        status: The run's overall status.
        comparisons: Comparison name -> its summary, in the run's order.
    """

    finished: str
    status: str
    comparisons: Mapping[str, ComparisonSummary]

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown run status {self.status!r}")
        object.__setattr__(self, "finished", _utc_text(self.finished))
        object.__setattr__(self, "comparisons", MappingProxyType(dict(self.comparisons)))

    @property
    def finished_at(self) -> dt.datetime:
        """``finished`` as an aware datetime (for ordering)."""
        return dt.datetime.fromisoformat(self.finished)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: ``{"finished", "status", "comparisons": {name: {...}}}``."""
        comparisons = {name: c.to_dict() for name, c in self.comparisons.items()}
        return {"finished": self.finished, "status": self.status, "comparisons": comparisons}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunSummary:
        """The inverse of :meth:`to_dict`."""
        comparisons = {
            str(name): ComparisonSummary.from_dict(c) for name, c in data["comparisons"].items()
        }
        return cls(str(data["finished"]), str(data["status"]), comparisons)


def summarize(result: Mapping[str, Any]) -> RunSummary:
    """The history summary of a ``result.json`` document (counts only, no row values)."""
    comparisons = {
        c["name"]: ComparisonSummary(c["status"], c["differences_total"], c["counts_by_kind"])
        for c in result["comparisons"]
    }
    return RunSummary(result["finished"], result["status"], comparisons)


class HistoryStore(Protocol):
    """Where run summaries are kept."""

    def append(self, summary: RunSummary) -> None:
        """Add one run."""
        ...

    def read_last(self, runs: int) -> list[RunSummary]:
        """The last ``runs`` runs by finish time, oldest first."""
        ...


@dataclass(frozen=True, slots=True)
class JsonLinesHistory:
    """Run summaries as JSON lines (one run per line) in a local file.

    A run interrupted while appending can leave a truncated last line: reading skips any
    line that does not parse (with a warning naming its number, never its text), and the
    next append starts on a new line so it is not glued to the fragment.

    Attributes:
        path: The ``.jsonl`` file; created with its directory on the first append.
    """

    path: Path

    def append(self, summary: RunSummary) -> None:
        """Append ``summary`` as one line."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(summary.to_dict(), ensure_ascii=False, separators=(",", ":")) + "\n"
        with os.fdopen(open_for_append(self.path, readable=True), "a+b") as file:
            if file.tell() > 0 and not _ends_with_newline(file):
                line = "\n" + line
            file.write(line.encode("utf-8"))

    def read_last(self, runs: int) -> list[RunSummary]:
        """The last ``runs`` runs by finish time, oldest first; [] without a file.

        The whole file is read: a year of nightly runs is a few megabytes at most.
        """
        if runs <= 0 or not self.path.exists():
            return []
        summaries = sorted(self._iter_summaries(), key=lambda s: s.finished_at)
        return summaries[-runs:]

    def _iter_summaries(self) -> Iterator[RunSummary]:
        with self.path.open(encoding="utf-8", errors="replace") as file:
            for number, line in enumerate(file, start=1):
                if not line.strip():
                    continue
                try:
                    yield RunSummary.from_dict(json.loads(line))
                except (ValueError, KeyError, TypeError, AttributeError):
                    log.warning("history %s: skipping unreadable line %d", self.path, number)


def _ends_with_newline(file: IO[bytes]) -> bool:
    file.seek(-1, 2)
    ends = bool(file.read(1) == b"\n")
    file.seek(0, 2)
    return ends


@dataclass(frozen=True, slots=True)
class DeltaHistory:
    """Run summaries in a Delta table, one row per (run, comparison).

    Columns: ``run_id`` (one per run), ``finished`` (UTC timestamp), ``run_status``,
    ``comparison``, ``status``, ``differences_total``, ``counts_by_kind`` (map kind ->
    count). A run without comparisons is one row with a NULL ``comparison``, so it still
    counts as a run. Every append is one Delta commit; concurrent appends do not conflict.

    Attributes:
        path: The Delta table's directory (or place in an object store); created on the
            first append.
    """

    path: Path | LakeLocation

    def append(self, summary: RunSummary) -> None:
        """Append ``summary`` in one commit."""
        where = as_location(self.path)
        if where.is_local:
            where.local_path.mkdir(parents=True, exist_ok=True)
        where.write_delta(_to_arrow(summary), mode="append")

    def read_last(self, runs: int) -> list[RunSummary]:
        """The last ``runs`` runs by finish time, oldest first; [] without a table.

        Only the files that may hold them are read (``_newest_rows``): a nightly job's
        history grows by a file a night, and reading them all made every report slower.
        """
        where = as_location(self.path)
        if runs <= 0 or not where.join("_delta_log").is_dir():
            return []
        actions = where.open_delta().get_add_actions(flatten=True)
        rows = _newest_rows(where, actions, runs)
        finished = sorted({row["finished"] for row in rows})
        if not finished:
            return []
        cutoff = finished[-min(runs, len(finished))]
        return _from_rows([row for row in rows if row["finished"] >= cutoff])[-runs:]


# Delta's statistics keep a timestamp to the millisecond: a file's newest run may be up to
# a millisecond past its statistic.
_STATISTIC_SLACK = dt.timedelta(milliseconds=1)


def _newest_rows(where: LakeLocation, actions: Any, runs: int) -> list[dict[str, Any]]:
    """The rows of the table's files read newest first (by their ``finished`` statistics;
    a file without them first), until the ``runs`` newest runs are read and no file left
    can hold a newer one. ``actions``: ``DeltaTable.get_add_actions(flatten=True)``."""
    import pyarrow.parquet as pq

    newest = actions.column("max.finished").to_pylist()
    paths = actions.column("path").to_pylist()
    unknown = dt.datetime.max.replace(tzinfo=dt.UTC)
    rows: list[dict[str, Any]] = []
    seen: set[dt.datetime] = set()
    for index in sorted(range(len(paths)), key=lambda i: newest[i] or unknown, reverse=True):
        stat = newest[index]
        if len(seen) >= runs and stat is not None and stat + _STATISTIC_SLACK < sorted(seen)[-runs]:
            break
        file, filesystem = where.file_of(where.join(unquote(paths[index])).url)
        read = pq.read_table(file, filesystem=filesystem, schema=_arrow_schema())
        rows.extend(read.to_pylist())
        seen.update(read.column("finished").to_pylist())
    return rows


def _arrow_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("run_id", pa.string(), nullable=False),
            pa.field("finished", pa.timestamp("us", tz="UTC"), nullable=False),
            pa.field("run_status", pa.string(), nullable=False),
            pa.field("comparison", pa.string()),
            pa.field("status", pa.string()),
            pa.field("differences_total", pa.int64()),
            pa.field("counts_by_kind", pa.map_(pa.string(), pa.int64())),
        ]
    )


def _to_arrow(summary: RunSummary) -> pa.Table:
    import pyarrow as pa

    run = {
        "run_id": uuid.uuid4().hex,
        "finished": summary.finished_at,
        "run_status": summary.status,
    }
    rows = [
        {
            **run,
            "comparison": name,
            "status": c.status,
            "differences_total": c.differences_total,
            "counts_by_kind": list(c.counts_by_kind.items()),
        }
        for name, c in summary.comparisons.items()
    ]
    return pa.Table.from_pylist(rows or [run], schema=_arrow_schema())


def _from_rows(rows: Sequence[Mapping[str, Any]]) -> list[RunSummary]:
    """Rows of ``DeltaHistory`` grouped back into runs, oldest first."""
    runs: dict[str, dict[str, Any]] = {}
    for row in rows:
        run = runs.setdefault(
            row["run_id"],
            {"finished": row["finished"].isoformat(), "status": row["run_status"], "cmp": {}},
        )
        if row["comparison"] is not None:
            counts = dict(row["counts_by_kind"] or [])
            run["cmp"][row["comparison"]] = ComparisonSummary(
                row["status"], row["differences_total"], counts
            )
    summaries = [RunSummary(r["finished"], r["status"], r["cmp"]) for r in runs.values()]
    return sorted(summaries, key=lambda s: s.finished_at)


def history_for(lake: Path | LakeLocation | None, out_dir: Path) -> HistoryStore:
    """The history store of a run writing its outputs to ``out_dir``.

    With a lake, the history is a Delta table at ``<lake>/_replcheck/history``: it stays
    with the data it describes, whichever machine runs the job. Without one it is
    ``<out_dir>/../history.jsonl``, next to the output directory rather than in it, so a
    nightly job that writes each run to a fresh (e.g. dated) directory, or clears its
    output directory, keeps one history across runs.

    Args:
        lake: The lake's root directory (or object-store location), or None when no lake
            is configured.
        out_dir: The run's output directory (where ``result.json`` goes).
    """
    if lake is not None:
        where = as_location(lake).join(*LAKE_HISTORY)
        return DeltaHistory(where.place())
    return JsonLinesHistory(out_dir.parent / JSONL_NAME)


def to_trend_input(summaries: Sequence[RunSummary]) -> list[dict[str, Any]]:
    """Past runs in the shape ``reports.html.build_html_report(history=...)`` takes.

    ``[{"finished": ISO 8601, "comparisons": {name: differences_total}}]``, oldest first.
    Failed comparisons are left out: their 0 differences means "not known", not "in sync".
    """
    ordered = sorted(summaries, key=lambda s: s.finished_at)
    return [
        {
            "finished": s.finished,
            "comparisons": {
                name: c.differences_total
                for name, c in s.comparisons.items()
                if c.status != "error"
            },
        }
        for s in ordered
    ]


def record_run(
    store: HistoryStore, result: Mapping[str, Any], runs: int = DEFAULT_RUNS
) -> list[dict[str, Any]]:
    """Append a run to ``store`` and return the trend input of the ``runs`` runs before it.

    Only runs that finished before this one count as its past, and a run already in the
    store (same finish time, e.g. a retried job step) is not appended twice.

    Args:
        store: The history store (see :func:`history_for`).
        result: The run's ``result.json`` document.
        runs: How many past runs the trend shows.

    Returns:
        The ``history`` argument for ``build_html_report``.
    """
    current = summarize(result)
    recent = store.read_last(runs + 1)
    if all(s.finished_at != current.finished_at for s in recent):
        store.append(current)
    return _before(recent, current, runs)


def trend_before(
    store: HistoryStore, result: Mapping[str, Any], runs: int = DEFAULT_RUNS
) -> list[dict[str, Any]]:
    """Like :func:`record_run` without appending: for re-rendering a stored result.

    Only the newest ``runs + 1`` runs in ``store`` are considered, so an old result
    re-rendered after many newer runs gets no trend.
    """
    return _before(store.read_last(runs + 1), summarize(result), runs)


def _before(recent: Sequence[RunSummary], current: RunSummary, runs: int) -> list[dict[str, Any]]:
    return to_trend_input([s for s in recent if s.finished_at < current.finished_at][-runs:])


def classify(counts: Sequence[int]) -> Drift | None:
    """How the newest of ``counts`` (oldest first) moved from the one before it.

    ``new``: none before, some now; ``resolved``: some before, none now; ``growing`` /
    ``shrinking``: more / fewer than before (some both times); ``steady``: the same.
    None with fewer than two counts: there is no earlier run to compare with.
    """
    if len(counts) < 2:
        return None
    before, now = counts[-2], counts[-1]
    if before == now:
        return Drift.STEADY
    if before == 0:
        return Drift.NEW
    if now == 0:
        return Drift.RESOLVED
    return Drift.GROWING if now > before else Drift.SHRINKING


def _utc_text(text: str) -> str:
    moment = dt.datetime.fromisoformat(text)
    if moment.tzinfo is None:
        raise ValueError(f"finished time {text!r} has no time zone")
    return moment.astimezone(dt.UTC).isoformat()
