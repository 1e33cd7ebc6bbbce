"""The model: what the source holds after each committed transaction of a workload, and
the row changes each statement made, as LogMiner would show them.

Oracle semantics kept: rows are located by ROWID; unique keys are checked at the end of a
statement (a key shift or swap shows intermediate duplicates); a ROWID is reused only after
the delete that freed it committed; a column added with a DEFAULT shows it in existing rows
without any redo; a rollback to a savepoint undoes the statements after it.

``Script.states`` holds the source after each item, so a snapshot at any SCN can be answered
(``history``). With ``Features.unsupported`` the new values of ``LONG`` columns are shown as
``Unsupported Type`` (``Change.unrendered``), which the pipeline reads back as of the commit
by ROWID; a transaction therefore never deletes or moves a row after writing such a value
(the read would find no row there, and the pipeline stops by design rather than guess).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace

from tests.generative.oracle.tables import TABLES, UNRENDERED_TYPES, Column, TableSpec, value
from tests.generative.oracle.workload import Ddl, Features, Op, Txn, Workload

KEYSPACE = 40


Values = dict[str, object]


@dataclass(frozen=True)
class Change:
    """A row change as LogMiner shows it: ``c``, ``u``, ``d``, or ``m`` (an update that moved
    the row to ``new_rowid``: a DELETE and an INSERT in one redo record). Its images are
    copies: later DDL changes the model's rows in place, never what a change showed."""

    op: str
    table: int
    rowid: str
    before: Values | None = None
    after: Values | None = None
    new_rowid: str | None = None
    changed: tuple[str, ...] = ()
    unrendered: tuple[str, ...] = ()  # new values LogMiner shows as ``Unsupported Type``

    @property
    def final_rowid(self) -> str:
        """Where the row is after the change."""
        return self.new_rowid or self.rowid


@dataclass
class TxnScript:
    """A transaction as it ran: statements and undos (lists of changes) in order."""

    xid: str
    steps: list[tuple[str, list[Change]]]  # ("do" | "undone" (later undone) | "undo", ...)
    commit: bool
    overlap: bool
    seed: int
    footprint: set[tuple[int, object]]


@dataclass
class DdlScript:
    """A DDL statement, the table's columns after it, and the columns whose stored values it
    changed without redo (a default filled in, a column renamed)."""

    table: int
    text: str
    columns: list[Column]
    touched: tuple[str, ...] = ()


@dataclass
class State:
    """The source: per table its columns and its rows by ROWID."""

    columns: list[list[Column]]
    rows: list[dict[str, Values]]
    free: list[dict[int, list[str]]]  # per table and partition: ROWIDs free to reuse
    counter: int = 0
    added: int = 0
    pinned: set[tuple[int, str]] = field(default_factory=set)  # see the module docstring

    def key_of(self, table: int, values: Values) -> tuple[object, ...]:
        return tuple(values[column] for column in TABLES[table].key)


@dataclass(frozen=True)
class Snapshot:
    """The source's committed tables at one point: per table its columns and rows by ROWID."""

    columns: list[list[Column]]
    rows: list[dict[str, Values]]


@dataclass
class Script:
    items: list[TxnScript | DdlScript]
    final: State
    states: list[Snapshot]  # the source after each item (a rolled-back one changes nothing)
    initial: tuple[TableSpec, ...] = field(default=TABLES)

    def start(self) -> Snapshot:
        """The source before the first item: empty tables."""
        return Snapshot([list(spec.columns) for spec in self.initial], [{} for _ in TABLES])


def new_state() -> State:
    return State(
        [list(spec.columns) for spec in TABLES],
        [{} for _ in TABLES],
        [{0: [], 1: []} for _ in TABLES],
    )


# -- running a workload against the model ---------------------------------------------------


def interpret(workload: Workload, features: Features) -> Script:
    """The statements each item ran and the final state (see the module docstring)."""
    state = new_state()
    items: list[TxnScript | DdlScript] = []
    states: list[Snapshot] = []
    for number, item in enumerate(workload.items):
        if isinstance(item, Ddl):
            script = _run_ddl(state, item)
            if script is None:
                continue
            items.append(script)
        else:
            items.append(_run_txn(state, item, number, features))
        states.append(Snapshot(copy.deepcopy(state.columns), copy.deepcopy(state.rows)))
    return Script(items, state, states)


