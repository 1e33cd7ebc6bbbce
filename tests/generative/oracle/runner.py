"""Run a generated workload through the real pipeline and judge the lake against the model.

``check(workload)`` renders the workload as a LogMiner recording and replays it through
``cdc_core.pipeline.loop.Pipeline`` (buffer with spill, rebuild, key moves, table refresh, Delta
sink) into a lake in a temporary directory. The pipeline's source is the model itself
(``source``): its snapshot reader reads the tables as of an SCN, for the initial load and
for the table refreshes DDL triggers, and its ``fetch_unavailable`` hook reads values
LogMiner showed as ``Unsupported Type``. On the way the pipeline may be stopped or crash
(``Workload.interruptions``: after so many durable transactions, ``stop()`` or an exception
from its callback) and run again on its state, as a restarted service is. ``judge`` then
compares the lake with the model.

``shrink`` removes items, then operations, while the workload still fails, as hypothesis
does; ``main`` runs many seeds for a soak::

    python -m tests.generative.oracle.runner --seeds 1000 [--start N] [--without csf ...]

printing each failure's seed and shrunk stream, and a summary of seeds, transactions, DDL
statements and failures.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
import tempfile
import traceback
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from cdc_core.capture.filters import TableFilter
from cdc_core.capture.position import Position
from cdc_core.pipeline.loop import EmittedTransaction, Pipeline, PipelineConfig
from connectors.oracle.errors import DictionaryMismatchError
from tests.connectors.oracle.replay import ReplayConfig, ReplayLogReader, load_tables
from tests.generative.oracle.history import render
from tests.generative.oracle.judge import judge
from tests.generative.oracle.logminer_model import LogMiner, ModelOracleReader
from tests.generative.oracle.model import DdlScript, interpret
from tests.generative.oracle.source import (
    ClockedReader,
    ModelSnapshotReader,
    ModelUnavailable,
    SourceClock,
)
from tests.generative.oracle.tables import TABLES
from tests.generative.oracle.workload import (
    SIZE,
    Features,
    Interruption,
    Txn,
    Workload,
    generate,
)


@dataclasses.dataclass(frozen=True)
class Failure:
    """A failing seed: what went wrong, and the smallest workload that still fails."""

    seed: int
    problems: list[str]
    workload: Workload
    records: list[dict[str, object]]

    def report(self, features: Features) -> str:
        lines = [f"seed {self.seed} fails with features {features.names()}:"]
        lines += [f"  - {problem}" for problem in self.problems]
        lines += [f"workload knobs: {_knobs(self.workload)}"]
        lines += ["minimal stream (replay contents, one JSON object per line):"]
        lines += [json.dumps(record, default=str) for record in self.records]
        lines += ["tables file:", json.dumps(tables_document())]
        return "\n".join(lines)


def _knobs(workload: Workload) -> dict[str, object]:
    return {f.name: getattr(workload, f.name) for f in dataclasses.fields(workload)
            if f.name != "items"}  # fmt: skip


def tables_document() -> dict[str, object]:
    """The replay tables file: the tables as the recording starts."""
    return {
        spec.name: {"key": list(spec.key), "columns": [c.record() for c in spec.columns]}
        for spec in TABLES
    }


def records_of(workload: Workload, features: Features) -> list[dict[str, object]]:
    """The replay contents records of ``workload``."""
    return render(interpret(workload, features), features).records


def check(
    workload: Workload, features: Features, work: Path, seen: Counter[str] | None = None
) -> list[str]:
    """Run ``workload`` through the pipeline in ``work``; the problems found (none: pass).
    ``seen`` counts what the source served (``served``)."""
    history = render(interpret(workload, features), features)
    contents, tables = work / "contents.jsonl", work / "tables.json"
    contents.write_text("".join(json.dumps(r) + "\n" for r in history.records), encoding="utf-8")
    tables.write_text(json.dumps(tables_document()), encoding="utf-8")
    clock = SourceClock(history, workload.source_seed)
    reader: ReplayLogReader | ModelOracleReader = ReplayLogReader(ReplayConfig(contents, tables))
    if workload.log != "replay":  # the real reader loop, over the model served as LogMiner
        miner = LogMiner(history.records, workload.log, workload.source_seed)
        reader = ModelOracleReader(miner, load_tables(tables))
    source = Source(
        ClockedReader(reader, clock),
        ModelSnapshotReader(history, clock),
        ModelUnavailable(history),
    )
    try:
        reached = _replicate(workload, source, work)
    except DictionaryMismatchError as exc:
        if history.lagged:  # the refusal Features.ddl_lag expects, naming the fix
            return [] if "dictionary=redo_logs" in str(exc) else [f"refused unclearly: {exc}"]
        return [f"pipeline raised {type(exc).__name__}: {exc}"]
    except Exception as exc:  # any failure of the real pipeline is a finding
        where = traceback.extract_tb(exc.__traceback__)[-1]
        return [f"pipeline raised {type(exc).__name__} at {where.filename}:{where.lineno}: {exc}"]
    finally:
        if seen is not None:
            seen.update(source.served())
    if history.lagged:
        return [f"the pipeline carried {history.lagged} row(s) LogMiner could not render"]
    end = source.reader.end_position()
    stopped = (
        [] if reached == end else [f"the pipeline stopped at {reached}, the log ends at {end}"]
    )
    return stopped + judge(work / "lake", history)


@dataclasses.dataclass(frozen=True)
class Source:
    """The model as the pipeline's source; it outlives each pipeline run."""

    reader: ClockedReader
    snapshots: ModelSnapshotReader
    unavailable: ModelUnavailable
    interrupted: Counter[str] = dataclasses.field(default_factory=Counter)  # stop, crash

    def served(self) -> Counter[str]:
        """What the model served: refresh chunks (with rows, resumed after a key, ahead of
        the stream) and values read as of a commit; and the interruptions that happened."""
        found: Counter[str] = Counter(self.interrupted)
        for read in self.snapshots.reads:
            if not read.chunk:
                continue  # an initial load
            found["refresh_reads"] += 1
            found["refresh_rows"] += read.rows
            found["refresh_resumed"] += read.resumed
            found["refresh_ahead"] += read.lead > 1  # more than past a DDL's own commit
        found["unavailable_reads"] = self.unavailable.calls
        return found


