"""The raw change model connectors produce, and the committed transactions the buffer emits.

Connectors turn a source's log into a stream of raw changes in log order, interleaved across
transactions (DESIGN.md, "Change events and the lake"): ``Begin``, ``RowChange``,
``PartialRollback``, ``Rollback`` and ``Commit``.
``cdc_core.buffer.transaction_buffer.TransactionBuffer`` turns that stream into
``CommittedTransaction`` values, in commit order, without rolled-back work.

Row values stay plain Python objects (int, str, Decimal, datetime, bytes, None, ``ABSENT``).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from itertools import repeat
from typing import Final, Literal

from cdc_core.capture.position import Position
from cdc_core.errors import ContractError

Op = Literal["c", "u", "d", "t"]
ROW_OPS: Final = frozenset({"c", "u", "d", "t"})


class _Absent:
    """The type of ``ABSENT``: a column the log did not carry, distinct from SQL NULL."""

    __slots__ = ()
    _instance: _Absent | None = None

    def __new__(cls) -> _Absent:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        # Truthiness of an absent value is a bug waiting to happen; make it loud.
        raise TypeError("ABSENT has no truth value; compare with `is ABSENT`")

    def __reduce__(self) -> str:
        # Pickle by reference to the module attribute, so unpickling yields the singleton.
        return "ABSENT"


ABSENT: Final = _Absent()
"""A column the log did not carry (e.g. MariaDB's MINIMAL row image); never NULL."""


class _Unavailable:
    """The type of ``UNAVAILABLE``: a column the change set, whose value the log cannot show."""

    __slots__ = ()
    _instance: _Unavailable | None = None

    def __new__(cls) -> _Unavailable:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNAVAILABLE"

    def __bool__(self) -> bool:
        raise TypeError("UNAVAILABLE has no truth value; compare with `is UNAVAILABLE`")

    def __reduce__(self) -> str:
        return "UNAVAILABLE"


UNAVAILABLE: Final = _Unavailable()
"""A column whose new value the log cannot render (LogMiner's ``Unsupported Type``, LONG):
unlike ``ABSENT`` it may have changed, so the row image store's value is stale. The rebuild
fetches it from the source as of the change's commit position, or stops; never NULL."""


def key_values(image: Mapping[str, object], columns: Iterable[str]) -> tuple[object, ...]:
    """The values of ``columns`` in ``image``, ``ABSENT`` where it lacks one (in C: this runs
    for every row a log reader decodes)."""
    return tuple(map(image.get, columns, _ABSENT_FOREVER))


def lacks_absent(values: Iterable[object]) -> bool:
    """Whether no value is ``ABSENT``. A plain identity loop: ``in`` would call each value's
    ``__eq__`` (Decimal's does isinstance checks against ABCs)."""
    for value in values:  # noqa: SIM110 (a generator costs twice as much here)
        if value is ABSENT:
            return False
    return True


_ABSENT_FOREVER: Final = repeat(ABSENT)


@dataclass(frozen=True, slots=True)
class Interval:
    """A duration as PostgreSQL keeps it; ``days`` fold into ``micros`` when encoded.

    A row value (Oracle ``INTERVAL YEAR TO MONTH``): it lives here, with the other values
    of the change model, so the state codec can store it without importing ``merkle``.
    """

    months: int = 0
    days: int = 0
    micros: int = 0


def _check_txid(txid: str) -> None:
    if not isinstance(txid, str) or not txid:
        raise ContractError(f"a transaction id must be a non-empty str, not {txid!r}")


@dataclass(frozen=True, slots=True)
class Begin:
    """The start of transaction ``txid`` at ``position``."""

    txid: str
    position: Position

    def __post_init__(self) -> None:
        _check_txid(self.txid)


@dataclass(frozen=True, slots=True)
class RowChange:
    """One row change inside transaction ``txid``.

    Args:
        txid: The transaction the change belongs to.
        position: Where the change is in the log.
        op: ``c`` insert, ``u`` update, ``d`` delete, ``t`` truncate.
        table: The source table, as the connector names it.
        locator: What identifies the row in the log (key values or a ROWID); ``None`` for
            truncates. Partial rollbacks match on it.
        after: The after-image (``None`` for deletes and truncates); columns the log did
            not carry are ``ABSENT``.
        before: The before-image, when the log carries one.
        new_locator: For an update that moves the row to another physical locator (an
            Oracle ROWID after row movement), the locator it moves to; ``None`` otherwise.
    """

    txid: str
    position: Position
    op: Op
    table: str
    locator: Hashable
    after: Mapping[str, object] | None = None
    before: Mapping[str, object] | None = None
    new_locator: Hashable | None = None

    def __post_init__(self) -> None:
        _check_txid(self.txid)
        if self.op not in ROW_OPS:
            raise ContractError(f"unknown row change op {self.op!r} (known: c, u, d, t)")
        if self.op in ("c", "u") and self.after is None:
            raise ContractError(f"a {self.op!r} change needs an after-image", {"txid": self.txid})
        if self.op in ("d", "t") and self.after is not None:
            raise ContractError(f"a {self.op!r} change has no after-image", {"txid": self.txid})
        if self.new_locator is not None and self.op != "u":
            raise ContractError("only an update can move a row", {"txid": self.txid})


@dataclass(frozen=True, slots=True)
class PartialRollback:
    """Undo the latest not-yet-undone change of ``txid`` to ``table`` + ``locator``.

    This is what a rollback to a savepoint, or a failed statement, looks like in a log that
    records undo row by row (Oracle LogMiner's ``ROLLBACK = 1`` rows).
    """

    txid: str
    position: Position
    table: str
    locator: Hashable

    def __post_init__(self) -> None:
        _check_txid(self.txid)


@dataclass(frozen=True, slots=True)
class Rollback:
    """Transaction ``txid`` was rolled back: none of its changes happened."""

    txid: str
    position: Position

    def __post_init__(self) -> None:
        _check_txid(self.txid)


@dataclass(frozen=True, slots=True)
class Commit:
    """Transaction ``txid`` committed.

    ``position`` is the transaction's ``commit_pos``: the position just *after* its commit
    record, so a snapshot taken at P contains exactly the transactions with
    ``commit_pos <= P`` (DESIGN.md, "Positions").
    """

    txid: str
    position: Position
    commit_ts: datetime

    def __post_init__(self) -> None:
        _check_txid(self.txid)
        if self.commit_ts.tzinfo is None:
            raise ContractError("commit_ts must carry a time zone", {"txid": self.txid})


RawChange = Begin | RowChange | PartialRollback | Rollback | Commit
"""Everything a connector's log reader produces, in log order."""


@dataclass(frozen=True, slots=True)
class CommittedChange:
    """A change of a committed transaction; ``seq`` is its 0-based order inside it."""

    seq: int
    change: RowChange

    def __post_init__(self) -> None:
        if self.seq < 0:
            raise ContractError(f"seq must be >= 0, not {self.seq}")


@dataclass(frozen=True, slots=True)
class CommittedTransaction:
    """A transaction as emitted at its commit: its changes in their original order.

    ``changes`` may be streamed from spill files: iterate it once, completely, before the
    buffer's next checkpoint (see ``TransactionBuffer.checkpoint_state``). Changes undone by
    partial rollbacks are not in it, and ``seq`` numbers the remaining ones 0, 1, 2, ...

    Args:
        txid: The transaction id.
        begin_pos: Where it began (``None`` if the log showed no ``Begin``).
        commit_pos: The position just after its commit record.
        commit_ts: When the source committed it.
        change_count: How many changes ``changes`` yields.
        changes: The changes, in order.
    """

    txid: str
    begin_pos: Position | None
    commit_pos: Position
    commit_ts: datetime
    change_count: int
    changes: Iterable[CommittedChange]

    def __post_init__(self) -> None:
        _check_txid(self.txid)
        if self.change_count < 0:
            raise ContractError(f"change_count must be >= 0, not {self.change_count}")
