"""Runs an Oracle log reader through the CDC core (buffer, rebuild) and summarises the
committed events, so tests can compare them with exact expectations."""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from cdc_core.buffer.transaction_buffer import BufferConfig, TransactionBuffer
from cdc_core.capture.events import CommittedChange, RawChange
from cdc_core.capture.position import Position
from cdc_core.capture.source import Idle, LogReader, TableChanged
from cdc_core.rebuild.full_width import RebuildConfig, Rebuilder
from cdc_core.rebuild.image_store import RowImageStore

DATA = Path(__file__).parent / "data"


@dataclass(frozen=True)
class Event:
    """One rebuilt committed change, as the lake would get it."""

    txid: str
    commit_scn: int
    seq: int
    op: str
    table: str
    locator: Hashable
    after: Mapping[str, object] | None
    before: Mapping[str, object] | None


def until_idle(changes: Iterator[RawChange | TableChanged | Idle]) -> Iterator[RawChange]:
    """The raw changes a reader yields before it first reports that it caught up (DDL it
    classified is left out)."""
    for change in changes:
        if isinstance(change, Idle):
            return
        if not isinstance(change, TableChanged):
            yield change


def _event(txid: str, commit_pos: Position, committed: CommittedChange) -> Event:
    change = committed.change
    return Event(
        txid, commit_pos.value, committed.seq, change.op, change.table, change.locator,
        change.after, change.before,
    )  # fmt: skip


class Core:
    """A transaction buffer and a rebuilder over one row image store."""

    def __init__(
        self,
        state: Path,
        budget: int = 1 << 20,
        store: RowImageStore | None = None,
        rebuild: RebuildConfig | None = None,
    ):
        self.config = BufferConfig(budget, state / "spill")
        self.buffer = TransactionBuffer(self.config)
        self.store = store or RowImageStore(state / "images")
        self.rebuilder = Rebuilder(self.store, rebuild)
        self.max_spilled = 0

    def feed(self, changes: Iterator[RawChange]) -> list[Event]:
        """Feed raw changes; the rebuilt events of the transactions they commit."""
        events: list[Event] = []
        for change in changes:
            spilled = sum(t.spilled_bytes for t in self.buffer.open_transactions())
            self.max_spilled = max(self.max_spilled, spilled)
            for txn in self.buffer.feed(change):
                for committed in self.rebuilder.iter_rebuilt(txn):
                    events.append(_event(txn.txid, txn.commit_pos, committed))
        return events

    def run(self, reader: LogReader, start: Position | None = None) -> list[Event]:
        """Everything ``reader`` yields from ``start`` until it is idle."""
        return self.feed(until_idle(reader.iter_changes(start)))
