"""Re-validation after a re-sync: are the repaired keys equal now?

The repaired keys are read again on both sides and compared with the hash contract
(``merkle.hashing.RowHasher`` over the comparison's reconciled layout and options), the
rules the Spark job applies to whole tables:

- a lake target is read as of the position the source was read at, after waiting until
  the lake's high-water mark reaches it (``validator.positions.wait_for_lake``), so
  changes streaming in meanwhile are not reported;
- a live database target has no time travel: keys still different are confirmed as the
  comparison's ``replication`` allows (``validator.replicas``: at an agreed position, or
  after ``validation.recheck_lag_s``), and keys that are still changing are listed as in
  flight, not as drift.

``revalidate_full`` instead runs the normal validation of the comparison.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cdc_core.lake.layout import high_water_mark
from merkle.canonical import to_canonical_field
from merkle.hashing import RowHasher
from validator.config import ValidatorConfig
from validator.positions import InexactStateError, check_exact, wait_for_lake
from validator.recheck import LiveTable
from validator.replicas import confirm_live
from validator.result import (
    MASK,
    Changed,
    ColumnChange,
    ComparisonResult,
    Difference,
    ExtraInTarget,
    Key,
    MissingInTarget,
    Status,
)
from validator.resync.context import (
    ComparisonContext,
    Row,
    Rows,
    key_bytes_of,
    read_database_target,
    read_source,
)
from validator.resync.database import DatabaseSide
from validator.resync.keys import TypedKey
from validator.resync.lake import lake_rows_at

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

KeyPair = tuple[Key, TypedKey]  # a key as the result shows it, and its typed values
RETRY_WAIT_S = 0.5  # between source reads while the pipeline re-reads repaired keys

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class KeyCheck:
    """The repaired keys compared again.

    Attributes:
        differences: Keys still different (confirmed, for live targets).
        in_flight: Live targets: keys still changing when re-checked.
        position: The source position they were read at (None: unknown).
    """

    differences: tuple[Difference, ...]
    in_flight: tuple[Key, ...] = ()
    position: int | None = None


def revalidate_lake(
    context: ComparisonContext, keys: Sequence[KeyPair], timeout_s: float
) -> KeyCheck:
    """Compare ``keys`` of the source with the lake as of the source's read position.

    The pipeline reads the repaired keys again (``cdc_core.resync.requests``), which leaves
    the lake inexact while it does; a source read that lands there is made again once the
    lake has passed that window, within ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return _revalidate_lake_once(context, keys, max(deadline - time.monotonic(), 0.0))
        except InexactStateError as exc:
            if time.monotonic() >= deadline:
                raise
            log.info("%s; reading the repaired keys again once it is", exc.message)
            time.sleep(RETRY_WAIT_S)


def _revalidate_lake_once(
    context: ComparisonContext, keys: Sequence[KeyPair], timeout_s: float
) -> KeyCheck:
    lake_table = context.lake_table
    mark_before = high_water_mark(lake_table)
    source = read_source(context, [typed for _, typed in keys])
    position = source.position if source.position is not None else mark_before
    if position is not None:
        wait_for_lake(lambda: high_water_mark(lake_table), position, timeout_s, lake_table.table)
        check_exact(lake_table, [position])
    target = lake_rows_at(context, [typed for _, typed in keys], position)
    return KeyCheck(tuple(compare_rows(context, keys, source.rows, target)), (), position)


def revalidate_database(
    config: ValidatorConfig, context: ComparisonContext, side: DatabaseSide, keys: Sequence[KeyPair]
) -> KeyCheck:
    """Compare ``keys`` of the source with a live database target (re-checked after lag)."""
    typed = [t for _, t in keys]
    source = read_source(context, typed)
    target = read_database_target(context, side.connector, side.schema, typed)
    differences = compare_rows(context, keys, source.rows, target)
    layout = context.reconciled.layout
    if not differences:
        return KeyCheck((), (), source.position)
    found = ComparisonResult(
        name=context.name,
        status=Status.DIFFERENCES,
        source="",
        target="",
        differences=tuple(differences),
        differences_total=len(differences),
    )
    live_source = LiveTable(context.source, context.source_schema, layout.names, context.key)
    live_target = LiveTable(side.connector, side.schema, context.target_columns, context.target_key)
    sides = (live_source, live_target)
    confirmed = confirm_live(
        found, context.comparison, config.validation, layout, sides, context.target
    )
    return KeyCheck(confirmed.differences, confirmed.in_flight, source.position)


def revalidate_full(
    spark: SparkSession | Callable[[], SparkSession], config: ValidatorConfig, name: str
) -> dict[str, Any]:
    """Validate the whole comparison again; its result as in ``result.json``."""
    from validator.job import validate

    document = validate(spark, config, [name])
    comparison: dict[str, Any] = document["comparisons"][0]
    return comparison


def compare_rows(
    context: ComparisonContext, keys: Sequence[KeyPair], source: Rows, target: Rows
) -> list[Difference]:
    """The differences between both sides' rows of ``keys`` (hash contract)."""
    hasher = RowHasher(context.reconciled.layout)
    found: list[Difference] = []
    for shown, typed in keys:
        key_bytes = key_bytes_of(context, typed)
        left, right = source.get(key_bytes), target.get(key_bytes)
        if left is None and right is not None:
            found.append(ExtraInTarget(shown))
        elif left is not None and right is None:
            found.append(MissingInTarget(shown))
        elif (
            left is not None
            and right is not None
            and hasher.row_hash(left) != hasher.row_hash(right)
        ):
            found.append(Changed(shown, _column_changes(context, left, right)))
    return found


def _column_changes(context: ComparisonContext, left: Row, right: Row) -> tuple[ColumnChange, ...]:
    layout = context.reconciled.layout
    changes = []
    for index, column in enumerate(layout.columns):
        options = layout.options
        if to_canonical_field(left[index], column.ltype, options) == to_canonical_field(
            right[index], column.ltype, options
        ):
            continue
        hidden = column.sensitive or column.name in context.sensitive
        changes.append(
            ColumnChange(
                column.name,
                MASK if hidden else _text(left[index]),
                MASK if hidden else _text(right[index]),
            )
        )
    return tuple(changes)


def _text(value: object) -> str | None:
    return None if value is None else str(value)
