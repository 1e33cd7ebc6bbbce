"""Run a generated workload through the real pipeline and judge the lake against the model.

``check(workload)`` renders the workload as a LogMiner recording, replays it through
``cdc_core.pipeline.Pipeline`` (buffer with spill, rebuild, key moves, Delta sink) into a
lake in a temporary directory, and compares, per table, the model's final state with:

- the mirror (keyed tables), read with ``deltalake``;
- the state derived from the changelog alone (DESIGN.md, "state at P": per key the latest
  event, gone if it is a ``d`` or older than a truncate);
- for a table without a key (no mirror, no state by key): its changelog events themselves,
  in ``(_commit_pos, _seq)`` order, against the model's committed changes.

Columns are compared on the model's columns (a column the lake kept after a DROP COLUMN is
the lake's documented behaviour); a column the lake lacks counts as NULL.

``shrink`` removes items, then operations, while the workload still fails, as hypothesis
does; ``main`` runs many seeds for a soak (``python -m tests.generative.oracle.runner``).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import sys
import tempfile
import traceback
from collections import Counter
from collections.abc import Callable, Iterable
from decimal import Decimal
from pathlib import Path
from typing import Any

from cdc_core.filters import TableFilter
from cdc_core.lake import COMMIT_POS, OP, SEQ, LakeTable
from cdc_core.pipeline import Pipeline, PipelineConfig
from connectors.oracle.replay import ReplayConfig, ReplayLogReader, ReplaySnapshotReader
from tests.generative.oracle.model import DdlScript, Script, interpret
from tests.generative.oracle.render import Renderer
from tests.generative.oracle.tables import TABLES
from tests.generative.oracle.workload import Features, Txn, Workload, generate

Row = tuple[tuple[str, object], ...]


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
        lines += ["minimal stream (replay contents, one JSON object per line):"]
        lines += [json.dumps(record, default=str) for record in self.records]
        lines += ["tables file:", json.dumps(tables_document())]
        return "\n".join(lines)


def tables_document() -> dict[str, object]:
    """The replay tables file: the tables as the recording starts."""
    return {
        spec.name: {"key": list(spec.key), "columns": [c.record() for c in spec.columns]}
        for spec in TABLES
    }


def records_of(workload: Workload, features: Features) -> list[dict[str, object]]:
    """The replay contents records of ``workload``."""
    return Renderer(interpret(workload, features), features.region_zones).render()


def check(workload: Workload, features: Features, work: Path) -> list[str]:
    """Run ``workload`` through the pipeline in ``work``; the problems found (none: pass)."""
    script = interpret(workload, features)
    contents, tables = work / "contents.jsonl", work / "tables.json"
    records = Renderer(script, features.region_zones).render()
    contents.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    tables.write_text(json.dumps(tables_document()), encoding="utf-8")
    reader = ReplayLogReader(ReplayConfig(contents, tables))
    names = [spec.name for spec in TABLES]
    config = PipelineConfig(
        "generative", work / "lake", work / "state", TableFilter.of_tables(names),
        memory_budget_bytes=workload.memory_budget_bytes,
        batch_max_events=workload.batch_max_events,
    )  # fmt: skip
    try:
        reached = Pipeline(config, reader, ReplaySnapshotReader(reader)).run_until_caught_up()
    except Exception as exc:  # any failure of the real pipeline is a finding
        where = traceback.extract_tb(exc.__traceback__)[-1]
        return [f"pipeline raised {type(exc).__name__} at {where.filename}:{where.lineno}: {exc}"]
    end = reader.end_position()
    stopped = (
        [] if reached == end else [f"the pipeline stopped at {reached}, the log ends at {end}"]
    )
    return stopped + judge(work / "lake", script)


# -- judging --------------------------------------------------------------------------------


def judge(lake: Path, script: Script) -> list[str]:
    """Every difference between the lake and the model (see the module docstring)."""
    problems = []
    for index, spec in enumerate(TABLES):
        changelog = _read(LakeTable(lake, spec.name).changelog)
        if not spec.key:
            problems += _events_differ(spec.name, committed_events(script, index), changelog)
            continue
        columns = [c.name for c in script.final.columns[index]]
        expected = Counter(_row(values, columns) for values in script.final.rows[index].values())
        derived = Counter(_row(values, columns) for values in _keyed_state(changelog, spec.key))
        problems += _diff(f"{spec.name} state from the changelog", expected, derived)
        mirror = Counter(
            _row(values, columns) for values in _read(LakeTable(lake, spec.name).mirror)
        )
        problems += _diff(f"{spec.name} mirror", expected, mirror)
    return problems


def committed_events(script: Script, table: int) -> list[tuple[str, dict[str, object]]]:
    """The changes of ``table`` the model committed, in commit order, as lake events."""
    events: list[tuple[str, dict[str, object]]] = []
    for item in script.items:
        if isinstance(item, DdlScript):
            if item.table == table and item.text.startswith("truncate"):
                events.append(("t", {}))
            continue
        if not item.commit:
            continue
        for kind, changes in item.steps:
            for change in changes if kind == "do" else ():
                if change.table == table:
                    image = change.before if change.op == "d" else change.after
                    events.append((change.op, dict(image or {})))
    return events


def _events_differ(
    name: str, expected: list[tuple[str, dict[str, object]]], changelog: list[dict[str, Any]]
) -> list[str]:
    got = [(event[OP], event) for event in _ordered(changelog)]
    if len(got) != len(expected):
        return [f"{name} changelog: {len(got)} events, the model committed {len(expected)}"]
    for number, ((op, image), (lake_op, event)) in enumerate(zip(expected, got, strict=True)):
        columns = list(image)
        if op != lake_op or _row(image, columns) != _row(event, columns):
            return [f"{name} changelog event {number}: {lake_op} {_short(_row(event, columns))},"
                    f" the model committed {op} {_short(_row(image, columns))}"]  # fmt: skip
    return []


def _read(path: Path) -> list[dict[str, Any]]:
    from deltalake import DeltaTable

    if not (path / "_delta_log").is_dir():
        return []
    return DeltaTable(str(path)).to_pyarrow_table().to_pylist()


def _ordered(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(events, key=lambda event: (event[COMMIT_POS], event[SEQ]))


def _keyed_state(events: list[dict[str, Any]], key: tuple[str, ...]) -> Iterable[dict[str, Any]]:
    """Per key the latest event, unless it is a ``d`` or a truncate came after it."""
    latest: dict[tuple[object, ...], dict[str, Any]] = {}
    for event in _ordered(events):
        if event[OP] == "t":
            latest.clear()
        else:
            latest[tuple(event[c] for c in key)] = event
    return [event for event in latest.values() if event[OP] != "d"]


def _row(values: dict[str, Any], columns: list[str]) -> Row:
    return tuple((c, _plain(values.get(c))) for c in columns)


def _plain(value: object) -> object:
    if isinstance(value, Decimal):
        return value.normalize()
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC)
    return value


def _diff(what: str, expected: Counter[Row], got: Counter[Row]) -> list[str]:
    missing, extra = expected - got, got - expected
    if not missing and not extra:
        return []
    return [
        f"{what}: {sum(missing.values())} rows missing, {sum(extra.values())} unexpected;"
        f" first missing {_short(next(iter(missing), None))}, first unexpected"
        f" {_short(next(iter(extra), None))}"
    ]


def _short(row: Row | None) -> str:
    if row is None:
        return "-"
    return "{" + ", ".join(f"{k}={str(v)[:24]!s}" for k, v in row) + "}"


# -- shrinking ------------------------------------------------------------------------------


def shrink(workload: Workload, fails: Callable[[Workload], bool]) -> Workload:
    """The smallest workload found that still ``fails``: drop chunks of items, then single
    items, then operations of each transaction, until nothing more can go."""
    current = workload
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
    seed: int, features: Features, root: Path, *, minimize: bool = True
) -> Failure | None:
    """``None`` when seed ``seed`` passes; else its failure, shrunk when ``minimize``."""
    workload = generate(seed, features)
    problems = _run(workload, features, root)
    if not problems:
        return None
    if minimize:
        workload = shrink(workload, lambda w: bool(_run(w, features, root)))
        problems = _run(workload, features, root)
    return Failure(seed, problems, workload, records_of(workload, features))


def _run(workload: Workload, features: Features, root: Path) -> list[str]:
    with tempfile.TemporaryDirectory(dir=root) as work:
        return check(workload, features, Path(work))


def main(argv: list[str] | None = None) -> int:
    """Soak: run seeds, print each failure's seed and minimal stream; exit 1 if any failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--with", dest="on", nargs="*", default=[], help="features to turn on")
    parser.add_argument("--without", dest="off", nargs="*", default=[], help="features to turn off")
    parser.add_argument("--no-shrink", action="store_true")
    args = parser.parse_args(argv)
    features = dataclasses.replace(
        Features(), **{name: True for name in args.on}, **{name: False for name in args.off}
    )
    failed = 0
    with tempfile.TemporaryDirectory() as root:
        for seed in range(args.start, args.start + args.seeds):
            failure = check_seed(seed, features, Path(root), minimize=not args.no_shrink)
            if failure is not None:
                failed += 1
                print(failure.report(features), flush=True)  # the soak's output
    print(f"{args.seeds - failed} of {args.seeds} seeds passed with {features.names()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())


# -- what a workload exercises ----------------------------------------------------------------


def coverage(workload: Workload, features: Features) -> Counter[str]:
    """What the rendered log of ``workload`` holds, feature by feature, so a test can check
    that the generator produces what it claims to."""
    script = interpret(workload, features)
    found: Counter[str] = Counter()
    for item in script.items:
        if isinstance(item, DdlScript):
            found["truncate" if item.text.startswith("truncate") else "ddl"] += 1
            continue
        found["rollback"] += not item.commit
        for kind, changes in item.steps:
            found["partial_rollback"] += kind == "undo"
            if kind != "undo":  # an undo holds the changes of several statements
                found += _statement_coverage(changes)
    records = Renderer(script, features.region_zones).render()
    found["csf"] = sum(record["CSF"] == 1 for record in records)
    found["region"] = sum("/" in str(record.get("SQL_REDO") or "") for record in records)
    found["interleaved"] = _interleavings(records)
    return found


def _statement_coverage(changes: list[Any]) -> Counter[str]:
    found: Counter[str] = Counter()
    for index, change in enumerate(changes):
        found["row_movement"] += change.op == "m"
        key = TABLES[change.table].key
        if change.op != "u" or not key or not change.before or not change.after:
            continue
        old, new = (tuple(image[c] for c in key) for image in (change.before, change.after))
        found["key_change"] += old != new
        later = [tuple(c.before[k] for k in key) for c in changes[index + 1 :] if c.before]
        found["intermediate_duplicate"] += new in later  # the key another row still holds
    return found


def _interleavings(records: list[dict[str, object]]) -> int:
    """How often a row of one transaction comes while another one is open."""
    open_: set[object] = set()
    count = 0
    for record in records:
        xid, code = record["XID"], record["OPERATION_CODE"]
        count += bool(open_ - {xid}) and code not in (7, 36)
        if code == 6:
            open_.add(xid)
        elif code in (7, 36):
            open_.discard(xid)
    return count
