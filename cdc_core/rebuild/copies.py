"""Equal rows of a table without a key, held apart in the lake by their copy number.

A table without a primary key or unique index is located by all its columns, so two equal
rows share a locator, while the lake's mirror keeps one row per key. The pipeline gives
such a table one more key column, ``COPY`` (``cdc_core.lake.layout``): the n equal rows of a value
are copies 0 to n - 1 of it, in the mirror, the changelog and the row image store (whose
locator is the row's values followed by its copy number). The numbering stays contiguous:

- an insert of a value takes copy n (the value's count before it);
- a delete takes copy n - 1 (all copies are equal, so which one goes is not observable);
- an update moves copy n - 1 of the old value to copy m of the new one (m its count), and
  is emitted as a key change, so a consumer deletes the old copy and writes the new one;
- a snapshot or a refresh numbers the copies it reads in the order it reads them.

Counts are read from the row image store, as the rebuild reads images: the copies of a
value at a point of the log are the images stored at ``(value, 0)``, ``(value, 1)``, ...
Only a table keyed by all its columns gets copies: two rows on a configured key that the
source does not keep unique may differ, and which of them a change means cannot be told
(``cdc_core.rebuild.full_width.EqualKeysError``).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import replace

from cdc_core.capture.position import Position
from cdc_core.capture.source import TableDescription
from cdc_core.errors import ContractError
from cdc_core.lake.target import LakeEvent
from cdc_core.names import COPY
from cdc_core.rebuild.image_store import RowImageStore

__all__ = [
    "COPY",
    "has_copies",
    "held_copies",
    "numbered",
    "numbered_event",
    "source_key",
    "source_locator",
    "with_copy",
]


def numbered(description: TableDescription) -> TableDescription:
    """``description`` with ``COPY`` as its last key column if it is located by all its
    columns and the source does not keep them unique; else unchanged."""
    import pyarrow as pa

    key, schema = description.key, description.schema
    if description.unique or not key or has_copies(key) or set(key) != set(schema.names):
        return description
    if COPY in schema.names:
        raise ContractError(
            f"table {description.table} has no key and a column named {COPY}, the column the"
            " lake numbers equal rows with; rename it at the source or give the table a"
            " primary key",
            {"table": description.table},
        )
    field = pa.field(COPY, pa.int64(), nullable=False)
    return replace(description, schema=schema.append(field), key=(*key, COPY))


def has_copies(key: Sequence[str]) -> bool:
    """Whether a lake key (``TableDescription.key``) numbers equal rows."""
    return bool(key) and key[-1] == COPY


def source_key(key: Sequence[str]) -> tuple[str, ...]:
    """The columns of a lake key the source has (all but ``COPY``)."""
    return tuple(key[:-1]) if has_copies(key) else tuple(key)


def source_locator(key: Sequence[str], locator: Hashable) -> Hashable:
    """A locator as the source knows it: the values, without a copy number."""
    if has_copies(key) and isinstance(locator, tuple) and len(locator) == len(key):
        return locator[:-1]
    return locator


def with_copy(locator: Hashable, copy: int) -> tuple[object, ...]:
    """The locator of one copy of the value ``locator`` (a tuple of its column values)."""
    assert isinstance(locator, tuple)  # a table with copies is located by its values
    return (*locator, copy)


def held_copies(store: RowImageStore, table: str, value: Hashable, at: Position, seq: int) -> int:
    """How many copies of ``value`` the store holds just before ``(at, seq)``."""
    count = 0
    while store.get(table, with_copy(value, count), at, seq=seq - 1) is not None:
        count += 1
    return count


def numbered_event(event: LakeEvent, copy: int) -> LakeEvent:
    """A snapshot or refresh row's event as copy ``copy`` of its values."""
    return replace(event, row={**event.row, COPY: copy})
