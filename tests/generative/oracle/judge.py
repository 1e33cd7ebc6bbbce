"""Judging a lake against the model's history of the source.

Per table, the model's final state is compared with:

- the mirror (keyed tables), read with ``deltalake``;
- the state derived from the changelog alone (DESIGN.md, "state at P": per key the latest
  event, gone if it is a ``d`` or older than a truncate), at the end and at every commit
  SCN of the workload where the lake claims to be exact (outside the windows of positions
  a refresh recorded as inexact: ``cdc_core.lake.layout.RefreshMarks``);
- for a table without a key (no mirror, no state by key), its changelog itself, in
  ``(_commit_pos, _seq)`` order: the events of transactions must be the model's committed
  changes, each at its commit SCN; each table refresh (``r`` events of a ``refresh:``
  pseudo-transaction at a position P) must hold exactly the rows the source had at P.

Columns are compared on the model's columns (a column the lake kept after a DROP COLUMN is
the lake's documented behaviour); a column the lake lacks counts as NULL. Two documented
inexactnesses are allowed for, and no more:

- between a DDL that changed stored values without redo and the end of the refresh after
  it, the columns it changed are not compared in the events of a table without a key: the
  lake records that window as inexact (``cdc_core.lake.layout.RefreshMarks``), and a DDL outside
  every recorded window is a problem (a refresh that reads no rows writes no events);
- an ``Unsupported Type`` value is read as of the commit, so from the change that wrote it
  on, every change of that row in the transaction carries the committed value
  (``cdc_core.rebuild.full_width``).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable
from decimal import Decimal
from pathlib import Path
from typing import Any

from cdc_core.lake.layout import LakeTable, RefreshMarks, read_marks
from cdc_core.names import COMMIT_POS, OP, SEQ, TXID
from tests.generative.oracle.history import History
from tests.generative.oracle.model import DdlScript, Snapshot, TxnScript, Values
from tests.generative.oracle.tables import TABLES

Row = tuple[tuple[str, object], ...]
Expected = tuple[str, Values, int]  # op, image, commit SCN
Window = tuple[int, int, frozenset[str]]  # first and last position, columns not compared


def judge(lake: Path, history: History) -> list[str]:
    """Every difference between the lake and the model (see the module docstring)."""
    final = history.script.final
    marks = read_marks(lake)
    problems = [
        f"the lake still marks {table} as being refreshed since {since}, after the end"
        for table, since in sorted(marks.refreshing.items())
    ]
    for index, spec in enumerate(TABLES):
        changelog = _read(LakeTable(lake, spec.name).changelog)
        if not spec.key:
            problems += _keyless_differs(history, index, changelog, marks)
            continue
        columns = [c.name for c in final.columns[index]]
        expected = Counter(_row(values, columns) for values in final.rows[index].values())
        derived = Counter(_row(values, columns) for values in _keyed_state(changelog, spec.key))
        problems += _diff(f"{spec.name} state from the changelog", expected, derived)
        problems += _history_differs(history, index, changelog, marks.stale.get(spec.name, ()))
        mirror = Counter(
            _row(values, columns) for values in _read(LakeTable(lake, spec.name).mirror)
        )
        problems += _diff(f"{spec.name} mirror", expected, mirror)
    return problems


def _history_differs(
    history: History,
    table: int,
    changelog: list[dict[str, Any]],
    stale: tuple[tuple[int, int], ...],
) -> list[str]:
    """The first commit SCN, outside the ``stale`` windows, where the state the changelog
    gives differs from the model's."""
    spec = TABLES[table]
    positions = sorted({p for p in history.positions if p is not None})
    for position in positions:
        if any(start <= position < end for start, end in stale):
            continue
        state = history.at(position)
        columns = [c.name for c in state.columns[table]]
        expected = Counter(_row(values, columns) for values in state.rows[table].values())
        derived = _keyed_state(changelog, spec.key, position)
        found = _diff(
            f"{spec.name} state at {position} from the changelog",
            expected,
            Counter(_row(values, columns) for values in derived),
        )
        if found:
            return found
    return []


# -- a table without a key: its changelog ------------------------------------------------------


def _keyless_differs(
    history: History, table: int, changelog: list[dict[str, Any]], marks: RefreshMarks
) -> list[str]:
    name = TABLES[table].name
    events = _ordered(changelog)
    log = [event for event in events if not _refreshing(event)]
    groups: dict[int, list[dict[str, Any]]] = {}
    for event in events:
        if _refreshing(event):
            groups.setdefault(event[COMMIT_POS], []).append(event)
    windows, problems = _stale_windows(history, table, marks.stale.get(name, ()))
    problems += _events_differ(name, committed_events(history, table), log, windows)
    for position, group in groups.items():
        problems += _refresh_differs(name, history.at(position), table, position, group)
    return problems


