"""Re-sync of a database target: plan repairs from fresh reads, write them or apply them.

Repairs are planned from the rows as they are *now*, never from the result's stale view:
each key is read from the source in one consistent snapshot and from the target, and

- source has it, target lacks it: ``INSERT`` of every compared column;
- both have it and some columns differ (by the hash contract's canonical bytes): ``UPDATE``
  of only those columns;
- target has it, source no longer does: ``DELETE``;
- equal: nothing (the difference resolved itself).

A dry run writes the statements, with literal values, to ``repair-<comparison>.sql``. With
``apply`` they run in batches of ``batch_size`` keys, one transaction per batch, which
first locks the batch's target rows (``SELECT ... FOR UPDATE``) and only then reads the
source: a replication applying a newer source change to a locked row waits for the
repair and applies it afterwards, so a key that changes at the source during the repair
still ends consistent. A row another writer inserts meanwhile makes the batch's INSERT
fail; the batch then runs again from fresh reads.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from cdc_core.errors import TransientError
from cdc_core.files import write_atomic
from connectors.base import Connector
from connectors.model import TableSchema
from merkle.canonical import to_canonical_field
from validator.reflection import connector_of
from validator.resync.context import (
    ComparisonContext,
    Row,
    Rows,
    SourceRead,
    key_bytes_of,
    read_database_target,
    read_source,
)
from validator.resync.keys import TypedKey
from validator.resync.repair_sql import (
    RepairAction,
    RepairTarget,
    execute_actions,
    limit_lock_waits,
    lock_keys,
    reflect_target,
    render_statement,
    session_preamble,
)

log = logging.getLogger(__name__)

BATCH_ATTEMPTS = 3
LOCK_WAIT_S = 30.0  # a repair batch waits this long for a target row another holds


@dataclass(frozen=True, slots=True)
class RepairPlan:
    """Repairs for a set of keys, and what the reads saw.

    Attributes:
        actions: The repairs, in key order.
        unchanged: Keys equal on both sides (on neither side too).
        position: The source snapshot's position (None when unknown).
        absent: The canonical key bytes of the keys on neither side.
    """

    actions: tuple[RepairAction, ...]
    unchanged: int
    position: int | None
    absent: tuple[bytes, ...] = ()


@dataclass(frozen=True, slots=True)
class DatabaseSide:
    """The target as the re-sync reads it (connector) and writes it (SQLAlchemy)."""

    connector: Connector
    schema: TableSchema
    repair: RepairTarget


def open_target(context: ComparisonContext) -> DatabaseSide:
    """Reflect the target table for reading and for repair SQL."""
    connector = connector_of(context.target)
    schema = connector.reflect(context.comparison.target.table)
    repair = reflect_target(
        context.target, context.comparison.target.table, context.target_key, context.sensitive
    )
    return DatabaseSide(connector, schema, repair)


def plan_repairs(
    context: ComparisonContext,
    side: DatabaseSide,
    keys: Sequence[TypedKey],
    source: SourceRead | None = None,
) -> RepairPlan:
    """Read ``keys`` on both sides (the source first, in one snapshot, unless ``source``
    holds that read already) and plan the repairs."""
    source = source or read_source(context, keys)
    target = read_database_target(context, side.connector, side.schema, keys)
    wanted = [key_bytes_of(context, key) for key in keys]
    actions = [
        action
        for key_bytes in wanted
        if (action := _action(context, source.rows, target, key_bytes)) is not None
    ]
    absent = tuple(k for k in wanted if k not in source.rows and k not in target)
    return RepairPlan(tuple(actions), len(keys) - len(actions), source.position, absent)


def _action(
    context: ComparisonContext, source: Rows, target: Rows, key_bytes: bytes
) -> RepairAction | None:
    names = context.target_columns
    positions = context.reconciled.layout.key_positions()
    source_row, target_row = source.get(key_bytes), target.get(key_bytes)
    if source_row is None:
        if target_row is None:
            return None
        return RepairAction("delete", tuple(target_row[i] for i in positions))
    if target_row is None:
        key = tuple(source_row[i] for i in positions)
        return RepairAction("insert", key, dict(zip(names, source_row, strict=True)))
    changed = _changed_columns(context, source_row, target_row)
    if not changed:
        return None
    key = tuple(target_row[i] for i in positions)
    return RepairAction("update", key, {names[i]: source_row[i] for i in changed})


def _changed_columns(context: ComparisonContext, source: Row, target: Row) -> list[int]:
    layout = context.reconciled.layout
    return [
        index
        for index, column in enumerate(layout.columns)
        if to_canonical_field(source[index], column.ltype, layout.options)
        != to_canonical_field(target[index], column.ltype, layout.options)
    ]


def write_repair_file(
    context: ComparisonContext, side: DatabaseSide, plan: RepairPlan, path: Path, header: str
) -> Path:
    """Write the plan as reviewable SQL (literal values, sensitive ones as placeholders)."""
    lines = [f"-- {line}" for line in header.splitlines()]
    lines += session_preamble(side.repair)
    lines.append("BEGIN;")
    lines += [render_statement(side.repair, a, n) for n, a in enumerate(plan.actions, 1)]
    lines.append("COMMIT;")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, "\n".join(lines) + "\n")
    log.info("comparison %s: %d repairs written to %s", context.name, len(plan.actions), path)
    return path


def apply_repairs(
    context: ComparisonContext, side: DatabaseSide, keys: Sequence[TypedKey], batch_size: int
) -> RepairPlan:
    """Apply the repairs of ``keys`` in batches, one transaction each (module docstring)."""
    actions: list[RepairAction] = []
    unchanged = 0
    absent: tuple[bytes, ...] = ()
    position: int | None = None
    for batch in _batches(keys, batch_size):
        plan = _apply_batch(context, side, batch)
        actions += plan.actions
        unchanged, absent = unchanged + plan.unchanged, absent + plan.absent
        position = plan.position if plan.position is not None else position
    return RepairPlan(tuple(actions), unchanged, position, absent)


def _apply_batch(
    context: ComparisonContext, side: DatabaseSide, keys: Sequence[TypedKey]
) -> RepairPlan:
    import sqlalchemy as sa

    for attempt in range(1, BATCH_ATTEMPTS + 1):
        try:
            # The source is read before the target transaction opens: a source snapshot
            # may wait for every running transaction of its cluster (PostgreSQL's slot
            # creation), and the target may be in that cluster. No transaction of ours
            # ever waits for another of ours.
            source = read_source(context, keys)
            with side.repair.engine.begin() as connection:
                limit_lock_waits(side.repair, connection, LOCK_WAIT_S)
                lock_keys(side.repair, connection, keys)
                plan = plan_repairs(context, side, keys, source)
                execute_actions(side.repair, connection, plan.actions)
            return plan
        except (sa.exc.IntegrityError, sa.exc.OperationalError) as exc:
            if _lock_wait_expired(exc):
                raise TransientError(
                    f"comparison {context.name}: the target's rows stayed locked by another"
                    f" transaction for {LOCK_WAIT_S:g} s; find the long transaction on the"
                    " target (e.g. pg_stat_activity, SHOW PROCESSLIST) and run the re-sync"
                    " again",
                    {"comparison": context.name},
                ) from exc
            if not _collided(exc):
                raise
            if attempt == BATCH_ATTEMPTS:
                raise TransientError(
                    f"comparison {context.name}: repairs kept colliding with concurrent"
                    f" writes to the target ({BATCH_ATTEMPTS} attempts): run the re-sync again",
                    {"comparison": context.name},
                ) from exc
            log.info("comparison %s: a batch collided with a concurrent write", context.name)
            time.sleep(0.1 * attempt)
    raise AssertionError("unreachable")


def _lock_wait_expired(exc: Exception) -> bool:
    """PostgreSQL's lock_timeout (55P03) or MariaDB's lock wait timeout (1205)."""
    text = str(exc).lower()
    return "lock timeout" in text or "lock wait timeout" in text


def _collided(exc: Exception) -> bool:
    """A duplicate key from a concurrent insert, or a deadlock with a concurrent writer."""
    import sqlalchemy as sa

    return isinstance(exc, sa.exc.IntegrityError) or "deadlock" in str(exc).lower()


def _batches(keys: Sequence[TypedKey], size: int) -> Iterator[Sequence[TypedKey]]:
    for start in range(0, len(keys), size):
        yield keys[start : start + size]
