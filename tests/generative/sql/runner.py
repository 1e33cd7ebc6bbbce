"""Run a generated workload on a real server while ``replcheck cdc run`` follows it, and judge.

``check`` creates the seed's database, runs the set-up, starts the pipeline (a subprocess,
which loads the tables from a snapshot and then follows the log), runs the items (a
``kill`` item SIGKILLs the pipeline and starts it again), stops it and runs it once more
until caught up, then asks both judges (``judge.py``). ``shrink`` removes items, then
statements, while the workload still fails, as hypothesis does; ``to_script`` prints the
result as SQL a person can paste into ``mariadb`` or ``psql``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import shutil
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from cdc_core.lake_location import LakeLocation
from cdc_core.names import format_table
from tests.generative.sql.judge import compare_all, resync, validate
from tests.generative.sql.pipeline import RUN_TIMEOUT_S, PipelineProcess, write_config
from tests.generative.sql.source import PUBLICATION, SeedDatabase, open_database
from tests.generative.sql.workload import SIZE, SOURCES, Item, Workload, generate
from tests.private_servers import MariaDBServer, PostgresServer

Server = MariaDBServer | PostgresServer
_NAMES = itertools.count()
OPENINGS = ("START TRANSACTION", "BEGIN")
# How long the validator waits for the running pipeline to reach it. The judges test
# equality, not speed: with this tester's small batches and refresh chunks a busy machine
# took over a minute to catch up (soak seeds 5011, 5014, 5028, 5041, load average 7), so the
# wait is the pipeline's own bound; a stuck pipeline still fails the seed, its stacks dumped.
LAKE_WAIT_S = float(RUN_TIMEOUT_S)
LATE_WAIT_S = 3.0  # the judges' own test: the stopped pipeline never reaches it


@dataclasses.dataclass
class Run:
    """Where a seed runs: its server, the Spark session of the validator (None: skip that
    judge), a scratch directory, and running totals."""

    server: Server
    spark: Any
    root: Path
    totals: Counter[str] = dataclasses.field(default_factory=Counter)
    keep: Path | None = None  # where a failing run's directory (log, configs, lake) is copied
    store: str | None = None  # an object-store URL: each seed's lake is a prefix below it


def check(workload: Workload, run: Run) -> list[str]:
    """The problems of ``workload`` (none: the lake equals the source, says each judge)."""
    kind = SOURCES[workload.source]
    name = f"gen_{workload.seed}_{next(_NAMES)}"
    database = open_database(kind, run.server, name)
    with tempfile.TemporaryDirectory(dir=run.root) as scratch:
        work = Path(scratch)
        lake = LakeLocation.from_config(f"{run.store}/{name}", {}) if run.store else work / "lake"
        config = write_config(
            work,
            database.pipeline_url(),
            database.pipeline_tables(),
            workload.memory_budget_mb,
            lake,
        )
        pipeline = PipelineProcess(config, work / "cdc.log", lake)
        try:
            problems = _run(workload, database, pipeline, run, work)
        except Exception as exc:  # the pipeline failing is a finding, not a crash of the tester
            where = traceback.extract_tb(exc.__traceback__)[-1]
            problems = [f"{type(exc).__name__} at {where.filename}:{where.lineno}: {exc}"]
        finally:
            pipeline.close()
            run.totals["kills"] += pipeline.kills
            run.totals["errors"] += len(database.errors)
            database.drop()
        if problems and run.keep is not None:
            shutil.copytree(work, run.keep / name, dirs_exist_ok=True)
        return problems


def _run(
    workload: Workload, database: SeedDatabase, pipeline: PipelineProcess, run: Run, work: Path
) -> list[str]:
    for sql in workload.setup:
        if not database.run_setup(sql):
            return [f"the set-up failed: {database.errors[-1]}"]
    pipeline.start()
    loaded = [format_table(database.schema(), table) for table in database.tables()]
    pipeline.wait_ready(loaded)  # the items run while the pipeline follows the log
    problems = []
    for item in workload.items:
        if item.kind == "resync":
            problems += resync(database, work, pipeline.lake, run.totals)
        elif item.kind != "late":
            _execute(item, database, pipeline)
    database.close()
    late = [item for item in workload.items if item.kind == "late"]
    if late:  # after the pipeline stopped: the judges' own test (both must see it)
        pipeline.finish()
        for item in late:
            _execute(item, database, pipeline)
        database.close()
    lake = pipeline.lake
    if run.spark is not None:
        # The validator compares at its own snapshot's position, waiting for the running
        # pipeline to bring the lake there (as in production).
        clock = time.monotonic()
        wait_s = LATE_WAIT_S if late else LAKE_WAIT_S
        with contextlib.nullcontext() if late else _while_running(pipeline):
            problems += validate(run.spark, database, database.plain_url(), lake, work, wait_s)
        run.totals["validate_ms"] += int((time.monotonic() - clock) * 1000)
        if any("is behind" in problem for problem in problems):
            pipeline.dump_stacks()  # where the pipeline is stuck, into its log
    if not late:
        pipeline.finish()
    return problems + compare_all(database, lake)


@contextlib.contextmanager
def _while_running(pipeline: PipelineProcess) -> Iterator[None]:
    """The validator waits for the lake only while the pipeline runs: one that died is the
    finding at once, not a wait of ``LAKE_WAIT_S`` for a lake that never comes (each step of
    shrinking a failing seed would wait again: postgres-default catalog seed 412)."""
    from validator import positions

    waits = positions.wait_for_position, positions.wait_for_lake_table

    def for_position(reached: Callable[[], int | None], *args: Any, **kwargs: Any) -> int:
        def checked() -> int | None:
            pipeline.check_running()
            return reached()

        return waits[0](checked, *args, **kwargs)

    def for_table(table: Any, timeout_s: float, poll_s: float = 1.0, sleep: Any = None) -> None:
        def checked(seconds: float) -> None:
            pipeline.check_running()
            (sleep or time.sleep)(seconds)

        waits[1](table, timeout_s, poll_s, checked)

    positions.wait_for_position, positions.wait_for_lake_table = for_position, for_table  # type: ignore[assignment]
    try:
        yield
    finally:
        positions.wait_for_position, positions.wait_for_lake_table = waits  # type: ignore[assignment]


def _execute(item: Item, database: SeedDatabase, pipeline: PipelineProcess) -> None:
    if item.kind == "kill":
        pipeline.kill()
        return
    failed = [step for step in item.steps if not database.run(step)]
    if failed:
        database.reset()


# -- shrinking ------------------------------------------------------------------------------


def shrink(workload: Workload, fails: Callable[[Workload], bool]) -> Workload:
    """The smallest workload found that still ``fails``: chunks of items, single items,
    then single statements that are not transaction control."""
    current, chunk = workload, max(1, len(workload.items) // 2)
    while chunk >= 1:
        current, dropped = _drop_chunks(current, chunk, fails)
        if not dropped:
            chunk //= 2
    return _drop_steps(current, fails)


def _drop_chunks(
    workload: Workload, size: int, fails: Callable[[Workload], bool]
) -> tuple[Workload, bool]:
    start, dropped = 0, False
    while start < len(workload.items):
        items = workload.items[:start] + workload.items[start + size :]
        candidate = dataclasses.replace(workload, items=items)
        if fails(candidate):
            workload, dropped = candidate, True
        else:
            start += size
    return workload, dropped


def _drop_steps(workload: Workload, fails: Callable[[Workload], bool]) -> Workload:
    for index in range(len(workload.items)):
        step = 0
        while step < len(workload.items[index].steps):
            item = workload.items[index]
            if item.steps[step].essential:
                step += 1
                continue
            smaller = dataclasses.replace(item, steps=item.steps[:step] + item.steps[step + 1 :])
            items = (*workload.items[:index], smaller, *workload.items[index + 1 :])
            candidate = dataclasses.replace(workload, items=items)
            if fails(candidate):
                workload = candidate
            else:
                step += 1
    return workload


def to_script(workload: Workload) -> str:
    """The workload as SQL to paste into ``mariadb``/``psql`` (sessions marked in comments)."""
    kind = SOURCES[workload.source]
    lines = [f"-- replcheck generative seed {workload.seed}, source {kind.name}"]
    if kind.product == "postgres":
        lines.append(f"{PUBLICATION};")
    lines += [f"{sql};" for sql in workload.setup]
    lines.append("-- start `replcheck cdc run` here (it loads the tables above)")
    for item in workload.items:
        if item.kind == "kill":
            lines.append("-- SIGKILL `replcheck cdc run` here and start it again")
            continue
        if item.kind == "resync":
            lines.append("-- run `replcheck validate`, then `replcheck resync --apply` here")
            continue
        sessions = {step.session for step in item.steps}
        for step in item.steps:
            marker = f"/* session {step.session} */ " if len(sessions) > 1 else ""
            lines.append(f"{marker}{step.sql};")
    lines.append(f"-- pipeline buffer: memory_budget_mb {workload.memory_budget_mb}")
    return "\n".join(lines)


# -- seeds ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Failure:
    seed: int
    source: str
    problems: list[str]
    workload: Workload

    def report(self) -> str:
        lines = [f"seed {self.seed} ({self.source}) fails:"]
        lines += [f"  - {problem}" for problem in self.problems[:20]]
        lines += ["minimal reproduction:", to_script(self.workload)]
        return "\n".join(lines)


def tally(workload: Workload) -> Counter[str]:
    """Statements, transactions, DDL statements and kills of ``workload``."""
    found: Counter[str] = Counter(statements=workload.statements())
    for item in workload.items:
        found["kill_items"] += item.kind == "kill"
        found["drift_items"] += item.kind == "drift"
        found["ddl"] += item.kind in ("ddl", "create")
        found["transactions"] += sum(
            step.sql in OPENINGS or step.sql.startswith("XA START") for step in item.steps
        ) + (item.kind == "autocommit")
    return found


def check_seed(
    seed: int,
    source: str,
    run: Run,
    *,
    size: int = SIZE,
    minimize: bool = True,
    resync: bool = False,
    vocabulary: str = "default",
) -> Failure | None:
    """``None`` when seed ``seed`` passes on ``source``; else its (shrunk) failure. With
    ``resync``, the workload drifts behind the log and is re-synced; ``vocabulary`` names
    the column kinds (``generate``)."""
    workload = generate(seed, source, size, resync=resync, vocabulary=vocabulary)
    run.totals += tally(workload)
    problems = check(workload, run)
    if not problems:
        return None
    if minimize:
        # Said before shrinking: a failure that does not come again is not lost with it.
        print(f"seed {seed} failed, shrinking: {problems}", flush=True)
        workload = shrink(workload, lambda w: bool(check(w, run)))
        problems = check(workload, run) or problems
    return Failure(seed, source, problems, workload)