def _run_txn(state: State, txn: Txn, number: int, features: Features) -> TxnScript:
    work = copy.deepcopy(state.rows)
    snapshots: list[list[dict[str, Values]]] = []
    script = TxnScript(f"{number + 1:04X}0001{txn.seed % 16**8:08X}", [], txn.commit,
                       txn.overlap, txn.seed, set())  # fmt: skip
    state.pinned = set()
    for op in txn.ops:
        if op.kind == "undo":
            _undo(script, work, snapshots, op)
            continue
        before = copy.deepcopy(work)
        changes = _statement(state, work, op, features)
        if changes:
            snapshots.append(before)
            script.steps.append(("do", changes))
            script.footprint |= _footprint(changes)
    if txn.commit:
        _commit(state, work)
    return script


def _undo(script: TxnScript, work: list[dict[str, Values]], snapshots: list, op: Op) -> None:
    done = [i for i, (kind, _) in enumerate(script.steps) if kind == "do"]
    undoable = len(snapshots)
    if not undoable:
        return
    count = 1 + op.picks[0] % undoable
    for _ in range(count):
        restored = snapshots.pop()
        work[:] = restored
    undone = [change for i in done[-count:] for change in script.steps[i][1]]
    for i in reversed(done[-count:]):
        script.steps[i] = ("undone", script.steps[i][1])
    script.steps.append(("undo", list(reversed(undone))))


def _commit(state: State, work: list[dict[str, Values]]) -> None:
    for table, rows in enumerate(work):
        for rowid in set(state.rows[table]) - set(rows):
            state.free[table][_partition_of_rowid(rowid)].append(rowid)
    state.rows = work


def _footprint(changes: list[Change]) -> set[tuple[int, object]]:
    touched: set[tuple[int, object]] = set()
    for change in changes:
        touched |= {(change.table, change.rowid), (change.table, change.new_rowid)}
        for image in (change.before, change.after):
            if image is not None and TABLES[change.table].key:
                touched.add((change.table, tuple(image[c] for c in TABLES[change.table].key)))
    return touched


# -- statements ---------------------------------------------------------------------------------


def _statement(
    state: State, work: list[dict[str, Values]], op: Op, features: Features
) -> list[Change]:
    spec = TABLES[op.table]
    if op.kind in ("key_change", "key_shift", "key_swap") and not spec.key:
        return []
    if op.kind == "move" and spec.partition_column is None:
        return []
    handler = {
        "insert": _insert, "update": _update, "delete": _delete, "key_change": _key_change,
        "key_shift": _key_shift, "key_swap": _key_swap, "move": _move,
    }[op.kind]  # fmt: skip
    return handler(state, work, op, features)


def _live(work: list[dict[str, Values]], table: int, pick: int) -> tuple[str, Values] | None:
    rows = sorted(work[table].items())
    return rows[pick % len(rows)] if rows else None


def _insert(
    state: State, work: list[dict[str, Values]], op: Op, features: Features
) -> list[Change]:
    spec, columns = TABLES[op.table], state.columns[op.table]
    row = {
        c.name: value(c, op.picks[i % len(op.picks)], features.csf) for i, c in enumerate(columns)
    }
    if spec.key:
        key = _free_key(state, work, op.table, op.picks[-1])
        if key is None:
            return []
        row |= dict(zip(spec.key, key, strict=True))
    if spec.partition_column and row[spec.partition_column] is None:
        row[spec.partition_column] = op.picks[1] % 100
    rowid = _allocate(state, op.table, _partition(spec, row), op.picks[2])
    work[op.table][rowid] = row
    unrendered = _unrendered(state, op.table, rowid, row, columns, features)
    return [Change("c", op.table, rowid, None, dict(row), unrendered=unrendered)]


