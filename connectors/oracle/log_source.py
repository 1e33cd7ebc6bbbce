"""Oracle as a pipeline source: ``replcheck cdc run`` with an ``oracle+oracledb://`` URL."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from cdc_core.names import format_table
from connectors.log_sources import LogSource, register_log_source
from connectors.oracle.connector import OracleConnector
from connectors.oracle.unavailable_columns import UnavailableColumns


def open_source(url: str, password: str | None, tables: Sequence[str]) -> LogSource:
    """A LogMiner reader of ``tables``, AS OF SCN snapshots, and the hook reading values
    LogMiner cannot render as of their commit, over one connector."""
    connector = OracleConnector(url, password)
    reader = connector.log_reader(tables)
    unavailable = UnavailableColumns(connector._connect, reader.tables)

    def list_tables() -> list[str]:
        owner = connector._owner()
        query = "SELECT table_name FROM all_tables WHERE owner = :owner ORDER BY table_name"
        with contextlib.closing(connector._connect()) as connection, connection.cursor() as cursor:
            cursor.execute(query, owner=owner)
            return [format_table(owner, name) for (name,) in cursor.fetchall()]

    hooks = dict.fromkeys(reader.tables, unavailable)
    return LogSource(reader, connector.snapshot_reader(), list_tables, fetch_unavailable=hooks)


register_log_source(("oracle",), open_source)
