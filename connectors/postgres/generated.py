"""Generated columns the stream leaves out, computed from the row images by the source.

pgoutput sends no generated column before PostgreSQL 18 (``logicalrep_write_attrs`` skips
``attgenerated``), and from 18 on only the stored ones, of a publication created with
``publish_generated_columns = stored`` (``replication.ensure_publication``). A generated
column's value is an immutable function of the same row's other columns
(https://www.postgresql.org/docs/current/ddl-generated-columns.html), so it is computed
exactly from the row image at its own position, never read by key later (the row may have
changed since): the source evaluates the column's expression, cast to the column's type as
storing it does, over the values the stream sent, passed back unchanged as parameters of
their type OIDs (binary send form, or text). One query per table per batch of changes; the
changes of a session wait in ``GeneratedValues`` until their batch is computed, and leave in
stream order.

Images:

- the after-image of an insert or update gets each missing column's value;
- an update leaves out TOASTed values it did not change: such an input is read from the old
  tuple when REPLICA IDENTITY FULL logs it (flattened, ``ExtractReplicaIdentity`` in
  heapam.c); else a column whose inputs all stayed unchanged stayed so itself (``ABSENT``:
  the rebuild keeps its value), and one that also has other inputs cannot be computed, so
  ``generated_refusal`` refuses it by name before loading;
- before-images hold it ``ABSENT`` (the rebuild has the value before the change);
- a column of the row's ``tableoid`` is refused: no image holds it.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cdc_core.capture.events import ABSENT, RawChange, RowChange, key_values, lacks_absent
from cdc_core.errors import TerminalError
from cdc_core.names import format_table
from connectors.model import Refusal, without_logical_type
from connectors.postgres.errors import ValueContext
from connectors.postgres.pgoutput import messages as pg
from connectors.postgres.pgoutput.binary_values import ValueDecoder
from connectors.postgres.pgoutput.relations import DeferredLocator
from connectors.postgres.types import quote

if TYPE_CHECKING:
    import psycopg

    from connectors.model import SourceColumn

MAX_PARAMETERS = 30_000  # per query: the protocol allows 65535
MAX_QUEUED = 5_000  # changes a batch holds back at most (a streamed transaction has no end)
_ROW = "replcheck_row"  # the batch's ordinal column (made unique against the inputs)

# Each generated column of a table: its type, its expression, the columns it reads
# (pg_depend: the expression's default object depends on them; negative: a system column)
# and those of them that can be TOASTed: variable-length, not PLAIN storage, and possibly
# longer than a TOAST pointer (the toaster moves only values longer than
# MAXALIGN(TOAST_POINTER_SIZE) = 24 bytes, toast_tuple_find_biggest_attribute in
# toast_helper.c; a numeric of precision <= 18 has at most 6 base-10000 digits: 20 bytes).
# Run with an empty search_path, so that both name every object by its schema.
_GENERATED_SQL = """
SELECT a.attname, a.atttypid, format_type(a.atttypid, a.atttypmod),
       pg_get_expr(d.adbin, d.adrelid),
       ARRAY(SELECT CASE WHEN p.refobjsubid > 0 THEN i.attname::text ELSE '' END
               FROM pg_depend p
               JOIN pg_attribute i ON i.attrelid = p.refobjid AND i.attnum = p.refobjsubid
              WHERE p.classid = 'pg_attrdef'::regclass AND p.objid = d.oid
                AND p.refclassid = 'pg_class'::regclass AND p.refobjid = a.attrelid
                AND p.refobjsubid <> a.attnum AND p.refobjsubid <> 0
              ORDER BY p.refobjsubid),
       ARRAY(SELECT i.attname::text
               FROM pg_depend p
               JOIN pg_attribute i ON i.attrelid = p.refobjid AND i.attnum = p.refobjsubid
              WHERE p.classid = 'pg_attrdef'::regclass AND p.objid = d.oid
                AND p.refclassid = 'pg_class'::regclass AND p.refobjid = a.attrelid
                AND p.refobjsubid <> a.attnum AND i.attlen = -1 AND i.attstorage <> 'p'
                AND NOT (i.atttypid = 'pg_catalog.numeric'::pg_catalog.regtype
                         AND i.atttypmod >= 4 AND (i.atttypmod - 4) >> 16 <= 18)),
       c.relreplident
  FROM pg_attribute a
  JOIN pg_class c ON c.oid = a.attrelid
  JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
 WHERE a.attrelid = to_regclass(%s) AND a.attgenerated <> '' AND a.attnum > 0
   AND NOT a.attisdropped
 ORDER BY a.attnum
