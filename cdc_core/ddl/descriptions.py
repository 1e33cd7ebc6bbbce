"""The columns the lake stores per table, kept in step with the source's schema changes.

The pipeline asks the log reader for a table's description once and again whenever a batch
does not fit it: a row carries a column the description lacks (a column was added), or a
value does not convert to the described type (a column was retyped). A column the new
description lacks but older events of the batch still carry (dropped after them) keeps its
old field, so no value of the batch is lost.

Never a column left out in silence (issue 36): a column the connector cannot carry exactly
(``TableDescription.refused``: no logical type, too many digits, a type its snapshot cannot
read) refuses its table here, by name, whenever the table is described -- before its load,
and again when a DDL gives it such a column -- unless the pipeline's ``ignore_columns``
lists it; a target that cannot hold a carried column says so through ``Sink.refused``.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from cdc_core.capture.source import LogReader, RefusedColumn, RefusedColumnsError, TableDescription
from cdc_core.rebuild.copies import numbered

if TYPE_CHECKING:
    import pyarrow as pa

logger = logging.getLogger(__name__)


class TableDescriptions:
    """A cache of table descriptions, without the columns the filter ignores.

    Args:
        reader: Describes tables as the source has them now.
        ignore_columns: Per table, columns that never reach the lake.
    """

    def __init__(self, reader: LogReader, ignore_columns: Mapping[str, frozenset[str]]) -> None:
        self._reader = reader
        self._ignore = ignore_columns
        self._known: dict[str, TableDescription] = {}

    def get(self, table: str) -> TableDescription:
        """The table's description (asked of the reader the first time)."""
        found = self._known.get(table)
        if found is None:
            found = self._known[table] = self._strip(self._reader.describe(table))
        return found

    def key_of(self, table: str) -> tuple[str, ...]:
        """The table's lake key (empty: no key)."""
        return self.get(table).key

    def known(self, table: str) -> TableDescription | None:
        """The table's cached description, without asking the reader."""
        return self._known.get(table)

    def keys(self) -> dict[str, tuple[str, ...]]:
        """Per described table with key columns, the key."""
        return {table: d.key for table, d in self._known.items() if d.key}

    def shared_keys(self) -> frozenset[str]:
        """The described tables whose key the source does not keep unique."""
        return frozenset(table for table, d in self._known.items() if d.key and not d.unique)

    def fitting(self, table: str, rows: Iterable[Mapping[str, object]]) -> TableDescription:
        """A description holding every column of ``rows`` (re-described when needed)."""
        current = self.get(table)
        carried = {column for row in rows for column in row}
        if carried <= set(current.schema.names):
            return current
        return self.refresh(table, carried)

    def refresh(self, table: str, carried: set[str]) -> TableDescription:
        """Ask the reader again; keep old fields of ``carried`` columns the source dropped."""
        import pyarrow as pa

        old = self.get(table)
        new = self._strip(self._reader.describe(table))
        kept = [f for f in old.schema if f.name in carried and f.name not in new.schema.names]
        if kept:
            new = replace(new, schema=pa.schema([*new.schema, *kept]))
        self._known[table] = new
        if new != old:
            logger.info("table %s changed columns at the source; the lake schema follows", table)
        return new

    def _strip(self, description: TableDescription) -> TableDescription:
        """The lake's form of a description: ignored columns left out (refused ones too,
        which must be ignored), and equal rows of a table without a key numbered
        (``cdc_core.rebuild.copies``).

        Raises:
            RefusedColumnsError: The source has columns the pipeline cannot carry and
                ``ignore_columns`` does not list.
        """
        import pyarrow as pa

        ignored = self._ignore.get(description.table, frozenset())
        check_carried(description, ignored)
        if ignored or description.refused:  # the refused columns are all ignored here
            kept = [f for f in description.schema if f.name not in ignored]
            description = replace(description, schema=pa.schema(kept), refused=())
        return numbered(description)


def check_carried(
    description: TableDescription,
    ignored: Collection[str],
    unheld: Sequence[RefusedColumn] = (),
) -> None:
    """Refuse ``description``'s table unless each of its columns is carried or ignored.

    Args:
        description: The table as its connector describes it.
        ignored: The columns the pipeline's ``ignore_columns`` lists for the table.
        unheld: Carried columns the target cannot hold (``Sink.refused``).

    Raises:
        RefusedColumnsError: Names every such column, its type and the way out.
    """
    refused = [c for c in (*description.refused, *unheld) if c.name not in ignored]
    if refused:
        raise RefusedColumnsError.of(description.table, refused)


def as_held(description: TableDescription, held: pa.Schema) -> TableDescription:
    """``description`` with the types the target holds for the columns it has (a column it
    does not have yet keeps the described type)."""
    import pyarrow as pa

    fields = [held.field(f.name) if f.name in held.names else f for f in description.schema]
    return replace(description, schema=pa.schema(fields))
