"""The full-width rebuild: complete partial row changes from the row image store.

Some logs carry only the changed columns of an update and only the key of a delete
(MariaDB's ``binlog_row_image=MINIMAL``, Oracle supplemental logging of key columns only);
the columns they omit are ``ABSENT``. ``Rebuilder`` turns each committed change into one
that carries full images, keeping ``RowImageStore`` up to date as it goes:

- ``c`` insert: stored as is. An insert with ``ABSENT`` columns (defaulted columns the log
  omitted) cannot be completed from the store, which knows nothing older about a new row:
  the table's ``fetch_missing`` hook supplies the absent columns, or it is an error.
- ``u`` update: the carried columns are merged over the image just before the change; the
  result is stored and emitted with the full before-image. If the row's key changes (the
  key columns of the merged after-image differ from the locator), the image moves: a
  tombstone at the old locator, the image at the new one, and the emitted change carries
  the new locator (the old key stays visible in ``before``).
- ``d`` delete: the full before-image comes from the store; a tombstone is stored.
- ``t`` truncate: one table-level marker (``RowImageStore.truncate``); emitted unchanged.

Versions are keyed by the transaction's ``commit_pos`` and the change's ``seq``, so the
image "just before" a change is the version at ``(commit_pos, seq - 1)`` or older, and
re-reading the log rebuilds the same changes again.

A column the stored image lacks (added to the table after it was stored) is NULL (see
``Rebuilder._complete``). An update or delete of a row the store does not know takes its
before-image from the log if that is full, else from the table's ``fetch_missing`` hook, else
raises
``RowImageMissingError`` (naming table, locator and position, never row values). A fetched
row is the source's row *now*, not as of the change: use the hook to bootstrap tables whose
rows predate the store, not as a routine path. No change leaves the rebuild with an
``ABSENT`` value in it: updates and deletes always carry full before-images, and updates
and inserts full after-images.

An after-image column marked ``UNAVAILABLE`` (the change set it, but the log cannot render
the new value: LogMiner's ``Unsupported Type``) is never taken from the store, whose value
is the one *before* the change: the table's ``fetch_unavailable`` hook reads it from the
source as of the transaction's ``commit_pos`` (the row right after the commit), or the
rebuild stops with ``UnavailableValueError`` naming table, column, locator and position.
Every change of the row in that transaction gets the committed value: the states between
its changes were never visible outside it. In a before-image ``UNAVAILABLE`` says nothing
the store does not know (the value before the change), so it counts as ``ABSENT``. Neither
marker ever reaches the row image store or leaves the rebuild.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

from cdc_core.capture.events import (
    ABSENT,
    UNAVAILABLE,
    CommittedChange,
    CommittedTransaction,
    RowChange,
)
from cdc_core.capture.position import Position
from cdc_core.errors import ConfigError, TerminalError, TransientError
from cdc_core.rebuild.copies import COPY, has_copies, held_copies, with_copy
from cdc_core.rebuild.image_store import RowImageStore, to_locator_bytes

FetchMissing = Callable[[str, Hashable], Mapping[str, object] | None]
"""Reads a row from the source by ``(table, locator)``; ``None`` if it is not there."""

FetchUnavailable = Callable[[str, Hashable, Position, Sequence[str]], Mapping[str, object] | None]
"""Reads ``columns`` of a row from the source by ``(table, locator, position, columns)`` as
the source had them right after the transaction whose ``commit_pos`` is ``position``
committed; ``None`` if the row is not there then. It raises ``TerminalError`` when the
source can no longer show that point (its undo is gone), ``TransientError`` to be retried.
"""


class RowImageMissingError(TerminalError):
    """A change needs a row image the store does not have and no hook could fetch."""


class NotLoadedYetError(Exception):
    """A change of a table being loaded by a refresh needs an image of a row no chunk has
    read yet: the pipeline drops the change, since that row's chunk will hold its effect."""


