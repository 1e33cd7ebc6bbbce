"""Confirm differences against a live target database (DESIGN.md, "confirm out of sync").

A database target has no time travel, so replication lag shows up as differences. Each
detailed difference is re-read on both sides twice, right after the comparison (T1) and
after the configured lag (T2), and hashed with the pure-Python implementation of the
contract:

- equal at T2: it was in flight and has arrived — dropped;
- different at T2 and either side changed between T1 and T2: still changing — reported
  separately as *in flight*, not as drift;
- different at T2 and unchanged since T1: confirmed drift — kept.

Differences beyond ``max_reported_rows`` were never detailed and stay counted as found.
Duplicate-key findings are structural and are kept as they are.
"""

from __future__ import annotations

import datetime as dt
import decimal
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from connectors.base import Connector
from connectors.model import Partition, TableSchema
from merkle import types as lt
from merkle.hashing import RowHasher
from merkle.layout import RowLayout
from validator.result import ComparisonResult, Difference, DuplicateKey, Key, Status, rows_of

log = logging.getLogger(__name__)
_MASK64 = (1 << 64) - 1

Hashes = dict[Key, int | None]  # key -> row hash, None when the row does not exist
_PARSERS: dict[type, Callable[[str], object]] = {
    lt.IntegerType: int,
    lt.DecimalType: decimal.Decimal,
    lt.StringType: str,
    lt.UuidType: str,
    lt.DateType: dt.date.fromisoformat,
}


@dataclass(frozen=True, slots=True)
class LiveTable:
    """One side of a comparison, readable by key: its connector, schema and column names
    (in layout order, as this side names them)."""

    connector: Connector
    schema: TableSchema
    columns: tuple[str, ...]
    key_columns: tuple[str, ...]


def can_recheck(layout: RowLayout) -> bool:
    """Keys come back from Spark as text; these key types can be turned back into values."""
    return all(type(column.ltype) in _PARSERS for column in layout.key_columns)


def read_hashes(table: LiveTable, layout: RowLayout, keys: Sequence[Key]) -> Hashes:
    """Current row hash of each key (None when absent), read with the pure-Python contract."""
    parsers = [_PARSERS[type(c.ltype)] for c in layout.key_columns]
    typed = tuple(
        tuple(
            None if part is None else parse(part) for parse, part in zip(parsers, key, strict=True)
        )
        for key in keys
    )
    hasher = RowHasher(layout)
    hashes: Hashes = dict.fromkeys(keys)
    selector = Partition(-1, key_columns=table.key_columns, keys=typed)
    positions = [table.columns.index(k) for k in table.key_columns]
    for batch in table.connector.read_partition(table.schema, table.columns, selector):
        for row in batch.to_pylist():
            values = [row[name] for name in table.columns]
            key: Key = tuple(None if values[i] is None else str(values[i]) for i in positions)
            # Equal rows of a table without a key share it: their hashes add up, so the
            # number of copies counts (a key is unique otherwise: its row's hash).
            hashes[key] = ((hashes[key] or 0) + hasher.row_hash(values)) & _MASK64
    return hashes


def confirm(
    result: ComparisonResult,
    layout: RowLayout,
    source: LiveTable,
    target: LiveTable,
    lag_s: float,
    sleep: Callable[[float], None] = time.sleep,
) -> ComparisonResult:
    """The result with in-flight differences removed or set apart (see the module doc)."""
    candidates = [d for d in result.differences if not isinstance(d, DuplicateKey)]
    if not candidates:
        return result
    keys = [d.key for d in candidates]
    first = _both(source, target, layout, keys)
    sleep(lag_s)
    second = _both(source, target, layout, keys)
    confirmed, in_flight = _classify(candidates, first, second)
    kept = [d for d in result.differences if isinstance(d, DuplicateKey)] + confirmed
    log.info(
        "comparison %s: %d confirmed, %d in flight, %d arrived after %.1f s",
        result.name,
        len(confirmed),
        len(in_flight),
        len(candidates) - len(confirmed) - len(in_flight),
        lag_s,
    )
    return _rebuilt(result, kept, in_flight, len(candidates))


def confirm_at_position(
    result: ComparisonResult,
    layout: RowLayout,
    source: LiveTable,
    target: LiveTable,
    source_position: Callable[[], object],
    wait_for_target: Callable[[Any], object],
    describe: Callable[[Any], str] = str,
) -> ComparisonResult:
    """The result with in-flight differences removed or set apart, without a sleep: the
    differing keys are read on the source, then the source's log end P2 is taken, the
    target is waited for until it has applied P2 and read, and the source is read again.
    Equal to the first source read: arrived; the source row changed since: in flight (the
    target may hold a newer change); else confirmed drift. ``describe`` spells a position
    as the source's product does (``Connector.describe_position``)."""
    candidates = [d for d in result.differences if not isinstance(d, DuplicateKey)]
    if not candidates:
        return result
    keys = [d.key for d in candidates]
    before = read_hashes(source, layout, keys)
    position = source_position()
    if position is not None:
        wait_for_target(position)
    target_now = read_hashes(target, layout, keys)
    after = read_hashes(source, layout, keys)
    confirmed: list[Difference] = []
    in_flight: list[Key] = []
    for difference in candidates:
        key = difference.key
        if before[key] == target_now[key]:
            continue  # arrived
        if after[key] != before[key]:
            in_flight.append(key)
        else:
            confirmed.append(difference)
    kept = [d for d in result.differences if isinstance(d, DuplicateKey)] + confirmed
    log.info(
        "comparison %s: %d confirmed, %d in flight, %d arrived by position %s",
        result.name,
        len(confirmed),
        len(in_flight),
        len(candidates) - len(confirmed) - len(in_flight),
        "none" if position is None else describe(position),
    )
    return _rebuilt(result, kept, in_flight, len(candidates))


def _both(
    source: LiveTable, target: LiveTable, layout: RowLayout, keys: Sequence[Key]
) -> tuple[Hashes, Hashes]:
    return read_hashes(source, layout, keys), read_hashes(target, layout, keys)


def _classify(
    candidates: Sequence[Difference],
    first: tuple[Hashes, Hashes],
    second: tuple[Hashes, Hashes],
) -> tuple[list[Difference], list[Key]]:
    confirmed: list[Difference] = []
    in_flight: list[Key] = []
    for difference in candidates:
        key = difference.key
        now = (second[0][key], second[1][key])
        if now[0] == now[1]:
            continue  # arrived
        if (first[0][key], first[1][key]) != now:
            in_flight.append(key)
        else:
            confirmed.append(difference)
    return confirmed, in_flight


def _rebuilt(
    result: ComparisonResult, kept: list[Difference], in_flight: list[Key], rechecked: int
) -> ComparisonResult:
    undetailed = result.differences_omitted
    counts: dict[str, int] = {}
    for difference in kept:
        counts[difference.kind] = counts.get(difference.kind, 0) + rows_of(difference)
    # undetailed ones stay counted (as omitted), unchecked
    total = undetailed + sum(rows_of(d) for d in kept)
    return replace(
        result,
        status=Status.DIFFERENCES if total else Status.IN_SYNC,
        differences=tuple(kept),
        differences_total=total,
        counts_by_kind=counts,
        in_flight=tuple(in_flight),
    )
