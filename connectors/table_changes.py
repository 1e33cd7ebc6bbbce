"""A table read again when a DDL changes it between its definition and its rows.

A refresh or a fetch reads a table's definition (its description), then its rows. A DDL in
between (a column dropped or renamed) leaves the description naming a column the table no
longer has: the read fails with a ``KeyError`` from the fresh definition or with the
server's "no such column". Each product turns those into ``TableChangedError`` and reads
the table again, definition first (``retry_while_changing``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from cdc_core.errors import TransientError

logger = logging.getLogger(__name__)

CHANGED_ATTEMPTS = 5  # reads of a table a concurrent DDL keeps changing
_T = TypeVar("_T")


class TableChangedError(TransientError):
    """A DDL changed the table between reading its definition and its rows (the read is
    retried: ``retry_while_changing``)."""

    @classmethod
    def of(cls, table: str) -> TableChangedError:
        """The error for ``table``."""
        return cls(
            f"table {table} changed (a DDL) while it was read; read it again",
            {"table": table},
        )


def retry_while_changing(read: Callable[[], _T]) -> _T:
    """``read()``, again while a concurrent DDL changes the table under it."""
    for attempt in range(1, CHANGED_ATTEMPTS + 1):
        try:
            return read()
        except TableChangedError:
            if attempt == CHANGED_ATTEMPTS:
                raise
            logger.info("a table changed while it was read: reading it again")
    raise AssertionError("unreachable")