def _refreshing(event: dict[str, Any]) -> bool:
    return str(event[TXID]).startswith("refresh:")


def _stale_windows(
    history: History, table: int, recorded: tuple[tuple[int, int], ...]
) -> tuple[list[Window], list[str]]:
    """Per DDL that changed stored values of ``table``: the recorded window holding it."""
    windows, problems = [], []
    for position, item, _ in history.committed():
        if not isinstance(item, DdlScript) or item.table != table or not item.touched:
            continue
        window = next(((a, b) for a, b in recorded if a <= position <= b), None)
        if window is None:
            problems.append(
                f"{TABLES[table].name}: no refresh window holds the DDL at {position}"
                f" ({item.text}), which changed stored values without redo"
            )
            continue
        windows.append((*window, frozenset(item.touched)))
    return windows, problems


def committed_events(history: History, table: int) -> list[Expected]:
    """The changes of ``table`` the model committed, in commit order, as lake events."""
    events: list[Expected] = []
    for position, item, state in history.committed():
        if isinstance(item, DdlScript):
            if item.table == table and item.text.startswith("truncate"):
                events.append(("t", {}, position))
            continue
        events += _transaction_events(item, table, state, position)
    return events


def _transaction_events(
    txn: TxnScript, table: int, state: Snapshot, position: int
) -> list[Expected]:
    """The committed changes of ``table`` in ``txn``; an unrendered value, read as of the
    commit, is the committed one in every change of its row from the one that wrote it."""
    written: dict[str, set[str]] = {}
    events: list[Expected] = []
    for kind, changes in txn.steps:
        for change in changes if kind == "do" else ():
            if change.table != table:
                continue
            rowid = change.final_rowid
            written.setdefault(rowid, set()).update(change.unrendered)
            image = dict((change.before if change.op == "d" else change.after) or {})
            committed = state.rows[table].get(rowid, {})
            image |= {column: committed.get(column) for column in written[rowid]}
            events.append((change.op, image, position))
    return events


def _events_differ(
    name: str, expected: list[Expected], got: list[dict[str, Any]], windows: list[Window]
) -> list[str]:
    if len(got) != len(expected):
        return [f"{name} changelog: {len(got)} events, the model committed {len(expected)}"]
    for number, ((op, image, position), event) in enumerate(zip(expected, got, strict=True)):
        stale = {c for low, high, cs in windows if low <= event[COMMIT_POS] <= high for c in cs}
        columns = [column for column in image if column not in stale]
        if (op, position) != (event[OP], event[COMMIT_POS]) or (
            _row(image, columns) != _row(event, columns)
        ):
            return [
                f"{name} changelog event {number}: {event[OP]} at {event[COMMIT_POS]}"
                f" {_short(_row(event, columns))}, the model committed {op} at {position}"
                f" {_short(_row(image, columns))}"
            ]
    return []


def _refresh_differs(
    name: str, state: Snapshot, table: int, position: int, group: list[dict[str, Any]]
) -> list[str]:
    """A refresh at ``position`` holds exactly the source's rows then, and deletes none."""
    columns = [column.name for column in state.columns[table]]
    expected = Counter(_row(values, columns) for values in state.rows[table].values())
    read = Counter(_row(event, columns) for event in group if event[OP] == "r")
    problems = _diff(f"{name} refresh at {position}", expected, read)
    others = Counter(event[OP] for event in group if event[OP] != "r")
    if others:
        problems.append(f"{name} refresh at {position} also wrote {dict(others)}")
    return problems


# -- reading the lake ---------------------------------------------------------------------------


def _read(path: Path) -> list[dict[str, Any]]:
    from deltalake import DeltaTable

    if not (path / "_delta_log").is_dir():
        return []
    return DeltaTable(str(path)).to_pyarrow_table().to_pylist()


def _ordered(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(events, key=lambda event: (event[COMMIT_POS], event[SEQ]))


def _keyed_state(
    events: list[dict[str, Any]], key: tuple[str, ...], upto: int | None = None
) -> Iterable[dict[str, Any]]:
    """Per key the latest event (up to position ``upto``), unless it is a ``d`` or a truncate
    came after it."""
    latest: dict[tuple[object, ...], dict[str, Any]] = {}
    for event in _ordered(events):
        if upto is not None and event[COMMIT_POS] > upto:
            break
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