"""

TOASTED_INPUT = (
    "generated from a column that can be TOASTed ({inputs}) and other columns: an update that"
    " leaves the long value unchanged does not log it, so the value cannot be computed; give"
    " the table REPLICA IDENTITY FULL (ALTER TABLE ... REPLICA IDENTITY FULL: the log then"
    " holds the whole old row)"
)
SYSTEM_INPUT = "generated from the row's tableoid, which no row image holds"


_ROW_MESSAGES = (pg.InsertMessage, pg.UpdateMessage, pg.DeleteMessage)


@dataclass(frozen=True, slots=True)
class GeneratedColumn:
    """A generated column: its type (OID and SQL, schema-qualified), its expression, the
    columns it reads (``""`` for a system column), those of them that can be TOASTed, and
    whether the table logs whole old rows (REPLICA IDENTITY FULL)."""

    name: str
    type_oid: int
    sql_type: str
    expression: str
    inputs: tuple[str, ...]
    toastable: tuple[str, ...] = ()
    full_identity: bool = False

    def refusal(self) -> str | None:
        """Why its values cannot be computed from row images (None: they can)."""
        if "" in self.inputs:
            return SYSTEM_INPUT
        if self.toastable and len(self.inputs) > 1 and not self.full_identity:
            return TOASTED_INPUT.format(inputs=", ".join(self.toastable))
        return None


def generated_columns(
    connection: psycopg.Connection[Any], qualified: str
) -> tuple[GeneratedColumn, ...]:
    """The generated columns of table ``qualified`` (quoted ``schema.table``), in order."""
    with connection.transaction():
        connection.execute("SET LOCAL search_path = ''")
        rows = connection.execute(_GENERATED_SQL, (qualified,)).fetchall()
    return tuple(
        GeneratedColumn(
            name, int(oid), sql_type, expression, tuple(inputs), tuple(toastable), ident == "f"
        )
        for name, oid, sql_type, expression, inputs, toastable, ident in rows
    )


def generated_refusal(generated: Sequence[GeneratedColumn]) -> Refusal:
    """The table's refusal of columns (``connectors.model.carried_columns``): those without a
    logical type, and generated ones the pipeline cannot compute from row images."""
    by_name = {column.name: column for column in generated}

    def refusal(column: SourceColumn) -> str | None:
        found = by_name.get(column.name)
        reason = found.refusal() if found is not None else None
        return reason or without_logical_type(column)

    return refusal


Connect = Callable[[], "psycopg.Connection[Any]"]
Guard = Callable[[], contextlib.AbstractContextManager[None]]
Describe = Callable[[str], tuple[GeneratedColumn, ...]]
"""The generated columns of a table, asked again after its Relation messages."""
Shape = Callable[[], Sequence[tuple[str, int, int]]]
"""The columns of a row message's relation as the stream sends them (name, type OID, mod)."""


Inputs = dict[str, tuple[int, pg.TupleValue]]
"""The values generated columns read, by column: as the stream sent them, with type OIDs."""


@dataclass(frozen=True, slots=True)
class _Image:
    """One image to compute generated values of: its inputs, and the columns whose inputs
    are all unchanged TOASTed values (then so are they: ``ABSENT``)."""

    inputs: Inputs
    unchanged: frozenset[str] = frozenset()


@dataclass(slots=True)
class _Pending:
    """A change waiting for generated values: of its after-image, and of its before-image
    when they are part of its key (``relations.DeferredLocator``)."""

    change: RowChange
    columns: tuple[GeneratedColumn, ...]
    after: _Image | None
    before: _Image | None = None


