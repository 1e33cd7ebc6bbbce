"""Oracle as a pipeline source: ``replcheck cdc run`` with an ``oracle+oracledb://`` URL.

The URL's query parameters ``source_config.LOG_PARAMETERS`` configure the LogMiner reader
(``mining``, ``dictionary``, ``window_scns``, ``archive_dest``, ...); ``service_name`` is
the driver's."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from cdc_core.names import format_table
from connectors.model import LogSource
from connectors.oracle import sql
from connectors.oracle.connector import OracleConnector
from connectors.oracle.log_reader import OracleLogReader
from connectors.oracle.snapshot import OracleSnapshotReader
from connectors.oracle.source_config import LogMinerConfig, from_parameters
from connectors.oracle.unavailable_columns import UnavailableColumns


def log_reader(
    connector: OracleConnector, tables: Sequence[str], config: LogMinerConfig | None = None
) -> OracleLogReader:
    """A LogMiner reader of ``tables`` (named ``OWNER.TABLE`` in its changes).

    Raises:
        UnsupportedTableError: A table is index-organized (refused before any read).
    """
    schemas = {}
    for table in tables:
        owner, name = sql.split_table(table, connector.owner())
        exact = format_table(owner, name)
        schemas[exact] = connector.reflect(exact)
    mine = None if config is None else config.mining_instance
    mining = None if mine is None else connector.at_instance(mine).connect
    reader = OracleLogReader(connector.connect, schemas, config, mine=mining)
    reader.check_tables()
    return reader


def open_source(url: str, password: str | None, tables: Sequence[str]) -> LogSource:
    """A LogMiner reader of ``tables``, AS OF SCN snapshots, and the hook reading values
    LogMiner cannot render as of their commit, over one connector."""
    connector = OracleConnector(url, password)
    config = from_parameters(connector.endpoint.query)  # fails before anything connects
    reader = log_reader(connector, tables, config)
    unavailable = UnavailableColumns(connector.connect, reader.tables)

    def list_tables() -> list[str]:
        owner = connector.owner()
        query = "SELECT table_name FROM all_tables WHERE owner = :owner ORDER BY table_name"
        with contextlib.closing(connector.connect()) as connection, connection.cursor() as cursor:
            cursor.execute(query, owner=owner)
            return [format_table(owner, name) for (name,) in cursor.fetchall()]

    hooks = dict.fromkeys(reader.tables, unavailable)
    snapshots = OracleSnapshotReader(connector)
    captured = tuple(reader.tables)
    return LogSource(reader, snapshots, list_tables, captured, fetch_unavailable=hooks)