class UnreadableRowError(Exception):
    """A ``fetch_missing`` hook cannot read what a change's log left out: the row is gone
    from the source, or no longer has the column (renamed or dropped since)."""


class FetchedRow(Mapping[str, object], ABC):
    """A row a ``fetch_missing`` hook answers from the source as it is *now*.

    ``read_at`` is the source position the row was read at, None while every column asked
    for was answered without reading the row (a constant default is exact at any position).
    """

    @property
    @abstractmethod
    def read_at(self) -> Position | None:
        """Where the row was read, if it was."""


OnInexact = Callable[[str, Hashable, Position, Position | None], None]
"""Told ``(table, locator, commit_pos, read_at)`` of a change whose omitted columns were
taken from the source row read at ``read_at`` (exact unless the row or the table changed
between ``commit_pos`` and ``read_at``), or are NULL placeholders (``read_at`` None: the
source could no longer show them). The callee makes sure such values never stand as exact
(the pipeline refreshes the table from ``commit_pos`` when they may be wrong)."""


class EqualKeysError(TerminalError):
    """Two rows of a table whose key the source does not keep unique (a configured key, or
    all the columns of a table without one) share a key: the lake keeps one row per key."""

    @classmethod
    def of(cls, table: str, position: Position) -> EqualKeysError:
        """The error for ``table`` at ``position`` (never the key's values: they are the
        row's, perhaps sensitive ones)."""
        return cls(
            f"table {table} has no primary key, and at position {position} two of its rows"
            " share the columns that locate them (all its columns, or the configured key):"
            " the lake keeps one row per key, so it would lose one of them. Give the table a"
            " primary key, or configure a key whose values are unique (key.<table>=a,b in the"
            " source URL), then load the table again",
            {"table": table, "position": position.text},
        )


class IncompleteRowError(TerminalError):
    """A rebuilt row would still have ``ABSENT`` columns (the message names the columns)."""


class UnavailableValueError(TerminalError):
    """A column's new value is ``UNAVAILABLE`` and the source could not be asked for it."""


@dataclass(frozen=True, slots=True)
class RebuildConfig:
    """The rebuild's section of the configuration.

    Args:
        key_columns: Per table, the columns whose values form its locator, in locator order;
            used to notice updates that move a row to a new key. Tables located by a
            physical row id are not listed (their moves need a ``new_locator`` from the log).
        shared_keys: Tables whose key the source does not keep unique: a row arriving on a
            key another row holds is an ``EqualKeysError``.
        fetch_missing: Hook for every table without its own entry in ``fetch_missing_by_table``.
        fetch_missing_by_table: Per-table hooks.
        fetch_unavailable: Hook reading ``UNAVAILABLE`` columns for every table without its
            own entry in ``fetch_unavailable_by_table``.
        fetch_unavailable_by_table: Per-table hooks reading ``UNAVAILABLE`` columns.
    """

    key_columns: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    shared_keys: frozenset[str] = frozenset()
    fetch_missing: FetchMissing | None = None
    fetch_missing_by_table: Mapping[str, FetchMissing] = field(default_factory=dict)
    fetch_unavailable: FetchUnavailable | None = None
    fetch_unavailable_by_table: Mapping[str, FetchUnavailable] = field(default_factory=dict)
    copied: frozenset[str] = field(init=False)  # tables whose key numbers equal rows

    def __post_init__(self) -> None:
        for table, columns in self.key_columns.items():
            if not columns or not all(isinstance(column, str) for column in columns):
                raise ConfigError(f"rebuild.key_columns.{table} must be a non-empty tuple of str")
        copied = frozenset(t for t, columns in self.key_columns.items() if has_copies(columns))
        object.__setattr__(self, "copied", copied)

    def hook_for(self, table: str) -> FetchMissing | None:
        """The fetch hook that applies to ``table``, if any."""
        return self.fetch_missing_by_table.get(table, self.fetch_missing)

    def unavailable_hook_for(self, table: str) -> FetchUnavailable | None:
        """The hook reading ``UNAVAILABLE`` columns of ``table``, if any."""
        return self.fetch_unavailable_by_table.get(table, self.fetch_unavailable)


