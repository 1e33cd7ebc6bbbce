"""The replication side of a PostgreSQL source: its config, the replication connection, and
the checks and set-up of the server, the publication and the replication slot.

Catalogs: ``pg_replication_slots`` (https://www.postgresql.org/docs/current/view-pg-replication-slots.html),
``pg_publication_tables`` and ``pg_type``. SQL runs through psycopg 3; only the replication
stream itself needs psycopg2 (psycopg 3 has no replication protocol).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cdc_core.drivers import driver_import
from cdc_core.names import format_table
from connectors.postgres.connector import PostgresConnector, split_table
from connectors.postgres.errors import (
    LogicalDecodingSetupError,
    PublicationMissingError,
    SlotMismatchError,
    SlotMissingError,
    WalRemovedError,
)
from connectors.postgres.exported_snapshot import replication_connection
from connectors.postgres.partitions import partition_ancestors
from connectors.postgres.position import lsn_to_int
from connectors.postgres.source_config import PostgresSourceConfig
from connectors.postgres.types import quote

if TYPE_CHECKING:
    import psycopg

logger = logging.getLogger(__name__)

PUBLISHES_GENERATED = 180_000  # server_version_num of publish_generated_columns


def connector_of(config: PostgresSourceConfig) -> PostgresConnector:
    """The SQL connector of the source."""
    password = config.password.reveal() if config.password is not None else None
    return PostgresConnector(config.url, password, config.endpoint)


def open_stream_connection(config: PostgresSourceConfig, connector: PostgresConnector) -> Any:
    """A psycopg2 logical replication connection (the walsender session's settings set)."""
    with driver_import("the Postgres connector"):
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(connector.conninfo())
    if config.decoding_work_mem is not None:
        extra = f"-c logical_decoding_work_mem={config.decoding_work_mem}"
        params["options"] = f"{params.get('options', '')} {extra}".strip()
    return replication_connection(make_conninfo("", **params), connector.where)


def check_wal_level(connection: psycopg.Connection[Any], where: str) -> None:
    """Raise ``LogicalDecodingSetupError`` unless ``wal_level`` is ``logical``."""
    row = connection.execute("SHOW wal_level").fetchone()
    value = str(row[0]) if row else "unknown"
    if value != "logical":
        raise LogicalDecodingSetupError.wal_level(where, value)


def ensure_publication(
    connection: psycopg.Connection[Any], config: PostgresSourceConfig, where: str
) -> None:
    """Create the publication of the captured tables, or check that it publishes them.

    It publishes partitioned tables through their root (``publish_via_partition_root``,
    ``partitions.py``), and from PostgreSQL 18 on stored generated columns too
    (``publish_generated_columns``; older servers' stream leaves them out: ``generated.py``
    computes them).

    Raises:
        PublicationMissingError: The publication is missing (and may not be created), lacks
            captured tables, or publishes them as other tables; the message names the fix.
    """
    name = config.publication
    row = connection.execute(
        "SELECT puballtables, pubviaroot FROM pg_publication WHERE pubname = %s", (name,)
    ).fetchone()
    tables = config.qualified_tables()
    if row is None:
        if not config.create_publication:
            raise PublicationMissingError.named(where, name)
        listed = ", ".join(_qualified(table) for table in tables)
        connection.execute(
            f"CREATE PUBLICATION {quote(name)} FOR TABLE {listed}"
            f" WITH ({_publication_options(connection)})"
        )
        announce_publication(name, tables, where)
        return
    all_tables, via_root = row
    partitioned = sorted(_partitioned(connection).intersection(tables))
    if partitioned and not via_root:
        raise PublicationMissingError.not_via_root(where, name, partitioned)
    published = None if all_tables else _published(connection, name)
    if via_root:
        _check_not_through_root(connection, tables, published, where, name)
    missing = [table for table in tables if published is not None and table not in published]
    if missing:
        raise PublicationMissingError.lacks(where, name, missing)
    column_listed = sorted(_column_listed(connection, name).intersection(tables))
    if column_listed:
        raise PublicationMissingError.column_list(where, name, column_listed)


def announce_publication(name: str, tables: Sequence[str], where: str) -> None:
    """Say that a publication now exists on the source: it outlives the pipeline.

    A warning, not progress: a host embedding the pipeline with only warnings shown (or no
    logging set up: Python's last-resort handler) still learns what was left on its server.
    """
    logger.warning(
        "created publication %s of %s on %s; it stays on the server until removed"
        " (DROP PUBLICATION %s once the pipeline is retired)",
        name, list(tables), where, name,
    )  # fmt: skip


def announce_slot(slot: str, where: str, position: str) -> None:
    """Say that a permanent replication slot now exists on the source, and what it costs:
    the server keeps its WAL from ``position`` on until the pipeline confirms it, also while
    the pipeline is stopped (a warning: see ``announce_publication``)."""
    logger.warning(
        "created replication slot %s on %s at %s: a permanent slot, the server keeps its WAL"
        " until the pipeline has read it, also while the pipeline is stopped (`replcheck cdc"
        " status` shows how much); SELECT pg_drop_replication_slot('%s') once the pipeline"
        " is retired",
        slot, where, position, slot,
    )  # fmt: skip


def _publication_options(connection: psycopg.Connection[Any]) -> str:
    """The options of a new publication: ``publish_generated_columns`` exists from 18 on
    (https://www.postgresql.org/docs/18/sql-createpublication.html)."""
    row = connection.execute("SELECT current_setting('server_version_num')::int").fetchone()
    options = "publish_via_partition_root = true"
    if row is not None and row[0] >= PUBLISHES_GENERATED:
        options += ", publish_generated_columns = stored"
    return options


def _published(connection: psycopg.Connection[Any], publication: str) -> set[str]:
    """The tables a publication publishes (the roots, for one publishing via its roots)."""
    return {
        format_table(schema, table)
        for schema, table in connection.execute(
            "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = %s",
            (publication,),
        ).fetchall()
    }


def _column_listed(connection: psycopg.Connection[Any], publication: str) -> set[str]:
    """The tables a publication sends only some columns of (PostgreSQL 15's column lists)."""
    if connection.info.server_version < 150000:
        return set()
    return {
        format_table(schema, table)
        for schema, table in connection.execute(
            "SELECT n.nspname, c.relname FROM pg_publication_rel r"
            " JOIN pg_publication p ON p.oid = r.prpubid JOIN pg_class c ON c.oid = r.prrelid"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE p.pubname = %s AND r.prattrs IS NOT NULL",
            (publication,),
        ).fetchall()
    }


def _partitioned(connection: psycopg.Connection[Any]) -> set[str]:
    """The partitioned tables of the database (``relkind`` p)."""
    return {
        format_table(schema, table)
        for schema, table in connection.execute(
            "SELECT n.nspname, c.relname FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relkind = 'p'"
        ).fetchall()
    }


def _check_not_through_root(
    connection: psycopg.Connection[Any],
    tables: Sequence[str],
    published: set[str] | None,
    where: str,
    name: str,
) -> None:
    """A captured partition must not reach the stream as an ancestor (one the publication
    holds, every one for ``FOR ALL TABLES``): the pipeline captures it under its own name."""
    ancestors = partition_ancestors(connection)
    through = {}
    for table in tables:
        held = [a for a in ancestors.get(table, ()) if published is None or a in published]
        if held:
            through[table] = held[-1]
    if through:
        raise PublicationMissingError.through_root(where, name, through)


def ensure_slot(
    connection: psycopg.Connection[Any], config: PostgresSourceConfig, where: str, create: bool
) -> int:
    """The slot's confirmed LSN, creating the slot first if it is missing and ``create``.

    A reader resuming from a position never creates the slot: a new slot starts now, and
    the changes since that position would be lost without a word.

    Raises:
        SlotMissingError: No such slot, and it may not be created.
        SlotMismatchError: The slot is physical, of another plugin or another database.
        WalRemovedError: The slot was invalidated (its WAL was removed).
    """
    state = slot_state(connection, config.slot)
    if state is None:
        if not (config.create_slot and create):
            raise SlotMissingError.named(where, config.slot)
        row = connection.execute(
            "SELECT lsn::text FROM pg_create_logical_replication_slot(%s, 'pgoutput')",
            (config.slot,),
        ).fetchone()
        announce_slot(config.slot, where, str(row[0]) if row else "its creation")
        state = slot_state(connection, config.slot)
        assert state is not None
    return check_slot(state, config.slot, where)


def slot_state(connection: psycopg.Connection[Any], slot: str) -> dict[str, Any] | None:
    """The slot's row of ``pg_replication_slots`` (with ``ours``: in this database)."""
    cursor = connection.execute(
        "SELECT slot_type, plugin, database = current_database() AS ours,"
        " confirmed_flush_lsn::text AS confirmed, wal_status"
        " FROM pg_replication_slots WHERE slot_name = %s",
        (slot,),
    )
    row = cursor.fetchone()
    if row is None:
        return None
    names = [column.name for column in cursor.description or ()]
    return dict(zip(names, row, strict=True))


def check_slot(state: Mapping[str, Any], slot: str, where: str) -> int:
    """The confirmed LSN of a slot that can serve this source."""
    if state["slot_type"] != "logical":
        raise SlotMismatchError.of(where, slot, "is a physical slot")
    if state["plugin"] != "pgoutput":
        raise SlotMismatchError.of(where, slot, f"uses the plugin {state['plugin']}, not pgoutput")
    if not state["ours"]:
        raise SlotMismatchError.of(where, slot, "belongs to another database")
    if state["wal_status"] == "lost":
        raise WalRemovedError.at(where, slot, "wal_status is lost")
    return lsn_to_int(state["confirmed"])


def next_xid(connection: psycopg.Connection[Any]) -> int:
    """The next transaction id the server will assign (32 bits, as the stream shows xids)."""
    row = connection.execute("SELECT pg_snapshot_xmax(pg_current_snapshot())::text").fetchone()
    assert row is not None
    return int(row[0]) & 0xFFFFFFFF


def _qualified(table: str) -> str:
    schema, name = split_table(table)
    return f"{quote(schema)}.{quote(name)}"
