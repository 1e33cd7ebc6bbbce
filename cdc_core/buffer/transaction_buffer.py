"""The transaction buffer: raw changes in log order in, committed transactions out.

Connectors feed raw changes (``cdc_core.capture.events``) in log order, interleaved across
transactions. The buffer keeps each open transaction's changes and emits them only at its
commit, in commit order and in their original order inside the transaction; rolled-back
work (whole transactions and partial rollbacks) is dropped.

Memory is bounded by ``BufferConfig.memory_budget_bytes``: changes are held as objects
with an estimate of their size (serialising every change only to measure it cost more than
the rest of the buffer), and when the estimate of buffered bytes exceeds the budget the
largest open transaction's in-memory changes are encoded and appended to its checksummed
segment files (``cdc_core.buffer.spill``), to be streamed back in order at commit.

Checkpoints persist the open transactions (``checkpoint_state``), so a restart resumes at
the last change fed instead of at the begin of the oldest open transaction.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cdc_core.buffer.buffer_state import BufferState, TransactionState
from cdc_core.buffer.spill import (
    SUFFIX,
    TransactionSpill,
    decode_change,
    encode_change,
    fsync_directory,
)
from cdc_core.capture.events import (
    Begin,
    Commit,
    CommittedChange,
    CommittedTransaction,
    PartialRollback,
    RawChange,
    Rollback,
    RowChange,
)
from cdc_core.capture.position import Position
from cdc_core.errors import ConfigError, TerminalError

logger = logging.getLogger(__name__)

# What Python holds for one buffered change, estimated without serialising it (changes stay
# objects in memory and are encoded only when they spill): the RowChange, its Position and
# locator tuple and the (seq, change, size) entry; per image a dict; per column the dict
# entry and a value object; plus the characters of str and bytes values.
CHANGE_OVERHEAD_BYTES = 320
IMAGE_BYTES = 232
COLUMN_BYTES = 72
_TEXT = frozenset({str, bytes})  # the values whose length counts (decoders give exact types)


class LogOrderError(TerminalError):
    """The raw changes are not in log order (a position went backwards, a begin repeated)."""


@dataclass(frozen=True, slots=True)
class BufferConfig:
    """The transaction buffer's section of the configuration.

    Args:
        memory_budget_bytes: Upper bound on the estimated bytes of buffered changes; beyond
            it the largest open transaction spills to disk. 0 spills every change.
        spill_dir: Where segment files go. It belongs to one buffer: a restore deletes the
            segment files in it that the restored checkpoint does not refer to.
        max_transaction_age: Warn (once per transaction) when one stays open longer.
        max_transaction_changes: Warn (once per transaction) when one has more changes.
        segment_max_bytes: Size at which a transaction's spill starts a new segment file.
    """

    memory_budget_bytes: int
    spill_dir: Path
    max_transaction_age: timedelta | None = None
    max_transaction_changes: int | None = None
    segment_max_bytes: int = 64 << 20

    def __post_init__(self) -> None:
        if self.memory_budget_bytes < 0:
            raise ConfigError("buffer.memory_budget_bytes must be >= 0")
        if not isinstance(self.spill_dir, Path):
            raise ConfigError("buffer.spill_dir must be a Path")
        if self.max_transaction_age is not None and self.max_transaction_age <= timedelta(0):
            raise ConfigError("buffer.max_transaction_age must be positive")
        if self.max_transaction_changes is not None and self.max_transaction_changes < 1:
            raise ConfigError("buffer.max_transaction_changes must be >= 1")
        if self.segment_max_bytes < 1:
            raise ConfigError("buffer.segment_max_bytes must be >= 1")


@dataclass(frozen=True, slots=True)
class OpenTransactionInfo:
    """What ``TransactionBuffer.open_transactions`` reports about one open transaction."""

    txid: str
    begin_pos: Position
    begun_at: datetime
    age: timedelta
    change_count: int
    memory_bytes: int
    spilled_bytes: int


@dataclass(slots=True)
class _OpenTransaction:
    """Mutable bookkeeping of one open transaction (private to the buffer)."""

    txid: str
    begin_pos: Position
    begun_at: datetime
    spill: TransactionSpill
    next_seq: int = 0
    change_count: int = 0
    memory: list[tuple[int, RowChange, int]] = field(default_factory=list)  # seq, change, size
    memory_bytes: int = 0
    undone: set[int] = field(default_factory=set)
    warned: set[str] = field(default_factory=set)
    # Undos that found no change in memory, resolved against the spill in one pass (before
    # the next spill of this transaction, its commit or a checkpoint): a savepoint rollback
    # of k spilled changes reads the spill once, not k times.
    pending_undos: list[PartialRollback] = field(default_factory=list)


class _CommittedChanges:
    """The changes of a committed transaction: spilled segments first, then memory."""

    def __init__(self, txn: _OpenTransaction, on_done: Callable[[list[str]], None]) -> None:
        self._txn = txn
        self._on_done = on_done

    def __iter__(self) -> Iterator[CommittedChange]:
        txn = self._txn
        spilled = txn.spill.iter_changes(txn.undone) if txn.spill.names() else iter(())
        out = 0
        for _, change in spilled:
            yield CommittedChange(out, change)
            out += 1
        for _, change, _ in txn.memory:  # never undone: an undo removes it from memory
            yield CommittedChange(out, change)
            out += 1
        self._on_done(txn.spill.names())


def _utc_now() -> datetime:
    return datetime.now(UTC)


def estimated_bytes(change: RowChange) -> int:
    """Roughly the memory a buffered change holds (see ``CHANGE_OVERHEAD_BYTES``)."""
    size = CHANGE_OVERHEAD_BYTES
    images: tuple[Mapping[str, Any] | None, ...] = (change.after, change.before)
    for image in images:  # values of any type: only str and bytes are measured
        if image:
            size += IMAGE_BYTES + COLUMN_BYTES * len(image)
            # Per value: a comprehension of exact types runs twice as fast as a loop.
            size += sum([len(value) for value in image.values() if type(value) in _TEXT])
    return size


def _unmatched(change: PartialRollback) -> None:
    # The undone change predates what we hold (e.g. mining began mid-transaction).
    logger.warning(
        "partial rollback in transaction %s at %s matches no change of table %s",
        change.txid,
        change.position,
        change.table,
    )


class TransactionBuffer:
    """Buffers raw changes per transaction and emits them at commit, in commit order.

    Args:
        config: The buffer's configuration.
        clock: Returns the current time (UTC); transaction ages are measured with it.
    """

    def __init__(self, config: BufferConfig, *, clock: Callable[[], datetime] = _utc_now) -> None:
        self.config = config
        self._clock = clock
        self._open: dict[str, _OpenTransaction] = {}  # insertion order is begin order
        self._memory_bytes = 0
        self._high_water: Position | None = None
        self._high_water_count = 0
        self._replay_skip: int | None = None  # set after a restore, until new changes arrive
        self._pinned: set[str] = set()  # segments a checkpoint may still need
        self._retired: set[str] = set()  # pinned segments of finished transactions
        config.spill_dir.mkdir(parents=True, exist_ok=True)

    @property
    def memory_bytes(self) -> int:
        """The estimate of bytes held in memory by open transactions."""
        return self._memory_bytes

    def feed(self, change: RawChange) -> list[CommittedTransaction]:
        """Apply one raw change; returns the transaction it commits, if any.

        Changes must come in log order: positions never go backwards, except that after
        ``restore`` changes the restored state already holds are recognised and ignored.

        Raises:
            LogOrderError: A position went backwards, or a transaction began twice.
        """
        if self._already_fed(change.position):
            return []
        if isinstance(change, RowChange):
            self._add(change)
        elif isinstance(change, Commit):
            return [self._commit(change)]
        elif isinstance(change, Begin):
            self._begin(change)
        elif isinstance(change, PartialRollback):
            self._undo(change)
        elif isinstance(change, Rollback):
            self._rollback(change)
        self._check_age_limit()
        return []

    def _already_fed(self, position: Position) -> bool:
        """Track the high-water mark; True for a change a restored checkpoint already holds."""
        high = self._high_water
        if high is None or position > high:
            self._high_water, self._high_water_count, self._replay_skip = position, 1, None
            return False
        if position == high:
            if self._replay_skip:
                self._replay_skip -= 1
                return True
            self._high_water_count += 1
            self._replay_skip = None
            return False
        if self._replay_skip is not None:
            return True
        raise LogOrderError(
            f"position {position} comes after {high} in the log but is lower; "
            "the log reader must feed changes in log order",
            {"position": position.text},
        )

    def _begin(self, change: Begin) -> _OpenTransaction:
        if change.txid in self._open:
            raise LogOrderError(
                f"transaction {change.txid} begins twice", {"position": change.position.text}
            )
        spill = TransactionSpill(
            self.config.spill_dir, change.txid, (), self.config.segment_max_bytes
        )
        txn = _OpenTransaction(change.txid, change.position, self._clock(), spill)
        self._open[change.txid] = txn
        return txn

    def _add(self, change: RowChange) -> None:
        txn = self._open.get(change.txid)
        if txn is None:
            # Oracle LogMiner may show changes of a transaction whose start predates mining.
            txn = self._begin(Begin(change.txid, change.position))
        size = estimated_bytes(change)
        txn.memory.append((txn.next_seq, change, size))
        txn.next_seq += 1
        txn.change_count += 1
        txn.memory_bytes += size
        self._memory_bytes += size
        self._check_size_limit(txn)
        if self._memory_bytes > self.config.memory_budget_bytes:
            self._enforce_budget()

    def _enforce_budget(self) -> None:
        """Spill the largest open transactions until the estimate is within the budget."""
        while self._memory_bytes > self.config.memory_budget_bytes:
            largest = max(self._open.values(), key=lambda txn: txn.memory_bytes)
            if not largest.memory:
                break  # nothing left to spill: never loop on an accounting error
            self._spill(largest)

    def _spill(self, txn: _OpenTransaction) -> None:
        self._resolve_undos(txn)  # before newer records join the spill
        written = txn.spill.append([(seq, encode_change(change)) for seq, change, _ in txn.memory])
        logger.debug(
            "spilled %s changes (%s bytes) of transaction %s", len(txn.memory), written, txn.txid
        )
        self._memory_bytes -= txn.memory_bytes
        txn.memory = []
        txn.memory_bytes = 0

    def _undo(self, change: PartialRollback) -> None:
        txn = self._open.get(change.txid)
        if txn is not None and self._undo_in_memory(txn, change):
            txn.change_count -= 1
        elif txn is not None and txn.spill.names():
            txn.pending_undos.append(change)
        else:
            _unmatched(change)

    def _undo_in_memory(self, txn: _OpenTransaction, change: PartialRollback) -> bool:
        for index in range(len(txn.memory) - 1, -1, -1):
            _, held, size = txn.memory[index]
            if held.table == change.table and held.locator == change.locator:
                del txn.memory[index]
                txn.memory_bytes -= size
                self._memory_bytes -= size
                return True
        return False

    def _resolve_undos(self, txn: _OpenTransaction) -> None:
        """Each pending undo takes the newest spilled change of its row not undone yet.

        Spilled records are immutable: the undone seqs are remembered and skipped when read.
        """
        if not txn.pending_undos:
            return
        wanted = Counter((undo.table, undo.locator) for undo in txn.pending_undos)
        found: dict[tuple[str, Hashable], list[int]] = {key: [] for key in wanted}
        for seq, payload in txn.spill.iter_records():
            if seq in txn.undone:
                continue
            change = decode_change(txn.txid, payload)
            seqs = found.get((change.table, change.locator))
            if seqs is not None:
                seqs.append(seq)
        unmatched = Counter[tuple[str, Hashable]]()
        for key, count in wanted.items():
            newest = sorted(found[key])[-count:]
            txn.undone.update(newest)
            txn.change_count -= len(newest)
            unmatched[key] = count - len(newest)
        for undo in txn.pending_undos:
            if unmatched[(undo.table, undo.locator)] > 0:
                unmatched[(undo.table, undo.locator)] -= 1
                _unmatched(undo)
        txn.pending_undos = []

    def _rollback(self, change: Rollback) -> None:
        txn = self._open.pop(change.txid, None)
        if txn is None:
            return
        self._memory_bytes -= txn.memory_bytes
        self._retire(txn.spill.names())

    def _commit(self, change: Commit) -> CommittedTransaction:
        txn = self._open.pop(change.txid, None)
        if txn is None:
            # A transaction with no row changes still moves the lake's position forward.
            return CommittedTransaction(change.txid, None, change.position, change.commit_ts, 0, ())
        self._resolve_undos(txn)
        self._memory_bytes -= txn.memory_bytes
        changes = _CommittedChanges(txn, self._retire)
        return CommittedTransaction(
            txn.txid, txn.begin_pos, change.position, change.commit_ts, txn.change_count, changes
        )

    def _retire(self, names: Iterable[str]) -> None:
        """Delete a finished transaction's segments, unless a checkpoint may still need them."""
        for name in names:
            if name in self._pinned:
                self._retired.add(name)
            else:
                (self.config.spill_dir / name).unlink(missing_ok=True)

    def _check_size_limit(self, txn: _OpenTransaction) -> None:
        limit = self.config.max_transaction_changes
        if limit is None or txn.next_seq <= limit or "size" in txn.warned:
            return
        txn.warned.add("size")
        logger.warning(
            "transaction %s has more than %s changes (begun at %s); it is kept, not dropped",
            txn.txid,
            limit,
            txn.begin_pos,
        )

    def _check_age_limit(self) -> None:
        limit = self.config.max_transaction_age
        if limit is None or not self._open:
            return
        now = self._clock()
        for txn in self._open.values():  # oldest first: stop at the first young one
            age = now - txn.begun_at
            if age <= limit:
                return
            if "age" not in txn.warned:
                txn.warned.add("age")
                logger.warning(
                    "transaction %s has been open for %s (limit %s, begun at %s, %s changes);"
                    " it is kept, not dropped",
                    txn.txid,
                    age,
                    limit,
                    txn.begin_pos,
                    txn.change_count,
                )

    def open_transactions(self) -> list[OpenTransactionInfo]:
        """The open transactions, oldest (by begin) first, with their age and size."""
        now = self._clock()
        return [
            OpenTransactionInfo(
                txn.txid,
                txn.begin_pos,
                txn.begun_at,
                now - txn.begun_at,
                txn.change_count,
                txn.memory_bytes,
                txn.spill.size_bytes,
            )
            for txn in self._open.values()
        ]

    def oldest_open_transaction(self) -> OpenTransactionInfo | None:
        """The open transaction that began first, or ``None``."""
        report = self.open_transactions()
        return report[0] if report else None

    def checkpoint_state(self) -> BufferState:
        """Persist every open transaction's changes and describe them in a ``BufferState``.

        All in-memory changes are appended to segment files, sealed and fsynced first, so
        the state holds every change fed so far that belongs to an open transaction.

        Invariant: everything in the log before ``safe_restart_position()`` -- and the first
        ``high_water_count`` changes at it -- is either (a) in a transaction this buffer has
        already emitted or dropped (rollback), or (b) in the returned state. Hence call this
        only once every ``CommittedTransaction`` returned by ``feed`` has been consumed and
        made durable downstream; then write the state durably (``to_bytes``) and call
        ``release_checkpoint`` with it.
        """
        for txn in self._open.values():
            self._resolve_undos(txn)
            if txn.memory:
                self._spill(txn)
            txn.spill.sync()
        fsync_directory(self.config.spill_dir)
        transactions = tuple(self._state_of(txn) for txn in self._open.values())
        for state in transactions:
            self._pinned.update(ref.name for ref in state.segments)
        return BufferState(
            self._high_water,
            self._high_water_count,
            transactions,
            tuple(sorted(self._retired)),
        )

    @staticmethod
    def _state_of(txn: _OpenTransaction) -> TransactionState:
        return TransactionState(
            txn.txid,
            txn.begin_pos,
            txn.begun_at,
            txn.next_seq,
            txn.change_count,
            txn.spill.segments,
            frozenset(txn.undone),
            frozenset(txn.warned),
        )

    def release_checkpoint(self, state: BufferState) -> None:
        """Call once ``state`` is durable: deletes the segments no older checkpoint needs."""
        for name in state.obsolete_segments:
            (self.config.spill_dir / name).unlink(missing_ok=True)
            self._pinned.discard(name)
            self._retired.discard(name)

    def safe_restart_position(self) -> Position | None:
        """Where to re-read the log from after restoring the latest checkpoint.

        It is the position of the last change fed (``None`` if none was). Re-read the log
        from any position at or before it: changes the restored state already holds (those
        before it, and the first ``high_water_count`` at it) are ignored by ``feed``.
        """
        return self._high_water

    @classmethod
    def restore(
        cls,
        config: BufferConfig,
        state: BufferState,
        *,
        clock: Callable[[], datetime] = _utc_now,
    ) -> TransactionBuffer:
        """A buffer holding exactly what ``state`` holds (see ``checkpoint_state``).

        Segment files in ``config.spill_dir`` the state does not refer to (written after the
        checkpoint, or obsolete) are deleted.

        Raises:
            SpillCorruptError: A segment the state refers to is missing or has another size.
        """
        buffer = cls(config, clock=clock)
        for saved in state.transactions:
            buffer._open[saved.txid] = buffer._reopen(saved)
            buffer._pinned.update(ref.name for ref in saved.segments)
        buffer._high_water = state.high_water
        buffer._high_water_count = state.high_water_count
        buffer._replay_skip = state.high_water_count
        buffer._delete_orphans()
        return buffer

    def _reopen(self, saved: TransactionState) -> _OpenTransaction:
        spill = TransactionSpill(
            self.config.spill_dir, saved.txid, saved.segments, self.config.segment_max_bytes
        )
        spill.check_files()
        return _OpenTransaction(
            saved.txid,
            saved.begin_pos,
            saved.begun_at,
            spill,
            next_seq=saved.next_seq,
            change_count=saved.change_count,
            undone=set(saved.undone),
            warned=set(saved.warned),
        )

    def _delete_orphans(self) -> None:
        for path in self.config.spill_dir.glob(f"*{SUFFIX}"):
            if path.name not in self._pinned:
                logger.info("deleting spill segment %s, not in the restored checkpoint", path)
                path.unlink(missing_ok=True)
