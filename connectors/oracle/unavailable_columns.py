"""Values LogMiner cannot render, read from the source as of their commit (the rebuild's
``fetch_unavailable`` hook of an Oracle source).

LogMiner writes ``Unsupported Type`` where it cannot render a value (Oracle Database
Utilities, "Supported Data Types and Table Storage Attributes"), and a region's time in a
DST overlap does not say which instant it is; ``redo_values`` marks such new values
``UNAVAILABLE``. The row image store only knows the value from *before* the change, so the
core's rebuild asks this hook for the row as the transaction left it::

    SELECT "DOC" FROM "OWNER"."TABLE" AS OF SCN :scn WHERE ROWID = CHARTOROWID(:rid)

with ``:scn`` the transaction's commit SCN (its ``commit_pos``) and ``:rid`` the row's
ROWID after the change. A flashback query AS OF SCN n shows every transaction whose commit
SCN is <= n: a row version's ``VERSIONS_STARTSCN`` -- the commit SCN of the transaction
that made it -- is what Oracle names as the target to give a Flashback Query to see that
version (Oracle Database SQL Language Reference, "Version Query Pseudocolumns"). So the read
shows the row right after that commit and before any later transaction changed it. Every
change of the row inside that transaction gets this committed value; the states between
them were never visible outside the transaction.

The read needs the undo of that SCN: ORA-01555 / ORA-08180 (undo gone) and ORA-01466 (the
table was redefined since) become ``FlashbackTooOldError`` naming the fix, and the rebuild
stops. A row not at that ROWID then (deleted or moved later in the same transaction) gives
``None``, which stops the rebuild too: the value is never guessed.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from cdc_core.capture.position import Position
from cdc_core.drivers import driver_import
from cdc_core.errors import TerminalError
from connectors.model import TableSchema
from connectors.oracle import sql
from connectors.oracle.connector import fetched_value
from connectors.oracle.errors import from_driver_error

logger = logging.getLogger(__name__)


def as_of_row_query(
    schema: TableSchema, columns: Sequence[str], rowid: str, scn: int
) -> tuple[str, dict[str, object]]:
    """The flashback query reading ``columns`` of the row at ``rowid`` as of ``scn``, and
    its binds."""
    owner, name = sql.split_table(schema.table, "")
    typed = [(column, schema.column(column).ltype) for column in columns]
    return sql.flashback_select(owner, name, typed, sql.BY_ROWID), {"scn": scn, "rid": rowid}


class UnavailableColumns:
    """The ``fetch_unavailable`` hook of an Oracle source's captured tables.

    Args:
        connect: Opens a python-oracledb connection (``OracleConnector`` supplies it).
        tables: The captured tables by ``OWNER.TABLE`` (the log reader's dictionary, so
            columns added by DDL it followed are known).
    """

    def __init__(self, connect: Callable[[], Any], tables: Mapping[str, TableSchema]) -> None:
        self._connect = connect
        self.tables = tables
        self._connection: Any = None

    def __call__(
        self, table: str, locator: Hashable, position: Position, columns: Sequence[str]
    ) -> Mapping[str, object] | None:
        """``columns`` of the row at ROWID ``locator`` right after the commit at ``position``;
        ``None`` if no row is there then."""
        schema = self.tables.get(table)
        if schema is None or not isinstance(locator, str):
            raise TerminalError(
                f"table {table} is not captured by ROWID here; cannot read its row {locator!r}",
                {"table": table},
            )
        query, binds = as_of_row_query(schema, columns, locator, position.value)
        row = self._fetch_one(query, binds, table, position.value)
        if row is None:
            return None
        values = zip(columns, row, strict=True)
        return {column: fetched_value(v, schema.column(column).ltype) for column, v in values}

    def close(self) -> None:
        """Close the connection the reads share."""
        if self._connection is not None:
            with contextlib.suppress(Exception):
                self._connection.close()
            self._connection = None

    def _fetch_one(
        self, query: str, binds: Mapping[str, object], table: str, scn: int
    ) -> tuple[Any, ...] | None:
        with driver_import("the Oracle connector"):
            import oracledb

        if self._connection is None:
            self._connection = self._connect()
        try:
            with self._connection.cursor() as cursor:
                cursor.execute(query, dict(binds))
                row: tuple[Any, ...] | None = cursor.fetchone()
                return row
        except oracledb.DatabaseError as exc:
            self.close()  # a broken connection is not reused
            (error,) = exc.args
            action = f"read table {table} as of SCN {scn}"
            context = {"table": table, "scn": scn}
            raise from_driver_error(error.code, error.message, action, context) from exc
