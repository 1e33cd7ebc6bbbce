"""MariaDB ``VIRTUAL`` generated columns: carried from FULL row images, refused otherwise.

The server computes a virtual column when a row is read, so a binlog row image holds its
value only when the image holds every column: ``binlog_row_image=FULL`` and ``NOBLOB`` log
it, ``MINIMAL`` never does, not even in an insert (measured on MariaDB 10.11;
``tests/connectors/mariadb/test_generated_columns.py``). Completed from the row's last
image, it would keep the value from before the change of the columns it reads. So on a
server that does not log FULL images a virtual column is refused by name before loading
(``virtual_refusals``), and on a FULL server a row event whose writer chose other images
for its session stops the reader (``MissingVirtualValueError``) instead of leaving the
value stale. ``STORED`` (``PERSISTENT``) generated columns are in every after-image.
"""

from __future__ import annotations

from typing import Any

from cdc_core.capture.source import RefusedColumn
from cdc_core.errors import TerminalError

_VIRTUAL = "VIRTUAL GENERATED"
_WAY_OUT = "set binlog_row_image=FULL (for every session that writes it) or make the column STORED"


class MissingVirtualValueError(TerminalError):
    """A row event of a FULL server lacks a virtual column's value (see the module)."""

    @classmethod
    def of(cls, table: str, column: str, position: str) -> MissingVirtualValueError:
        """The error for ``column`` of ``table`` in the row event at ``position``."""
        return cls(
            f"column {column} of table {table} is VIRTUAL generated and the row event at"
            f" {position} does not hold its value (its writer's session logged"
            f" binlog_row_image other than FULL), so it cannot be carried exactly: {_WAY_OUT},"
            " then load the table again",
            {"table": table, "column": column, "position": position},
        )


def logs_full_images(cursor: Any) -> bool:
    """Whether the server logs FULL or NOBLOB images by default (virtual columns in them)."""
    cursor.execute("SELECT @@global.binlog_row_image")
    (image,) = cursor.fetchone()
    return str(image).upper() in ("FULL", "NOBLOB")


def virtual_columns(cursor: Any, schema: str, table: str) -> dict[str, str]:
    """The ``VIRTUAL`` generated columns of ``schema.table``: name -> column type."""
    cursor.execute(
        "SELECT COLUMN_NAME, COLUMN_TYPE FROM information_schema.COLUMNS"
        " WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND EXTRA = %s",
        (schema, table, _VIRTUAL),
    )
    return {str(name): str(column_type) for name, column_type in cursor.fetchall()}


def virtual_refusals(cursor: Any, schema: str, table: str) -> tuple[RefusedColumn, ...]:
    """The table's virtual columns, refused when the server does not log FULL images."""
    if logs_full_images(cursor):
        return ()
    reason = f"VIRTUAL generated, and MINIMAL row images never hold its value: {_WAY_OUT}"
    columns = virtual_columns(cursor, schema, table)
    return tuple(RefusedColumn(name, native, reason) for name, native in columns.items())