def _update(
    state: State, work: list[dict[str, Values]], op: Op, features: Features
) -> list[Change]:
    spec = TABLES[op.table]
    found = _live(work, op.table, op.picks[0])
    if found is None:
        return []
    rowid, before = found
    fixed = set(spec.key) | {spec.partition_column}
    columns = [c for c in state.columns[op.table] if c.name not in fixed]
    chosen = [c for i, c in enumerate(columns) if op.picks[1 + i % 6] % 3 == 0] or columns[:1]
    after = dict(before) | {
        c.name: value(c, op.picks[7 + i % 5], features.csf) for i, c in enumerate(chosen)
    }
    work[op.table][rowid] = after
    unrendered = _unrendered(state, op.table, rowid, after, chosen, features)
    changed = tuple(c.name for c in chosen)
    return [Change("u", op.table, rowid, dict(before), dict(after), changed=changed,
                   unrendered=unrendered)]  # fmt: skip


def _delete(
    state: State, work: list[dict[str, Values]], op: Op, features: Features
) -> list[Change]:
    found = _live(work, op.table, op.picks[0])
    if found is None or (op.table, found[0]) in state.pinned:
        return []
    rowid, before = found
    del work[op.table][rowid]
    return [Change("d", op.table, rowid, dict(before))]


def _key_change(
    state: State, work: list[dict[str, Values]], op: Op, features: Features
) -> list[Change]:
    found = _live(work, op.table, op.picks[0])
    key = _free_key(state, work, op.table, op.picks[1])
    if found is None or key is None:
        return []
    rowid, before = found
    return [_rekey(work, op.table, rowid, before, key)]


def _key_shift(
    state: State, work: list[dict[str, Values]], op: Op, features: Features
) -> list[Change]:
    """``UPDATE t SET <last key column> = <it> + 1 WHERE <it> >= n``, rows in ascending order:
    a row takes the key its successor still holds until that one moves on."""
    spec = TABLES[op.table]
    last = spec.key[-1]
    rows = sorted(work[op.table].items(), key=lambda item: state.key_of(op.table, item[1]))
    if not rows:
        return []
    floor = rows[op.picks[0] % len(rows)][1][last]
    changes = []
    for rowid, before in rows:
        if before[last] >= floor:  # type: ignore[operator]
            key = tuple(before[c] if c != last else before[c] + 1 for c in spec.key)  # type: ignore[operator]
            changes.append(_rekey(work, op.table, rowid, before, key))
    return changes


def _key_swap(
    state: State, work: list[dict[str, Values]], op: Op, features: Features
) -> list[Change]:
    """Two rows exchange their keys in one statement (the first move duplicates a key)."""
    rows = sorted(work[op.table].items())
    if len(rows) < 2:
        return []
    first = op.picks[0] % len(rows)
    second = (first + 1 + op.picks[1] % (len(rows) - 1)) % len(rows)
    (rowid_a, a), (rowid_b, b) = rows[first], rows[second]
    key_a, key_b = state.key_of(op.table, a), state.key_of(op.table, b)
    return [_rekey(work, op.table, rowid_a, a, key_b), _rekey(work, op.table, rowid_b, b, key_a)]


def _rekey(
    work: list[dict[str, Values]], table: int, rowid: str, before: Values, key: tuple
) -> Change:
    after = dict(before) | dict(zip(TABLES[table].key, key, strict=True))
    work[table][rowid] = after
    return Change("u", table, rowid, dict(before), dict(after), changed=TABLES[table].key)


def _move(state: State, work: list[dict[str, Values]], op: Op, features: Features) -> list[Change]:
    """An update of the partition column across the boundary: the row moves to a new ROWID."""
    spec = TABLES[op.table]
    found = _live(work, op.table, op.picks[0])
    if found is None or spec.partition_column is None or (op.table, found[0]) in state.pinned:
        return []
    rowid, before = found
    column = spec.partition_column
    now = _partition(spec, before)
    after = dict(before) | {column: (op.picks[1] % 50) + (0 if now else 50)}
    new_rowid = _allocate(state, op.table, 1 - now, op.picks[2])
    del work[op.table][rowid]
    work[op.table][new_rowid] = after
    # The INSERT half of a movement lists every column.
    unrendered = _unrendered(state, op.table, new_rowid, after, state.columns[op.table], features)
    return [Change("m", op.table, rowid, dict(before), dict(after), new_rowid, (column,),
                   unrendered)]  # fmt: skip


def is_unrendered(data_type: str, features: Features) -> bool:
    """Whether LogMiner shows values of ``data_type`` as ``Unsupported Type``."""
    return features.unsupported and data_type in UNRENDERED_TYPES