class InjectedCrash(Exception):
    """The crash an ``Interruption`` injects."""


def _replicate(workload: Workload, source: Source, work: Path) -> Position | None:
    """Run the pipeline to the log's end, interrupted as the workload says on the way."""
    for interruption in workload.interruptions:
        _run_until(interruption, workload, source, work)
    return _pipeline(workload, source, work).run_until_caught_up()


def _run_until(interruption: Interruption, workload: Workload, source: Source, work: Path) -> None:
    durable = 0

    def count(transaction: EmittedTransaction) -> None:
        nonlocal durable
        durable += 1
        if durable != interruption.after:
            return
        source.interrupted[interruption.how] += 1
        if interruption.how == "crash":
            raise InjectedCrash(f"after {durable} durable transactions")
        pipeline.stop()

    pipeline = _pipeline(workload, source, work, count)
    with contextlib.suppress(InjectedCrash):
        pipeline.run_until_caught_up()


def _pipeline(
    workload: Workload,
    source: Source,
    work: Path,
    on_transaction: Callable[[EmittedTransaction], None] | None = None,
) -> Pipeline:
    names = [spec.name for spec in TABLES]
    config = PipelineConfig(
        "generative", work / "lake", work / "state", TableFilter.of_tables(names),
        memory_budget_bytes=workload.memory_budget_bytes,
        batch_max_events=workload.batch_max_events,
        fetch_unavailable=dict.fromkeys(names, source.unavailable),
        refresh_chunk_rows=workload.refresh_chunk_rows,
    )  # fmt: skip
    return Pipeline(config, source.reader, source.snapshots, on_transaction=on_transaction)


# -- shrinking ------------------------------------------------------------------------------