class GeneratedValues:
    """Completes the images of a session's row changes with the generated columns the stream
    left out, in batches; everything passes through it in stream order.

    Args:
        describe: The generated columns of a table (``generated_columns``).
        connect: A connection to the source for evaluating expressions (kept open).
        guard: Turns a lost connection into the reader's ``TransientError``.
        decoder: Decodes the computed values (binary), as the stream's.
    """

    def __init__(
        self, describe: Describe, connect: Connect, guard: Guard, decoder: ValueDecoder
    ) -> None:
        self._describe = describe
        self._connect = connect
        self._guard = guard
        self._decoder = decoder
        self._tables: dict[str, tuple[GeneratedColumn, ...]] = {}
        self._plain_relations: set[int] = set()  # relation ids whose changes pass unchanged
        self._queue: list[RawChange | _Pending] = []
        self._parameters = 0
        self._connection: psycopg.Connection[Any] | None = None

    def through(self, items: Iterable[Any], message: object, shape: Shape) -> Iterable[Any]:
        """The items one stream message made, completed; ``shape``: the message relation's
        columns (name, type OID, modifier). Row changes wait while a batch is open."""
        if isinstance(message, pg.RelationMessage):  # its table may have changed
            self._tables.pop(format_table(message.namespace, message.name), None)
            self._plain_relations.discard(message.relation_id)
        made = list(items)  # one message makes a change or two
        if not self._queue and all(map(self._plain, made)):
            if isinstance(message, _ROW_MESSAGES) and made:
                self._plain_relations.add(message.relation_id)
            return made  # nothing to complete
        return self._completed(made, message, shape)

    def passes(self, message: object) -> bool:
        """Whether a row message's changes pass unchanged (its relation has no generated
        column to compute, and nothing waits): the stream's usual case, told per message
        without going through ``through`` (a tenth of the reader's time otherwise)."""
        return (
            not self._queue
            and isinstance(message, _ROW_MESSAGES)
            and message.relation_id in self._plain_relations
        )

    def _plain(self, item: Any) -> bool:
        """Whether ``item`` passes unchanged: not a row change of a table known to have
        generated columns the stream leaves out (a table not yet described is not plain)."""
        if not isinstance(item, RowChange) or item.op == "t":
            return True
        return self._tables.get(item.table) == ()

    def _completed(self, items: Iterable[Any], message: object, shape: Shape) -> Iterator[Any]:
        for item in items:
            if isinstance(item, RowChange) and item.op != "t":
                item = self._prepared(item, message, shape)
            if isinstance(item, _Pending) or (self._queue and isinstance(item, RowChange)):
                self._queue.append(item)  # behind the batch: stream order is kept
            else:
                yield from self.flush()
                yield item
            if self._parameters >= MAX_PARAMETERS or len(self._queue) >= MAX_QUEUED:
                yield from self.flush()

    @property
    def waiting(self) -> bool:
        """Whether changes wait for their generated columns' values."""
        return bool(self._queue)

    def flush(self) -> Iterator[RawChange]:
        """Compute the waiting changes' values and hand them all on, in order."""
        if not self._queue:
            return
        queue, self._queue, self._parameters = self._queue, [], 0
        computed = self._compute([item for item in queue if isinstance(item, _Pending)])
        for item in queue:
            yield computed[id(item)] if isinstance(item, _Pending) else item

    def close(self) -> None:
        """Close the evaluating connection."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _prepared(self, change: RowChange, message: object, shape: Shape) -> RowChange | _Pending:
        """The change waiting for its after-image's values if it has one, and its
        before-image's if its locator needs them; else those are ``ABSENT`` (the rebuild
        has the values before the change)."""
        columns = self._missing(change.table, shape)
        if not columns:
            return _located(change)
        deferred = isinstance(change.locator, DeferredLocator)
        before = None
        if change.before is not None and deferred:
            assert isinstance(message, pg.UpdateMessage | pg.DeleteMessage)
            before = _Image(_inputs(columns, shape(), message.old or ()))
        elif change.before is not None:
            absent = dict.fromkeys((c.name for c in columns), ABSENT)
            change = dataclasses.replace(change, before={**change.before, **absent})
        after = None
        if change.after is not None:
            assert isinstance(message, pg.InsertMessage | pg.UpdateMessage)
            values = _inputs(columns, shape(), message.new, _old_row(message))
            unchanged = frozenset(c.name for c in columns if _unchanged(c, change.table, values))
            after = _Image(values, unchanged)
        if after is None and before is None:
            return change
        self._parameters += sum(len(image.inputs) for image in (after, before) if image)
        return _Pending(change, columns, after, before)

    def _missing(self, table: str, shape: Shape) -> tuple[GeneratedColumn, ...]:
        found = self._tables.get(table)
        if found is None:
            found = self._tables[table] = self._describe(table)
        if not found:
            return ()
        # Refused columns are ignored (else the table was refused before loading), and
        # those without a logical type are not stored, as the stream's own.
        # A column reading one the message lacks (renamed by a DDL later in the log) is not
        # computed: ``relations.RelationTracker`` has the table refreshed from here.
        sent = {name for name, _, _ in shape()}
        return tuple(
            column
            for column in found
            if column.name not in sent
            and column.refusal() is None
            and self._decoder.storable(column.type_oid)
            and sent.issuperset(column.inputs)
        )

    def _compute(self, pending: Sequence[_Pending]) -> dict[int, RowChange]:
        # One query per table and set of missing columns (a Relation message may change it).
        groups: dict[tuple[str, tuple[GeneratedColumn, ...]], list[_Pending]] = {}
        for item in pending:
            groups.setdefault((item.change.table, item.columns), []).append(item)
        done: dict[int, RowChange] = {}
        for (table, columns), items in groups.items():
            images = [image for item in items for image in (item.after, item.before) if image]
            computed = iter(self._evaluate(table, columns, images))
            for item in items:
                change = item.change
                if item.after is not None:
                    assert change.after is not None
                    change = dataclasses.replace(change, after={**change.after, **next(computed)})
                if item.before is not None:
                    assert change.before is not None
                    before = {**change.before, **next(computed)}
                    change = dataclasses.replace(change, before=before)
                done[id(item)] = _located(change)
        return done

    def _evaluate(
        self, table: str, columns: tuple[GeneratedColumn, ...], images: Sequence[_Image]
    ) -> list[dict[str, object]]:
        """One query computing ``columns`` of ``images`` (of changes of ``table``)."""
        inputs = sorted({name for column in columns for name in column.inputs})
        row = _ROW
        while row in inputs:
            row += "_"
        sql, params, types, formats = _query(columns, inputs, row, images)
        result = self._run(sql, params, types, formats, table)
        out: list[dict[str, object]] = []
        for index, item in enumerate(images):
            values: dict[str, object] = {}
            for number, column in enumerate(columns):
                if column.name in item.unchanged:
                    values[column.name] = ABSENT
                    continue
                data = result.get_value(index, number)
                decode = self._decoder.decoder(column.type_oid)
                where = ValueContext(table, column.name)
                values[column.name] = None if data is None else decode(bytes(data), where)
            out.append(values)
        return out

    def _run(
        self, sql: str, params: list[bytes | None], types: list[int], formats: list[int], table: str
    ) -> Any:
        from psycopg import errors, pq

        with self._guard():
            if self._connection is None or self._connection.closed:
                self._connection = self._connect()
            pgconn = self._connection.pgconn
            result = pgconn.exec_params(sql.encode(), params, types, formats, pq.Format.BINARY)
            if result.status == pq.ExecStatus.TUPLES_OK:
                return result
            error = errors.error_from_result(result, encoding="utf-8")
            if isinstance(error, errors.OperationalError):
                self.close()
                raise error
        raise TerminalError(
            f"the source could not compute the generated columns of {table} from the stream's"
            f" row images ({str(error).strip()}); report this, or list the columns in the"
            " pipeline's ignore_columns",
            {"table": table},
        ) from error


def _old_row(message: pg.InsertMessage | pg.UpdateMessage) -> Sequence[pg.TupleValue] | None:
    """The whole old row of an update under REPLICA IDENTITY FULL (None: not logged)."""
    if isinstance(message, pg.UpdateMessage) and message.old_kind == "O":
        return message.old
    return None


def _located(change: RowChange) -> RowChange:
    """``change`` with its ``DeferredLocator`` made from its now complete image."""
    if not isinstance(change.locator, DeferredLocator):
        return change
    key = change.locator.key
    image = change.after if change.op == "c" else change.before
    assert image is not None
    locator = key_values(image, key)
    if not lacks_absent(locator):
        if all(column in image for column in key):
            raise TerminalError(
                f"a row of table {change.table} at {change.position.text} does not carry its"
                f" key columns {list(key)}; give the table REPLICA IDENTITY FULL or a primary"
                " key",
                {"table": change.table, "position": change.position.text},
            )
        # Generated key columns not computed (``_missing``): a change older than the table's
        # description, which the pipeline drops as shaped before a DDL and refreshes.
        locator = tuple(None if value is ABSENT else value for value in locator)
    change.locator.value = locator
    return dataclasses.replace(change, locator=locator)


def _inputs(
    columns: Sequence[GeneratedColumn],
    shape: Sequence[tuple[str, int, int]],
    row: Sequence[pg.TupleValue],
    old: Sequence[pg.TupleValue] | None = None,
) -> Inputs:
    """The tuple values of ``row`` the columns read, an unchanged TOASTed one from ``old``."""
    names = {name for column in columns for name in column.inputs}
    values: Inputs = {}
    for index, (name, type_oid, _) in enumerate(shape):
        if name in names:
            value = row[index]
            if value is pg.UNCHANGED_TOAST and old is not None:
                value = old[index]
            values[name] = (type_oid, value)
    return values


def _unchanged(column: GeneratedColumn, table: str, values: Inputs) -> bool:
    """Whether every input of ``column`` is an unchanged TOASTed value (then so is it).

    Raises:
        TerminalError: Some inputs are, others are not (refused before loading unless the
            table's replica identity changed since).
    """
    left = [name for name in column.inputs if values[name][1] is pg.UNCHANGED_TOAST]
    if not left:
        return False
    if len(left) == len(column.inputs):
        return True
    raise TerminalError(
        f"table {table}: column {column.name} is " + TOASTED_INPUT.format(inputs=", ".join(left)),
        {"table": table, "column": column.name},
    )


def _query(
    columns: Sequence[GeneratedColumn], inputs: Sequence[str], row: str, items: Sequence[_Image]
) -> tuple[str, list[bytes | None], list[int], list[int]]:
    """``SELECT CAST(expr AS type), ... FROM (VALUES ($1, ...), ...) AS r(row, inputs)``."""
    params: list[bytes | None] = []
    types: list[int] = []
    formats: list[int] = []
    rows = []
    for number, item in enumerate(items):
        cells = [str(number)]
        for name in inputs:
            type_oid, value = item.inputs[name]
            params.append(_param(value))
            types.append(type_oid)
            formats.append(0 if isinstance(value, pg.Text) else 1)
            cells.append(f"${len(params)}")
        rows.append(f"({', '.join(cells)})")
    selected = ", ".join(f"CAST(({c.expression}) AS {c.sql_type})" for c in columns)
    names = ", ".join(quote(name) for name in (row, *inputs))
    values = ", ".join(rows)
    sql = f"SELECT {selected} FROM (VALUES {values}) AS r({names}) ORDER BY r.{quote(row)}"
    return sql, params, types, formats


def _param(value: pg.TupleValue) -> bytes | None:
    if isinstance(value, pg.Text):
        return value.value.encode()
    if value is None or value is pg.UNCHANGED_TOAST:
        return None
    assert isinstance(value, bytes)
    return value
