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

Columns without a logical type (arrays, ``timetz``, ...) are decoded but not stored.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Any

from cdc_core.events import ABSENT, RowChange
from cdc_core.position import Position
from connectors.postgres.errors import ReplicaIdentityError
from connectors.postgres.pgoutput import (
    UNCHANGED_TOAST,
    DeleteMessage,
    InsertMessage,
    RelationMessage,
    Text,
    TruncateMessage,
    TupleValue,
    UpdateMessage,
)
from connectors.postgres.types import ValueContext
from connectors.postgres.wal_values import ValueDecoder

logger = logging.getLogger(__name__)

KeyOf = Callable[[str], tuple[str, ...]]
"""The key columns of a table (its description's key), asked again after schema changes."""

RowMessage = InsertMessage | UpdateMessage | DeleteMessage


@dataclass(frozen=True, slots=True)
class _Relation:
    """A relation as the stream describes it, with the columns the lake stores."""

    table: str
    message: RelationMessage
    stored: tuple[bool, ...]  # per column of the message
    key: tuple[str, ...]


class RelationTracker:
    """Relations by context, and the row changes of data messages.

    Args:
        decoder: Decodes column values.
        key_of: The key columns of a captured table.
        captured: The captured tables (``schema.table``); changes of others are dropped.
    """

    def __init__(self, decoder: ValueDecoder, key_of: KeyOf, captured: frozenset[str]) -> None:
        self.decoder = decoder
        self.key_of = key_of
        self.captured = captured
        self._contexts: dict[int | None, dict[int, _Relation]] = {None: {}}

    def on_relation(self, message: RelationMessage, context: int | None) -> None:
        """Remember a relation; ``context`` is the streamed transaction's xid (or None)."""
        table = f"{message.namespace}.{message.name}"
        stored = tuple(self.decoder.storable(column.type_oid) for column in message.columns)
        key = self.key_of(table) if table in self.captured else ()
        relations = self._contexts.setdefault(context, {})
        relations[message.relation_id] = _Relation(table, message, stored, key)

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
            from connectors.postgres.pgoutput import ProtocolError

            raise ProtocolError(f"a change of relation {relation_id} came before its description")
        return relation

    def _image(
        self, relation: _Relation, values: tuple[TupleValue, ...], old_kind: str | None
    ) -> dict[str, object]:
        """A row image of the stored columns; ``old_kind`` K leaves non-key columns ABSENT."""
        image: dict[str, object] = {}
        columns = relation.message.columns
        for column, stored, value in zip(columns, relation.stored, values, strict=True):
            if not stored:
                continue
            if old_kind == "K" and not column.key:
                image[column.name] = ABSENT  # not logged: the key tuple holds only the key
            else:
                where = ValueContext(relation.table, column.name)
                image[column.name] = self._value(column.type_oid, value, where)
        return image

    def _value(self, type_oid: int, value: TupleValue, where: ValueContext) -> Any:
        if value is None:
            return None
        if value is UNCHANGED_TOAST:
            return ABSENT
        if isinstance(value, Text):
            return value.value  # a type without a binary send function: its text
        assert isinstance(value, bytes)
        return self.decoder.decode(type_oid, value, where)


def _locator(relation: _Relation, image: dict[str, object], position: Position) -> Hashable:
    key = tuple(image.get(column, ABSENT) for column in relation.key)
    missing = [c for c, v in zip(relation.key, key, strict=True) if v is ABSENT]
    if missing or not relation.key:
        raise ReplicaIdentityError.missing(
            relation.table, relation.key, missing or ["(no key)"], position.text
        )
    return key