def _is_full(image: Mapping[str, object] | None) -> bool:
    return image is not None and _lacks_unknown(image.values())


def _lacks_unknown(values: Iterable[object]) -> bool:
    # A plain identity loop: this runs for every image of every change, and ``in`` would
    # call each value's ``__eq__`` (Decimal's does isinstance checks against ABCs).
    for value in values:  # noqa: SIM110 (a generator costs twice as much here)
        if value is ABSENT or value is UNAVAILABLE:
            return False
    return True


def _has_unavailable(values: Iterable[object]) -> bool:
    for value in values:  # noqa: SIM110 (a generator costs twice as much here)
        if value is UNAVAILABLE:
            return True
    return False


def _unknown(value: object) -> bool:
    return value is ABSENT or value is UNAVAILABLE


def _as_before(image: Mapping[str, object] | None) -> Mapping[str, object] | None:
    """A before-image with ``UNAVAILABLE`` read as ``ABSENT``: the value before a change is
    the stored one, however the log renders it."""
    if image is None or not _has_unavailable(image.values()):
        return image
    return {column: ABSENT if v is UNAVAILABLE else v for column, v in image.items()}


def _rebuilt(
    change: RowChange,
    locator: Hashable,
    after: Mapping[str, object] | None,
    before: Mapping[str, object],
) -> RowChange:
    """``change`` with its rebuilt locator and images: ``dataclasses.replace`` without its
    walk over the fields by name (this runs for every update and delete)."""
    return RowChange(
        change.txid, change.position, change.op, change.table, locator, after, before,
        change.new_locator,
    )  # fmt: skip


def _overlay(base: Mapping[str, object], top: Mapping[str, object] | None) -> dict[str, object]:
    """``base`` with every column ``top`` carries (not ``ABSENT``) put over it.

    A column ``top`` marks ``ABSENT`` that ``base`` lacks stays ``ABSENT``, so the caller's
    completeness check names it instead of the row silently losing a column.
    """
    merged = dict(base)
    if top is not None:
        for column, value in top.items():
            if value is not ABSENT or column not in merged:
                merged[column] = value
    return merged


