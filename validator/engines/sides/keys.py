"""The database engine's key and column phases, on the rows of mismatched leaves.

Keys of the two sides are matched by their canonical key bytes (as the databases wrote
them), so ``1.10`` and ``1.1``, or a UUID and its text, are one key. A key is reported as
the source writes it (the target's when the source lacks it), the way the Spark engine
casts it to text. Changed columns are found with the pure-Python contract on the rows
read again by key in each side's snapshot.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from merkle.canonical import payload_encoder
from merkle.layout import RowLayout
from validator.result import (
    MASK,
    Changed,
    ColumnChange,
    Difference,
    DuplicateKey,
    ExtraInTarget,
    Key,
    MissingInTarget,
    key_order,
)

_MASK64 = (1 << 64) - 1


@dataclass(slots=True)
class KeyEntry:
    """One key on one side: its values as the driver read them, how often it occurs, its
    row hash (the smallest, when duplicated), its leaf and the slice that read it."""

    values: tuple[Any, ...]
    count: int
    row_hash: int
    leaf: int
    slice: int


def key_bytes_of(raw: Any) -> bytes:
    """Canonical key bytes as a driver returns them (text, bytes or a memoryview)."""
    if isinstance(raw, str):
        return raw.encode("utf-8")
    return bytes(raw)


def collect_keys(
    rows: Iterable[tuple[Any, ...]], width: int, slice_index: int
) -> dict[bytes, KeyEntry]:
    """Entries of ``keyed_sql`` rows (``k0..k<width-1>, key bytes, leaf, row hash``)."""
    entries: dict[bytes, KeyEntry] = {}
    for row in rows:
        key = key_bytes_of(row[width])
        row_hash = int(row[width + 2]) & _MASK64
        entry = entries.get(key)
        if entry is None:
            entries[key] = KeyEntry(
                tuple(row[:width]), 1, row_hash, int(row[width + 1]), slice_index
            )
        else:
            entry.count += 1
            entry.row_hash = min(entry.row_hash, row_hash)
    return entries


@dataclass(frozen=True, slots=True)
class KeyFinding:
    """A differing key: its kind, both sides' entries (None where absent), its text and its
    canonical bytes."""

    kind: str
    key: Key
    source: KeyEntry | None
    target: KeyEntry | None
    key_bytes: bytes

    @property
    def leaf(self) -> int:
        entry = self.source or self.target
        assert entry is not None
        return entry.leaf

    @property
    def weight(self) -> int:
        """Findings this key counts for (a key duplicated on both sides is two; a whole
        row missing or extra counts once per copy)."""
        if self.kind != "duplicate_key":
            return max(abs(_count(self.source) - _count(self.target)), 1)
        return sum(1 for e in (self.source, self.target) if e is not None and e.count > 1)


def _count(entry: KeyEntry | None) -> int:
    return 0 if entry is None else entry.count


@dataclass(slots=True)
class KeyedDiff:
    """The differing keys of the mismatched leaves, and their counts."""

    findings: list[KeyFinding] = field(default_factory=list)
    by_kind: dict[str, int] = field(default_factory=dict)
    per_leaf: dict[int, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.by_kind.values())


def key_text(value: Any) -> str | None:
    """A key part as the Spark engine writes it (Spark's cast to string)."""
    if value is None:
        return None
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, dt.date):
        return value.isoformat()
    return str(value)


def _kind(source: KeyEntry | None, target: KeyEntry | None, whole_row: bool) -> str | None:
    if whole_row:  # equal rows are copies of one key: only their numbers can differ
        held, copies = _count(source), _count(target)
        return (
            None if held == copies else "missing_in_target" if held > copies else "extra_in_target"
        )
    if (source and source.count > 1) or (target and target.count > 1):
        return "duplicate_key"
    if target is None:
        return "missing_in_target"
    if source is None:
        return "extra_in_target"
    return "changed" if source.row_hash != target.row_hash else None


