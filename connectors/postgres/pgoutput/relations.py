"""Relation messages and the row changes of insert, update, delete and truncate messages.

pgoutput describes a table in a Relation message before its first change, and again after
its schema changed; changes then refer to it by relation id. Transactions streamed while in
progress get Relation messages of their own (pgoutput tracks the relations it sent per
streamed transaction), so relations are kept per context: the committed-transaction
context and one per streamed transaction.

Images (https://www.postgresql.org/docs/current/sql-altertable.html#SQL-ALTERTABLE-REPLICA-IDENTITY):

- the new tuple of an insert or update has every column, except that an update leaves out
  TOASTed values it did not change (kind ``u``): those are ``ABSENT``;
- the old tuple of kind ``K`` (REPLICA IDENTITY DEFAULT or USING INDEX: a delete, or an
  update that changed the key) carries only the replica identity columns; the others are
  sent as NULL but were not logged, so they are ``ABSENT``, never NULL;
- the old tuple of kind ``O`` (REPLICA IDENTITY FULL) carries the whole row.

Generated columns are in no tuple before PostgreSQL 18 (nor in the Relation message):
``generated.py`` computes them from the tuple the stream sent. When they are part of the
key (a table located by all its columns), the change's locator is a ``DeferredLocator``
until they are computed.

Columns without a logical type (user-defined ranges, composites, text search types, ...) are
not decoded: the table's description refuses them by name (``snapshot.describe_table``),
so only a pipeline whose ``ignore_columns`` lists them reads such a table.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass

from cdc_core.capture.events import ABSENT, RowChange, key_values, lacks_absent
from cdc_core.capture.position import Position
from cdc_core.capture.source import TableDescription
from cdc_core.names import format_table
from connectors.postgres.errors import ReplicaIdentityError, ValueContext
from connectors.postgres.pgoutput.binary_values import Decode, ValueDecoder
from connectors.postgres.pgoutput.messages import (
    UNCHANGED_TOAST,
    DeleteMessage,
    InsertMessage,
    ProtocolError,
    RelationMessage,
    Text,
    TruncateMessage,
    TupleValue,
    UpdateMessage,
)

logger = logging.getLogger(__name__)

GeneratedOf = Callable[[str], frozenset[str]]
"""The generated columns of a table (which the stream may leave out)."""
Describe = Callable[[str], TableDescription]
"""A captured table as the catalog shows it now: its stored columns and key."""


@dataclass(eq=False, slots=True)
class DeferredLocator:
    """The locator of a change whose key has generated columns the stream left out: made
    from ``key`` once ``generated.GeneratedValues`` has computed them, and kept in ``value``
    for whoever holds this object (a streamed subtransaction's undo list)."""

    key: tuple[str, ...]
    value: Hashable | None = None

    def resolved(self, table: str) -> Hashable:
        """The locator made (it is made before the change leaves the reader)."""
        if self.value is None:  # a subtransaction aborted while its changes still waited
            raise ProtocolError(f"a change of {table} was undone before its key was computed")
        return self.value


RowMessage = InsertMessage | UpdateMessage | DeleteMessage


@dataclass(frozen=True, slots=True)
class _Relation:
    """A relation as the stream describes it: per column its name, whether it is in the
    replica identity, its decoder (None: not stored in the lake) and its error context."""

    table: str
    columns: tuple[tuple[str, bool, Decode | None, ValueContext], ...]
    key: tuple[str, ...]
    shape: tuple[tuple[str, int, int], ...] = ()  # (name, type oid, type modifier) per column
    deferred: bool = False  # key columns are generated ones the stream leaves out


class RelationTracker:
    """Relations by context, and the row changes of data messages.

    Args:
        decoder: Decodes column values.
        describe: Describes a captured table now (asked at every Relation message).
        captured: The captured tables (``schema.table``); changes of others are dropped.
        generated_of: The generated columns of a table.
    """

    def __init__(
        self,
        decoder: ValueDecoder,
        describe: Describe,
        captured: frozenset[str],
        generated_of: GeneratedOf = lambda table: frozenset(),
    ) -> None:
        self.decoder = decoder
        self.describe = describe
        self.captured = captured
        self.generated_of = generated_of
        self._contexts: dict[int | None, dict[int, _Relation]] = {None: {}}

    def on_relation(self, message: RelationMessage, context: int | None) -> str | None:
        """Remember a relation; ``context`` is the streamed transaction's xid (or None).

        Returns the captured table whose columns this message shows changed since the
        session last described it (a DDL the log itself does not show), else None.
        """
        table = format_table(message.namespace, message.name)
        columns = tuple(
            (
                column.name,
                column.key,
                self.decoder.decoder(column.type_oid)
                if self.decoder.storable(column.type_oid)
                else None,
                ValueContext(table, column.name),
            )
            for column in message.columns
        )
        described = self.describe(table) if table in self.captured else None
        key = described.key if described is not None else ()
        stored = frozenset(described.schema.names) if described is not None else frozenset()
        names = {c.name for c in message.columns}
        unsent = {column for column in key if column not in names}
        generated = self.generated_of(table) if unsent else frozenset()
        deferred = bool(unsent) and unsent <= generated
        if unsent and not deferred:
            outside = stored - set(key)  # stored now outside the key: never locating
            sent = [
                c.name
                for c in message.columns
                if c.key and self.decoder.locates(c.type_oid) and c.name not in outside
            ]
            key, deferred = self._older_key(key, generated, sent)
        shape = tuple((c.name, c.type_oid, c.type_modifier) for c in message.columns)
        known = self._known(message.relation_id, context)
        relations = self._contexts.setdefault(context, {})
        relations[message.relation_id] = _Relation(table, columns, key, shape, deferred)
        if described is None:
            return None
        changed = known is not None and known.shape != shape
        return table if changed or self._older(table, stored, names) else None

    def _older(self, table: str, stored: frozenset[str], names: set[str]) -> bool:
        """Whether the message is older than the catalog in a way its changes cannot be
        followed: a column the table stores now (generated ones aside, the stream never
        sends them) is not in it, added or renamed by a DDL later in the log, and the table
        has generated columns (which may read that column: not computed). The table is then
        refreshed from here (seeds 420 and 445 of postgres-default); otherwise the DDL's own
        Relation message, later, is enough (a table located by all its columns too: its
        changes are located by the message's columns, ``_older_key``)."""
        generated = self.generated_of(table)
        return bool(generated) and bool(stored - generated - names)

    @staticmethod
    def _older_key(
        key: tuple[str, ...], generated: frozenset[str], sent: list[str]
    ) -> tuple[tuple[str, ...], bool]:
        """The key of a Relation message older than the description (a key column renamed
        or added since), and whether it holds generated columns the stream leaves out.

        ``sent``: the locating columns the message flags as its replica identity, which
        locate the row as the log had it then (never an array or another column that
        cannot locate, also under a name the table no longer has: postgres-full seed 412).
        Generated key columns are in no message: each keeps its place in the key, the
        message's columns taking the others' places in order (a rename keeps a column's
        place), so the locator is the one the snapshot made."""
        if not generated & set(key):
            return tuple(sent), False
        placed: list[str | None] = []
        rest = iter(sent)
        for column in key:
            placed.append(column if column in generated else next(rest, None))
        if None in placed or next(rest, None) is not None:
            return tuple(sent), False  # columns added or dropped: no place to keep
        return tuple(name for name in placed if name is not None), True

    def _known(self, relation_id: int, context: int | None) -> _Relation | None:
        for where in (context, None):
            found = self._contexts.get(where, {}).get(relation_id)
            if found is not None:
                return found
        return None

    def end_stream(self, context: int, committed: bool) -> None:
        """A streamed transaction ended. pgoutput counts the relations it sent in a stream
        that committed as sent for later transactions too (``cleanup_rel_sync_cache`` in
        pgoutput.c), so they become the committed context's; an abort's are dropped."""
        relations = self._contexts.pop(context, {})
        if committed:
            self._contexts[None].update(relations)

    def table_of(self, relation_id: int, context: int | None) -> str | None:
        """The captured table of a relation id, or None if it is not captured."""
        relation = self._relation(relation_id, context)
        return relation.table if relation.table in self.captured else None

    def shape_of(self, relation_id: int, context: int | None) -> tuple[tuple[str, int, int], ...]:
        """A relation's columns as the stream sends them: (name, type OID, type modifier)."""
        return self._relation(relation_id, context).shape

    def row_change(
        self, message: RowMessage, txid: str, position: Position, context: int | None
    ) -> RowChange | None:
        """The change of an insert, update or delete message (None: table not captured)."""
        relation = self._relation(message.relation_id, context)
        if relation.table not in self.captured:
            return None
        if isinstance(message, InsertMessage):
            after = self._image(relation, message.new, None)
            return RowChange(
                txid, position, "c", relation.table, _locator(relation, after, position), after
            )
        if isinstance(message, UpdateMessage):
            after = self._image(relation, message.new, None)
            before = None
            if message.old is not None:
                before = self._image(relation, message.old, message.old_kind)
            locator = _locator(relation, before if before is not None else after, position)
            return RowChange(txid, position, "u", relation.table, locator, after, before)
        before = self._image(relation, message.old, message.old_kind)
        locator = _locator(relation, before, position)
        return RowChange(txid, position, "d", relation.table, locator, None, before)

    def truncates(
        self, message: TruncateMessage, txid: str, position: Position, context: int | None
    ) -> Iterator[RowChange]:
        """One ``t`` change per captured table of a truncate message."""
        for relation_id in message.relation_ids:
            table = self.table_of(relation_id, context)
            if table is not None:
                yield RowChange(txid, position, "t", table, None)

    def _relation(self, relation_id: int, context: int | None) -> _Relation:
        relation = self._contexts.get(context, {}).get(relation_id)
        if relation is None and context is not None:
            relation = self._contexts[None].get(relation_id)
        if relation is None:
            raise ProtocolError(f"a change of relation {relation_id} came before its description")
        return relation

    def _image(
        self, relation: _Relation, values: tuple[TupleValue, ...], old_kind: str | None
    ) -> dict[str, object]:
        """A row image of the stored columns; ``old_kind`` K leaves non-key columns ABSENT."""
        image: dict[str, object] = {}
        if len(values) != len(relation.columns):
            raise ProtocolError(f"a tuple of {len(values)} columns for {relation.table}")
        keyed = old_kind == "K"
        for (name, key, decode, where), value in zip(relation.columns, values, strict=True):
            if decode is None:
                continue  # refused by the table's description, so ignored
            if type(value) is bytes and not keyed:  # the common value first: runs per value
                image[name] = decode(value, where)
            elif keyed and not key:
                image[name] = ABSENT  # not logged: the key tuple holds only the key
            elif value is None or value is UNCHANGED_TOAST:
                image[name] = ABSENT if value is UNCHANGED_TOAST else None
            elif isinstance(value, Text):
                image[name] = value.value  # a type without a binary send function: its text
            else:
                assert isinstance(value, bytes)
                image[name] = decode(value, where)
        return image


def _locator(relation: _Relation, image: dict[str, object], position: Position) -> Hashable:
    if relation.deferred:
        return DeferredLocator(relation.key)
    key = key_values(image, relation.key)
    if key and lacks_absent(key):  # every change: the error's work only when it is one
        return key
    missing = [c for c, v in zip(relation.key, key, strict=True) if v is ABSENT]
    raise ReplicaIdentityError.missing(
        relation.table, relation.key, missing or ["(no key)"], position.text
    )