class Rebuilder:
    """Completes committed changes from, and records them in, a ``RowImageStore``.

    Args:
        store: The row image store (the caller owns it: flushes and closes it).
        config: Key columns and fetch hooks.
        on_inexact: Told of omitted columns read from the source now, or left NULL when
            it could not show them (``OnInexact``). Without it a read row is taken as exact
            and a row the source cannot show is a ``RowImageMissingError``.
    """

    def __init__(
        self,
        store: RowImageStore,
        config: RebuildConfig | None = None,
        on_inexact: OnInexact | None = None,
    ) -> None:
        self.store = store
        self.config = config or RebuildConfig()
        self.on_inexact = on_inexact
        self.loading: set[str] = set()  # tables a refresh loads: see NotLoadedYetError
        self.refreshing: dict[str, Position] = {}  # tables under refresh, and since when

    def iter_rebuilt(self, transaction: CommittedTransaction) -> Iterator[CommittedChange]:
        """The transaction's changes, rebuilt, with their ``seq`` unchanged."""
        for committed in transaction.changes:
            yield CommittedChange(committed.seq, self.rebuild(committed, transaction.commit_pos))

    def rebuild(self, committed: CommittedChange, commit_pos: Position) -> RowChange:
        """Complete one change of the transaction committed at ``commit_pos`` and record it.

        Raises:
            RowImageMissingError: The change needs an image nobody has.
            IncompleteRowError: Columns stay ``ABSENT`` after completing (e.g. a column the
                stored image does not have).
        """
        change, seq = committed.change, committed.seq
        if change.op == "t":
            self.store.truncate(change.table, commit_pos, seq)
            return change
        if (before := _as_before(change.before)) is not change.before:
            change = replace(change, before=before)
        if change.table in self.config.shared_keys:
            change = self._relocated(change)
        copies = change.table in self.config.copied
        if copies and change.op != "c":
            change = self._held_copy(change, commit_pos, seq)
        if change.op == "c":
            rebuilt = self._insert(change, commit_pos)
        else:
            rebuilt = self._update_or_delete(change, commit_pos, seq)
        if copies:
            rebuilt = self._placed_copy(rebuilt, change.locator, commit_pos, seq)
        rebuilt = self._fill_unavailable(rebuilt, commit_pos)
        self._check_full(rebuilt, commit_pos)
        self._record(change.locator, rebuilt, commit_pos, seq)
        return rebuilt

    def _relocated(self, change: RowChange) -> RowChange:
        """A change of a table whose key the source does not keep unique (all its columns,
        say), located by its before-image under the key the pipeline holds the table by.

        The reader locates it under the key the catalog shows now, which may be ahead of
        the change: a column dropped since is in the before-image but not in that key, and
        the row was not found under the key the initial load stored it by (postgres-full
        seed 590: "two of its rows share the columns that locate them")."""
        columns = self.config.key_columns.get(change.table)
        if change.before is None or columns is None or isinstance(change.locator, str):
            return change
        values = tuple(change.before.get(column, ABSENT) for column in columns if column != COPY)
        if values == change.locator or any(value is ABSENT for value in values):
            return change
        return replace(change, locator=values)

    def _held_copy(self, change: RowChange, commit_pos: Position, seq: int) -> RowChange:
        """An update or delete of a row of equal rows, pointed at their last copy
        (``cdc_core.rebuild.copies``); at copy 0 when the store holds none (a full before-image
        from the log still rebuilds it, as for any row the store does not know)."""
        held = held_copies(self.store, change.table, change.locator, commit_pos, seq)
        if held == 0 and change.table in self.loading:
            raise NotLoadedYetError(change.table)
        copy = max(held - 1, 0)
        before = None if change.before is None else {**change.before, COPY: copy}
        return replace(change, locator=with_copy(change.locator, copy), before=before)

    def _placed_copy(
        self, change: RowChange, old: Hashable, commit_pos: Position, seq: int
    ) -> RowChange:
        """An inserted row, or a row an update gave other values, as the next copy of its
        values; an update that keeps the values keeps its copy."""
        if change.op == "d":
            return change
        assert isinstance(change.locator, tuple) and change.after is not None
        value = change.locator[:-1] if change.op == "u" else change.locator
        # Compared as the store keys them: a NaN equals a NaN there, not in Python.
        if change.op == "u" and isinstance(old, tuple) and _same_values(value, old[:-1]):
            return change
        copy = held_copies(self.store, change.table, value, commit_pos, seq)
        return replace(change, locator=with_copy(value, copy), after={**change.after, COPY: copy})

    def _insert(self, change: RowChange, commit_pos: Position) -> RowChange:
        assert change.after is not None  # RowChange guarantees an after-image for inserts
        absent = sorted(column for column, value in change.after.items() if value is ABSENT)
        if not absent:
            return change
        if self.config.hook_for(change.table) is None:
            raise IncompleteRowError(
                f"an insert into table {change.table} at position {commit_pos} omits columns"
                f" {absent} (defaulted columns the log did not carry); configure fetch_missing"
                " for the table",
                _context(change, commit_pos),
            )
        since = self.refreshing.get(change.table)
        if since is not None and since <= commit_pos and self.on_inexact is not None:
            # The refresh under way rewrites the row (told of its key), as it would rewrite
            # anything read now: reading the source for it would only cost time.
            self.on_inexact(change.table, change.locator, commit_pos, None)
            return replace(change, after=dict(change.after) | dict.fromkeys(absent))
        fetched = self._fetch(change, commit_pos)
        try:
            filled = {column: fetched.get(column, ABSENT) for column in absent}
        except UnreadableRowError as exc:
            filled = self._placeholders(change, commit_pos, absent, exc)
        else:
            self._note_read(change, commit_pos, fetched)
        return replace(change, after=dict(change.after) | filled)

    def _update_or_delete(self, change: RowChange, commit_pos: Position, seq: int) -> RowChange:
        before = self._before(change, commit_pos, seq)
        if change.op == "d":
            return _rebuilt(change, change.locator, None, before)
        assert change.after is not None  # RowChange guarantees an after-image for updates
        after = _overlay(before, change.after)
        return _rebuilt(change, self._new_locator(change, after), after, before)

    def _before(self, change: RowChange, commit_pos: Position, seq: int) -> dict[str, object]:
        """The full image just before the change: from the log when it carries all of it
        (FULL row images: no lookup needed), else stored, else fetched."""
        if change.before is not None and _is_full(change.before):
            return dict(change.before)
        stored = self.store.get(change.table, change.locator, commit_pos, seq=seq - 1)
        if stored is not None:
            return self._complete(_overlay(stored, change.before))
        if change.table in self.loading:
            raise NotLoadedYetError(change.table)
        fetched = self._fetch(change, commit_pos)
        try:
            before = _overlay(fetched, change.before)
        except UnreadableRowError as exc:
            columns = [c for c, v in (change.before or {}).items() if _unknown(v)]
            known = {c: v for c, v in (change.before or {}).items() if not _unknown(v)}
            return known | self._placeholders(change, commit_pos, columns, exc)
        self._note_read(change, commit_pos, fetched)
        return before

    @staticmethod
    def _complete(image: dict[str, object]) -> dict[str, object]:
        """Columns added to the table after the image was stored are NULL in it.

        That is exact after a DDL that gave existing rows no value (a nullable column added
        without a default). A DDL that did give them one is followed by a table refresh
        (``cdc_core.ddl.table_refresh``) that rewrites the row after this change; until then
        the table's state is marked inexact, so a NULL here is never seen as final.
        """
        absent = [column for column, value in image.items() if value is ABSENT]
        return image | dict.fromkeys(absent) if absent else image

    def _fetch(self, change: RowChange, commit_pos: Position) -> Mapping[str, object]:
        hook = self.config.hook_for(change.table)
        fetched = None if hook is None else hook(change.table, change.locator)
        if fetched is None:
            raise RowImageMissingError(
                f"no row image for table {change.table} locator {change.locator!r} at position"
                f" {commit_pos}; configure fetch_missing for the table or re-snapshot it",
                _context(change, commit_pos),
            )
        return fetched

    def _placeholders(
        self, change: RowChange, commit_pos: Position, columns: list[str], exc: Exception
    ) -> dict[str, object]:
        """NULL for ``columns`` the source can no longer show, if ``on_inexact`` will make
        the table exact again; else the change cannot be rebuilt."""
        if self.on_inexact is None:
            raise RowImageMissingError(
                f"table {change.table} locator {change.locator!r} at position {commit_pos}:"
                f" {exc}; re-snapshot the table",
                _context(change, commit_pos),
            ) from exc
        self.on_inexact(change.table, change.locator, commit_pos, None)
        return dict.fromkeys(columns)

    def _note_read(self, change: RowChange, commit_pos: Position, fetched: object) -> None:
        """Tell ``on_inexact`` of values taken from a row read later than the change."""
        read_at = fetched.read_at if isinstance(fetched, FetchedRow) else None
        if read_at is not None and self.on_inexact is not None:
            self.on_inexact(change.table, change.locator, commit_pos, read_at)

    def _fill_unavailable(self, change: RowChange, commit_pos: Position) -> RowChange:
        """The after-image with its ``UNAVAILABLE`` columns read from the source as of
        ``commit_pos``, at the row's locator after the change."""
        after = change.after
        if after is None or not _has_unavailable(after.values()):
            return change
        columns = sorted(c for c, v in after.items() if v is UNAVAILABLE)
        hook = self.config.unavailable_hook_for(change.table)
        if hook is None:
            raise _unavailable(change, columns, commit_pos, "no fetch_unavailable hook is set")
        try:
            fetched = hook(change.table, change.locator, commit_pos, columns)
        except TransientError:
            raise  # retried as it is
        except TerminalError as exc:
            raise _unavailable(change, columns, commit_pos, exc.message) from exc
        if fetched is None:
            raise _unavailable(change, columns, commit_pos, "the row is not at that locator then")
        missing = [c for c in columns if c not in fetched or _unknown(fetched[c])]
        if missing:
            raise _unavailable(change, missing, commit_pos, "the source did not return them")
        return replace(change, after=dict(after) | {c: fetched[c] for c in columns})

    def _new_locator(self, change: RowChange, after: Mapping[str, object]) -> Hashable:
        if change.new_locator is not None:
            return change.new_locator
        if isinstance(change.locator, str):
            return change.locator  # a physical row id (ROWID): it moves only by new_locator
        columns = self.config.key_columns.get(change.table)
        if columns is None:
            return change.locator
        return tuple(after.get(column, ABSENT) for column in columns)

    def _record(self, old: Hashable, change: RowChange, commit_pos: Position, seq: int) -> None:
        arrives = change.op == "c" or change.locator != old
        shared = arrives and change.table in self.config.shared_keys
        if shared and change.table in self.config.copied:
            shared = False  # equal rows are copies, placed apart (_placed_copy)
        if shared and self.store.get(change.table, change.locator, commit_pos, seq=seq - 1):
            raise EqualKeysError.of(change.table, commit_pos)
        if change.locator != old and change.op != "c":  # an insert's copy is no move
            self.store.put(change.table, old, commit_pos, None, seq)
        self.store.put(change.table, change.locator, commit_pos, change.after, seq)

    @staticmethod
    def _check_full(change: RowChange, commit_pos: Position) -> None:
        for name, image in (("after", change.after), ("before", change.before)):
            if image is None or _is_full(image):
                continue
            absent = sorted(column for column, value in image.items() if _unknown(value))
            raise IncompleteRowError(
                f"the rebuilt {name}-image of a {change.op!r} change to table {change.table}"
                f" locator {change.locator!r} at position {commit_pos} still lacks columns"
                f" {absent}",
                _context(change, commit_pos),
            )
        if isinstance(change.locator, tuple) and not _lacks_unknown(change.locator):
            raise IncompleteRowError(
                f"the new key of table {change.table} is not in the rebuilt row",
                _context(change, commit_pos),
            )


def _unavailable(
    change: RowChange, columns: list[str], commit_pos: Position, why: str
) -> UnavailableValueError:
    return UnavailableValueError(
        f"columns {columns} of table {change.table} locator {change.locator!r}: the change at"
        f" {change.position} (committed at position {commit_pos}) set values the log cannot"
        f" render, and reading them from the source as of that commit failed: {why}. Never"
        " guessed (the stored value is the old one); configure fetch_unavailable for the table"
        " (the connector's log source provides it) and make sure the source still holds that"
        " point (undo retention), or list the columns in ignore_columns, or re-snapshot the"
        f" table at or after position {commit_pos}",
        _context(change, commit_pos) | {"columns": columns},
    )


def _context(change: RowChange, commit_pos: Position) -> dict[str, object]:
    return {
        "table": change.table,
        "locator": repr(change.locator),
        "position": commit_pos.text,
        "change_position": change.position.text,
        "txid": change.txid,
    }


def _same_values(left: tuple[object, ...], right: tuple[object, ...]) -> bool:
    return left == right or to_locator_bytes(left) == to_locator_bytes(right)
