"""Key changes as the lake writes them: the old key goes, the new key comes.

The lake keeps the mirror and "state at P" by key (DESIGN.md, "Contracts added in round 2",
"Key changes"). An update that changes a row's key columns is therefore written as two
events with the change's ``seq``: a ``d`` of the old key (the full before-image) and a ``c``
of the new key (the full after-image). A changelog consumer applying events per key, and
the mirror's MERGE, both end with the old key gone.

Sources that locate rows by a physical row id (Oracle's ROWID) check unique keys at the end
of a statement, so the log of ``UPDATE t SET id = id + 1`` can move row a from key 1 to 2
while row b still holds 2, and only then move b from 2 to 3. Writing ``d 2`` for b's move
would delete a's new row. So, within one transaction, the vacated key of a row is deleted
only when no *other* row took the key earlier in the transaction; the other row's event
already says what the key holds. Sources that locate rows by key (MariaDB, PostgreSQL with
immediate unique checks) never show two rows on one key, so their old keys always go.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field

from cdc_core.capture.events import CommittedTransaction, RowChange
from cdc_core.lake.target import LakeEvent

KeyOf = Callable[[str], tuple[str, ...]]
"""The key columns of a table (empty: the table has no key, so no mirror)."""


def _key(image: Mapping[str, object] | None, columns: tuple[str, ...]) -> tuple[object, ...]:
    assert image is not None  # rebuilt updates and deletes carry full images
    return tuple(map(image.__getitem__, columns))


@dataclass(slots=True)
class KeyMoves:
    """The lake events of one committed transaction's rebuilt changes, key moves included.

    Args:
        transaction: The transaction whose changes are turned into events.
        key_of: The key columns of a table.
    """

    transaction: CommittedTransaction
    key_of: KeyOf
    _holders: dict[tuple[str, tuple[object, ...]], Hashable] = field(default_factory=dict)
    _keys: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def key(self, table: str) -> tuple[str, ...]:
        """The table's key columns, asked of ``key_of`` once per table: this runs per change."""
        columns = self._keys.get(table)
        if columns is None:
            columns = self._keys[table] = self.key_of(table)
        return columns

    def forget_keys(self) -> None:
        """Ask ``key_of`` again (a part written mid-transaction may have described tables
        anew)."""
        self._keys.clear()

    def events(self, original: RowChange, rebuilt: RowChange, seq: int) -> list[LakeEvent]:
        """The events of one change.

        Args:
            original: The change as the log gave it (its ``locator`` is the row before it).
            rebuilt: The same change with full images (its ``locator`` is the row after it).
            seq: The change's order in the transaction.
        """
        columns = self.key(rebuilt.table)
        if not columns or rebuilt.op == "t":
            return [LakeEvent.of_change(rebuilt, seq, self.transaction)]
        if rebuilt.op == "d":
            return self._vacate(rebuilt, original.locator, _key(rebuilt.before, columns), seq)
        moved: list[LakeEvent] = []
        old = _key(rebuilt.before, columns) if rebuilt.op == "u" else None
        if old is not None and old != _key(rebuilt.after, columns):
            moved = self._vacate(rebuilt, original.locator, old, seq)
            rebuilt = RowChange(
                rebuilt.txid, rebuilt.position, "c", rebuilt.table, rebuilt.locator, rebuilt.after
            )
        if isinstance(rebuilt.locator, str):
            self._holders[(rebuilt.table, _key(rebuilt.after, columns))] = rebuilt.locator
        moved.append(LakeEvent.of_change(rebuilt, seq, self.transaction))
        return moved

    def _vacate(
        self, change: RowChange, locator: Hashable, key: tuple[object, ...], seq: int
    ) -> list[LakeEvent]:
        """The ``d`` of ``key``, unless another row of this transaction holds it now (only a
        physical row id, a ``str`` locator as in ``cdc_core.rebuild.full_width``, can tell rows
        apart)."""
        holder = self._holders.pop((change.table, key), locator)
        if isinstance(locator, str) and holder != locator:
            self._holders[(change.table, key)] = holder
            return []
        delete = RowChange(
            change.txid, change.position, "d", change.table, locator, None, change.before
        )
        return [LakeEvent.of_change(delete, seq, self.transaction)]
