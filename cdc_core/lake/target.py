"""What every pipeline target meets: the ``Sink`` contract and the events a sink writes.

A pipeline writes to the lake (``cdc_core.lake.sink.LakeSink``) or to a database
(``connectors.database_target``); both are ``Sink``s, and both write ``LakeEvent``s in
``TableBatch``es, skipping on a restart what they have recorded as ``Written``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from cdc_core.capture.events import CommittedTransaction, RowChange
from cdc_core.capture.position import Position
from cdc_core.capture.source import RefusedColumn, TableDescription
from cdc_core.lake.layout import RefreshMarks
from cdc_core.names import COMMIT_POS, COMMIT_TS, OP, SEQ, TXID

if TYPE_CHECKING:
    import pyarrow as pa

REFRESH_SEQ_BASE = 1 << 62  # a table refresh's rows order after every change at a position


class StaleDescriptionError(Exception):
    """A batch's values do not fit its table description: describe the table again.

    ``refusal``: the error to raise if no other description fits either (a type change the
    lake cannot follow), else None."""

    def __init__(self, table: str, refusal: Exception | None = None) -> None:
        super().__init__(f"the description of table {table} does not fit its events")
        self.table = table
        self.refusal = refusal


@dataclass(frozen=True, slots=True)
class LakeEvent:
    """One change as the lake stores it: the full row image plus its bookkeeping.

    ``row`` is the after-image (``c``, ``u``, ``r``), the before-image (``d``) or empty
    (``t``). ``seq`` orders events inside one ``commit_pos``.
    """

    op: str
    row: Mapping[str, object]
    commit_pos: int
    seq: int
    txid: str | None
    commit_ts: datetime | None

    @classmethod
    def of_change(cls, change: RowChange, seq: int, transaction: CommittedTransaction) -> LakeEvent:
        """The lake event of a rebuilt change of a committed transaction."""
        image = change.before if change.op == "d" else change.after
        return cls(
            change.op,
            image or {},
            transaction.commit_pos.value,
            seq,
            transaction.txid,
            transaction.commit_ts,
        )

    def to_record(self) -> dict[str, object]:
        """The changelog row: the image's columns, then the bookkeeping columns."""
        return {
            **self.row,
            OP: self.op,
            COMMIT_POS: self.commit_pos,
            SEQ: self.seq,
            TXID: self.txid,
            COMMIT_TS: self.commit_ts,
        }


@dataclass(slots=True)
class TableBatch:
    """The events of one table in one sink batch, in commit order."""

    description: TableDescription
    events: list[LakeEvent] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Written:
    """How far a pipeline's commits to one table reached: every event up to (``done``,
    ``seq``), and of the transaction at ``part_pos``, its events up to ``part_seq``."""

    done: int | None
    seq: int
    part_pos: int | None
    part_seq: int


def unwritten(mark: Written, events: list[LakeEvent]) -> list[LakeEvent]:
    """The events a table whose writes reached ``mark`` does not hold yet: after its
    position (and, at that very position, after the last seq written there: a table
    refresh's chunks can share a position), and after the last part written of a
    transaction too big for one batch."""
    return [
        event
        for event in events
        if (mark.done is None or (event.commit_pos, event.seq) > (mark.done, mark.seq))
        and not (event.commit_pos == mark.part_pos and event.seq <= mark.part_seq)
    ]


class Sink(Protocol):
    """Where a pipeline writes: the lake (``LakeSink``) or a database
    (``connectors.database_target``). Exactly once: whatever a sink has recorded as written
    (per table, up to a position and a seq there, or a part of a big transaction) it skips
    when a restarted pipeline hands it again."""

    def exists(self, table: str) -> bool:
        """Whether the sink holds a table for source table ``table``."""
        ...

    def where(self, table: str) -> str:
        """Where ``table`` lives, for messages."""
        ...

    def load_position(self, table: str) -> int | None:
        """The position the sink's writes to ``table`` reached (None: none finished)."""
        ...

    def remove_table(self, table: str) -> None:
        """Drop a table whose initial load did not finish."""
        ...

    def holds(self, description: TableDescription) -> bool:
        """Whether the table can hold every value of the described columns."""
        ...

    def refused(self, description: TableDescription) -> tuple[RefusedColumn, ...]:
        """The described columns this target has no exact type for (empty: none)."""
        ...

    def held_schema(self, table: str) -> pa.Schema | None:
        """The columns the target holds for ``table`` as the sink types its batches (None:
        not known, or the sink converts values by the target's own column types)."""
        ...

    def follow_schema(self, description: TableDescription, position: Position) -> None:
        """Add columns new at the source (existing rows hold NULL there)."""
        ...

    def retire_table(self, name: str, position: Position) -> object | None:
        """Move a table aside to load it again with another schema; where it went."""
        ...

    def write_snapshot(
        self, description: TableDescription, events: list[LakeEvent], position: Position
    ) -> None:
        """Write one chunk of a table's initial load."""
        ...

    def finish_snapshot(self, description: TableDescription, position: Position) -> None:
        """Record a table's initial load complete at ``position``."""
        ...

    def write(
        self,
        batches: Iterable[TableBatch],
        position: Position,
        tables: Sequence[str],
        marks: RefreshMarks | None = None,
    ) -> int:
        """Write whole transactions reaching ``position``; the events written."""
        ...

    def write_part(self, batches: Iterable[TableBatch], commit_pos: Position) -> int:
        """Write part of a transaction too big for one batch; the events written."""
        ...