def classify(
    source: dict[bytes, KeyEntry], target: dict[bytes, KeyEntry], whole_row: bool = False
) -> KeyedDiff:
    """Every key of either side that differs, by kind and by leaf (``whole_row``: the key
    is every compared column, ``RowLayout.whole_row_key``)."""
    diff = KeyedDiff()
    for key in source.keys() | target.keys():
        left, right = source.get(key), target.get(key)
        kind = _kind(left, right, whole_row)
        if kind is None:
            continue
        present = left or right
        assert present is not None  # the key came from one of the sides
        values = present.values
        finding = KeyFinding(kind, tuple(key_text(v) for v in values), left, right, key)
        diff.findings.append(finding)
        diff.by_kind[kind] = diff.by_kind.get(kind, 0) + finding.weight
        diff.per_leaf[finding.leaf] = diff.per_leaf.get(finding.leaf, 0) + finding.weight
    return diff


def reported(diff: KeyedDiff, limit: int) -> list[KeyFinding]:
    """The findings a result details: by kind, then in the natural order of their typed key
    values (``key_order``, as the Spark engine sorts them), at most ``limit``."""
    ordered = sorted(diff.findings, key=lambda f: (f.kind, key_order(_typed_key(f))))
    return ordered[:limit]


def _typed_key(finding: KeyFinding) -> tuple[Any, ...]:
    """The finding's key values as the driver read them (the source's, when it has it)."""
    entry = finding.source or finding.target
    assert entry is not None  # a finding is a key of one side at least
    return entry.values


def to_differences(
    finding: KeyFinding, columns: dict[Key, tuple[ColumnChange, ...]]
) -> list[Difference]:
    """The result's differences for one finding (a duplicate key, one per side)."""
    if finding.kind == "missing_in_target":
        return [MissingInTarget(finding.key, rows=finding.weight)]
    if finding.kind == "extra_in_target":
        return [ExtraInTarget(finding.key, rows=finding.weight)]
    if finding.kind == "changed":
        return [Changed(finding.key, columns.get(finding.key, ()))]
    found: list[Difference] = []
    for side, entry in (("source", finding.source), ("target", finding.target)):
        if entry is not None and entry.count > 1:
            found.append(DuplicateKey(finding.key, side, entry.count))
    return found


ColumnsOf = Callable[[list[KeyFinding]], dict[Key, tuple[ColumnChange, ...]]]
"""An engine's columns phase: the changed columns of changed keys, by key."""


def detailed(diff: KeyedDiff, limit: int, columns_of: ColumnsOf) -> list[Difference]:
    """The differences a result details: the ``reported`` findings, with the columns
    ``columns_of`` finds changed in those of kind ``changed`` (not called when none is)."""
    findings = reported(diff, limit)
    changed = [finding for finding in findings if finding.kind == "changed"]
    columns = columns_of(changed) if changed else {}
    return [difference for f in findings for difference in to_differences(f, columns)]


def display(value: Any) -> str | None:
    """A column value as the Spark engine shows it (Spark's cast to string, roughly)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, dt.datetime):
        shown = value.astimezone(dt.UTC).replace(tzinfo=None) if value.tzinfo else value
        return shown.isoformat(sep=" ")
    if isinstance(value, bytes | bytearray):
        return "0x" + bytes(value).hex()
    return str(value)


class ColumnDiffer:
    """Names the changed columns of a key from its two rows (values in layout order)."""

    def __init__(self, layout: RowLayout, sensitive: frozenset[str]) -> None:
        self._layout = layout
        self._encoders = [payload_encoder(c.ltype, layout.options) for c in layout.columns]
        self._hidden = [c.name in sensitive or c.sensitive for c in layout.columns]

    def _payload(self, index: int, value: Any) -> bytes | None:
        return None if value is None else self._encoders[index](value)

    def changes(self, source: Sequence[Any], target: Sequence[Any]) -> Iterator[ColumnChange]:
        """The changed columns of two rows (values in layout order)."""
        payloads = [self._payload(index, value) for index, value in enumerate(target)]
        return self.changes_to_payloads(source, payloads, target)

    def changes_to_payloads(
        self, source: Sequence[Any], payloads: Sequence[bytes | None], target: Sequence[Any]
    ) -> Iterator[ColumnChange]:
        """The changed columns of a source row and a target row whose canonical payloads
        were computed elsewhere (Spark: ``merkle.spark.payload_column``); ``target`` holds its
        values to show."""
        for index, column in enumerate(self._layout.columns):
            left, right = source[index], target[index]
            if self._payload(index, left) == payloads[index]:
                continue
            hidden = self._hidden[index]
            yield ColumnChange(
                column.name, MASK if hidden else display(left), MASK if hidden else display(right)
            )
