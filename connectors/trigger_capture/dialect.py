"""The per-product seam of trigger capture: what a product's ``trigger_dialect.py`` provides.

The generic part (``gaps``, ``log_reader``, ``install``) never asks which product it runs on;
a product adds one file implementing ``TriggerDialect``:

- the set-up and removal SQL for the captured tables (a logging table per table holding
  the row images, AFTER INSERT/UPDATE/DELETE row triggers writing them, and the capture
  sequence), each statement idempotent;
- a read session: one consistent read of the logging tables that tells which capture
  positions above a point are visible (committed) and which transactions were still
  running (the product's own way of knowing: PostgreSQL's transaction id locks, HANA's
  ``M_TRANSACTIONS``; a single-writer product has none), and yields the rows of the
  committed transactions up to a position, converted as the product's snapshot reads them;
- the initial snapshot, whose position is a capture position (``SnapshotReader``);
- the purge of logging rows at or below a position.

Row images: inserts and updates record the full new row (no rebuild needed), deletes the
old row. An update that changes the key is recorded as a delete of the old row and an
insert of the new one, so the lake's key-move handling applies unchanged.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from cdc_core.capture.source import SnapshotReader, TableDescription
from cdc_core.errors import ContractError

CaptureOp = Literal["c", "u", "d", "t"]


@dataclass(frozen=True, slots=True)
class CaptureRow:
    """One logging row of a committed transaction.

    Args:
        position: The capture position of its transaction (the transaction's commit_pos).
        seq: Its order among all captured rows (ascending within a transaction).
        txid: The transaction's id as the product spells it.
        table: The captured table (its name in the pipeline).
        op: ``c``, ``u``, ``d`` or ``t`` (truncate).
        row: The new row (``c``, ``u``) or the old row (``d``), every column; empty for ``t``.
        written_at: When the trigger ran (UTC).
    """

    position: int
    seq: int
    txid: str
    table: str
    op: CaptureOp
    row: Mapping[str, object]
    written_at: datetime

    def __post_init__(self) -> None:
        if self.op not in ("c", "u", "d", "t"):
            raise ContractError(f"unknown capture op {self.op!r}", {"table": self.table})


@dataclass(frozen=True, slots=True)
class VisibleCommits:
    """What one read sees above a position.

    Args:
        positions: The capture positions of committed transactions above it, ascending.
        taken: The capture sequence's value, read before the read's snapshot began.
        running: The transactions running when ``taken`` was read, listed after reading it
            and before the snapshot (they may fill gaps at or below ``taken``); empty for a
            single-writer product. See ``connectors.trigger_capture.gaps``.
    """

    positions: tuple[int, ...]
    taken: int
    running: frozenset[str]


class CaptureSession(ABC):
    """One consistent read of the logging tables."""

    @abstractmethod
    def visible_commits(self, after: int) -> VisibleCommits:
        """The committed capture positions above ``after`` and the transactions running."""

    @abstractmethod
    def iter_rows(self, after: int, upto: int) -> Iterator[CaptureRow]:
        """The rows of the committed transactions with ``after < position <= upto``, ordered
        by (position, seq)."""


class TriggerDialect(ABC):
    """A product's trigger capture (see the module docstring)."""

    name: str  # the product, as messages name it
    tables: tuple[str, ...]  # the captured tables, as ``RowChange.table`` names them

    @abstractmethod
    def install_statements(self, tables: Sequence[str]) -> list[str]:
        """The idempotent SQL that sets capture up for ``tables``, in order."""

    @abstractmethod
    def removal_statements(self, tables: Sequence[str]) -> list[str]:
        """The idempotent SQL that removes capture of ``tables`` (and what only they used)."""

    @abstractmethod
    def execute(self, statements: Sequence[str]) -> None:
        """Run ``statements`` in one transaction where the product allows DDL in one."""

    @abstractmethod
    def check_installed(self, tables: Sequence[str]) -> None:
        """Raise ``TerminalError`` naming ``replcheck cdc install-capture`` when a table's
        logging table or triggers are missing."""

    @abstractmethod
    def read_session(self) -> AbstractContextManager[CaptureSession]:
        """A consistent read, ended when the context exits."""

    @abstractmethod
    def end_position(self) -> int:
        """The capture sequence's current value: every commit so far is at or below it."""

    @abstractmethod
    def describe(self, table: str) -> TableDescription:
        """The table's columns and key, as the lake stores them."""

    @abstractmethod
    def snapshots(self, tables: Sequence[str]) -> SnapshotReader:
        """Reads ``tables`` in one snapshot whose position is a capture position: it holds
        exactly the transactions at or below it."""

    @abstractmethod
    def table_names(self) -> list[str]:
        """Every table of the source (without the capture's own)."""

    @abstractmethod
    def purge(self, upto: int, batch_rows: int) -> int:
        """Delete one batch of logging rows at or below ``upto`` (about ``batch_rows``);
        returns how many rows went (0: none is left at or below ``upto``)."""

    @abstractmethod
    def backlog(self) -> int:
        """The logging rows not purged yet (the purge lag, in rows)."""

    @abstractmethod
    def close(self) -> None:
        """Release connections."""
