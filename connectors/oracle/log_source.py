"""Oracle as a pipeline source: ``replcheck cdc run`` with an ``oracle+oracledb://`` URL."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from cdc_core.names import format_table
from connectors.log_sources import LogSource, register_log_source
from connectors.oracle.connector import OracleConnector


def open_source(url: str, password: str | None, tables: Sequence[str]) -> LogSource:
    """A LogMiner reader of ``tables`` and AS OF SCN snapshots, over one connector."""
    connector = OracleConnector(url, password)

    def list_tables() -> list[str]:
        owner = connector._owner()
        query = "SELECT table_name FROM all_tables WHERE owner = :owner ORDER BY table_name"
        with contextlib.closing(connector._connect()) as connection, connection.cursor() as cursor:
            cursor.execute(query, owner=owner)
            return [format_table(owner, name) for (name,) in cursor.fetchall()]

    return LogSource(connector.log_reader(tables), connector.snapshot_reader(), list_tables)


register_log_source(("oracle",), open_source)