def shrink(workload: Workload, fails: Callable[[Workload], bool]) -> Workload:
    """The smallest workload found that still ``fails``: drop the interruptions it does not
    need, chunks of items, then single items, then operations of each transaction, until
    nothing more can go."""
    current = workload
    for interruption in workload.interruptions:
        kept = tuple(i for i in current.interruptions if i is not interruption)
        candidate = dataclasses.replace(current, interruptions=kept)
        if fails(candidate):
            current = candidate
    chunk = max(1, len(current.items) // 2)
    while chunk >= 1:
        current, dropped = _drop_chunks(current, chunk, fails)
        if not dropped:
            chunk //= 2
    return _drop_ops(current, fails)


def _drop_chunks(
    workload: Workload, size: int, fails: Callable[[Workload], bool]
) -> tuple[Workload, bool]:
    start, dropped = 0, False
    while start < len(workload.items):
        candidate = dataclasses.replace(
            workload, items=workload.items[:start] + workload.items[start + size :]
        )
        if candidate.items and fails(candidate):
            workload, dropped = candidate, True
        else:
            start += size
    return workload, dropped


def _drop_ops(workload: Workload, fails: Callable[[Workload], bool]) -> Workload:
    for index in range(len(workload.items)):
        item = workload.items[index]
        if not isinstance(item, Txn):
            continue
        op = 0
        while op < len(item.ops) and len(item.ops) > 1:
            smaller = dataclasses.replace(item, ops=item.ops[:op] + item.ops[op + 1 :])
            candidate = dataclasses.replace(
                workload, items=(*workload.items[:index], smaller, *workload.items[index + 1 :])
            )
            if fails(candidate):
                workload, item = candidate, smaller
            else:
                op += 1
    return workload


# -- seeds ----------------------------------------------------------------------------------


def check_seed(
    seed: int,
    features: Features,
    root: Path,
    *,
    minimize: bool = True,
    seen: Counter[str] | None = None,
    size: int = SIZE,
) -> Failure | None:
    """``None`` when seed ``seed`` (a workload of about ``size`` items) passes; else its
    failure, shrunk when ``minimize``. ``seen`` counts what the source served the first run."""
    workload = generate(seed, features, size)
    problems = _run(workload, features, root, seen)
    if not problems:
        return None
    if minimize:
        workload = shrink(workload, lambda w: bool(_run(w, features, root)))
        problems = _run(workload, features, root)
    return Failure(seed, problems, workload, records_of(workload, features))


def _run(
    workload: Workload, features: Features, root: Path, seen: Counter[str] | None = None
) -> list[str]:
    with tempfile.TemporaryDirectory(dir=root) as work:
        return check(workload, features, Path(work), seen)


def main(argv: list[str] | None = None) -> int:
    """Soak: run seeds, print each failure's seed and minimal stream, then a summary; exit 1
    if any seed failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--size", type=int, default=SIZE, help="items per workload")
    parser.add_argument("--with", dest="on", nargs="*", default=[], help="features to turn on")
    parser.add_argument("--without", dest="off", nargs="*", default=[], help="features to turn off")
    parser.add_argument("--no-shrink", action="store_true")
    args = parser.parse_args(argv)
    features = dataclasses.replace(
        Features(), **{name: True for name in args.on}, **{name: False for name in args.off}
    )
    seeds = range(args.start, args.start + args.seeds)
    failed, totals = [], Counter[str]()
    with tempfile.TemporaryDirectory() as root:
        for seed in seeds:
            totals += tally(generate(seed, features, args.size), features)
            shrinking = not args.no_shrink
            failure = check_seed(
                seed, features, Path(root), minimize=shrinking, seen=totals, size=args.size
            )
            if failure is not None:
                failed.append(seed)
                print(failure.report(features), flush=True)  # the soak's output
    print(
        f"seeds {seeds.start}..{seeds.stop - 1}: {len(seeds) - len(failed)} of {len(seeds)}"
        f" passed with {features.names()}; {totals['transactions']} transactions"
        f" ({totals['rolled_back']} rolled back), {totals['ddl']} DDL statements"
        f" ({totals['truncate']} truncates); the source served {totals['refresh_reads']}"
        f" refresh reads ({totals['refresh_rows']} rows) and {totals['unavailable_reads']}"
        f" values as of a commit; the pipeline stopped {totals['stop']} times and crashed"
        f" {totals['crash']} times; failed seeds: {failed or 'none'}"
    )
    return 1 if failed else 0


def tally(workload: Workload, features: Features) -> Counter[str]:
    """How many transactions and DDL statements ``workload`` runs."""
    found: Counter[str] = Counter()
    for item in interpret(workload, features).items:
        if isinstance(item, DdlScript):
            found["ddl"] += 1
            found["truncate"] += item.text.startswith("truncate")
        else:
            found["transactions"] += 1
            found["rolled_back"] += not item.commit
    return found


if __name__ == "__main__":
    sys.exit(main())