def _unrendered(
    state: State, table: int, rowid: str, row: Values, written: list[Column], features: Features
) -> tuple[str, ...]:
    """The ``written`` columns whose new value in ``row`` LogMiner cannot show (NULL it can);
    such a row is pinned at ``rowid`` for the rest of the transaction."""
    names = tuple(
        c.name for c in written if is_unrendered(c.data_type, features) and row[c.name] is not None
    )
    if names:
        state.pinned.add((table, rowid))
    return names


def _free_key(state: State, work: list[dict[str, Values]], table: int, pick: int) -> tuple | None:
    taken = {state.key_of(table, row) for row in work[table].values()}
    width = len(TABLES[table].key)
    candidates = [k for k in _keys(width) if k not in taken]
    return candidates[pick % len(candidates)] if candidates else None


def _keys(width: int) -> list[tuple[int, ...]]:
    if width == 1:
        return [(i,) for i in range(1, KEYSPACE)]
    return [(o, line) for o in range(1, 8) for line in range(1, 6)]


# -- ROWIDs -------------------------------------------------------------------------------------


def _partition(spec: TableSpec, row: Values) -> int:
    if spec.partition_column is None:
        return 0
    return 0 if (row[spec.partition_column] or 0) < 50 else 1  # type: ignore[operator]


def _allocate(state: State, table: int, partition: int, pick: int) -> str:
    """A new ROWID in the table's partition, or (some picks) one a committed delete freed."""
    free = state.free[table][partition]
    if free and pick % 3 == 0:
        return free.pop(0)
    state.counter += 1
    return f"AAAS{table}{partition}AAFAAA{state.counter:07X}"


def _partition_of_rowid(rowid: str) -> int:
    return int(rowid[5])


# -- DDL ------------------------------------------------------------------------------------------


def _run_ddl(state: State, ddl: Ddl) -> DdlScript | None:
    before = {c.name for c in state.columns[ddl.table]}
    text = _ddl_text(state, ddl)
    if text is None:
        return None
    columns = list(state.columns[ddl.table])
    new = tuple(c.name for c in columns if c.name not in before)
    touched = () if ddl.kind == "add_nullable" else new  # a default, or a renamed column
    return DdlScript(ddl.table, text, columns, touched)


def _ddl_text(state: State, ddl: Ddl) -> str | None:
    """Apply ``ddl`` to the model; the statement's text (``None``: nothing to do)."""
    spec, columns = TABLES[ddl.table], state.columns[ddl.table]
    name = f'"{spec.name.replace(".", chr(34) + "." + chr(34))}"'
    droppable = [c for c in columns if c.name not in spec.key and c.name != spec.partition_column]
    if ddl.kind == "truncate":
        state.rows[ddl.table] = {}
        return f"truncate table {name}"
    if ddl.kind == "constraint":
        return f'alter table {name} add constraint "CK{ddl.pick}" check (1 = 1)'
    if ddl.kind == "widen":
        text = [c for c in columns if c.data_type == "VARCHAR2"]
        return f'alter table {name} modify ("{text[0].name}" VARCHAR2(4000))' if text else None
    if ddl.kind in ("add_nullable", "add_default"):
        return _add_column(state, ddl, name)
    if len(droppable) < 2:
        return None
    target = droppable[ddl.pick % len(droppable)]
    index = columns.index(target)
    if ddl.kind == "drop_column":
        del columns[index]
        for row in state.rows[ddl.table].values():
            del row[target.name]
        return f'alter table {name} drop column "{target.name}"'
    state.added += 1
    renamed = f"R{state.added}"
    columns[index] = replace(target, name=renamed)
    for row in state.rows[ddl.table].values():
        row[renamed] = row.pop(target.name)
    return f'alter table {name} rename column "{target.name}" to "{renamed}"'


def _add_column(state: State, ddl: Ddl, name: str) -> str:
    state.added += 1
    column = Column(f"X{state.added}", "NUMBER", 5, 0)
    state.columns[ddl.table].append(column)
    default = ddl.pick % 100 if ddl.kind == "add_default" else None
    for row in state.rows[ddl.table].values():
        row[column.name] = default  # Oracle 11g+: metadata only, no redo for existing rows
    clause = "" if default is None else f" DEFAULT {default}"
    return f'alter table {name} add ("{column.name}" NUMBER(5){clause})'
