"""Whether PostgreSQL's WAL holds a change of one table between two positions (a
``connectors.model.QuietLog``), so a validator can tell a lake whose pipeline stopped at H
is already whole at a later snapshot position P.

It peeks the pipeline's own slot (``pg_logical_slot_peek_binary_changes``: decodes without
consuming, https://www.postgresql.org/docs/current/functions-admin.html), which decodes
exactly the publication's tables from the slot's confirmed position on. That is exact only
when the slot is idle (a running pipeline holds it, and moves the lake anyway) and has
confirmed no further than H (the transactions before its confirmed position are skipped).
A transaction counts when it changed the table's rows, or carries a DDL message of
``rewrites.py``, and commits in ``(H, P]``.
"""

from __future__ import annotations

from typing import Any

from cdc_core.names import format_table
from connectors.model import QuietLog
from connectors.postgres.connector import PostgresConnector
from connectors.postgres.log_source import source_config
from connectors.postgres.pgoutput.messages import (
    BeginMessage,
    CommitMessage,
    DeleteMessage,
    InsertMessage,
    LogicalMessage,
    RelationMessage,
    TruncateMessage,
    UpdateMessage,
    parse_message,
)
from connectors.postgres.position import lsn_to_int, lsn_to_text
from connectors.postgres.rewrites import PREFIX

_SLOT = (
    "SELECT active, confirmed_flush_lsn::text FROM pg_replication_slots"
    " WHERE slot_name = %s AND database = current_database()"
)
_PEEK = (
    "SELECT data FROM pg_logical_slot_peek_binary_changes(%s, %s::pg_lsn, NULL,"
    " 'proto_version', '2', 'publication_names', %s, 'messages', 'true')"
)


def open_quiet_log(url: str, password: str | None) -> QuietLog:
    """The ``QuietLog`` of a ``postgresql`` pipeline URL (its slot and publication)."""
    config = source_config(url, password, ("probe",))
    connector = PostgresConnector(config.url, password, config.endpoint)

    def check(table: str, start: int, end: int) -> str | None:
        with connector.connect() as connection:
            row = connection.execute(_SLOT, (config.slot,)).fetchone()
            refused = _unusable(config.slot, row, start)
            if refused is not None:
                return refused
            peeked = connection.execute(_PEEK, (config.slot, lsn_to_text(end), config.publication))
            return _first_change((bytes(data) for (data,) in peeked), table, start, end)

    return check


def _unusable(slot: str, row: Any, start: int) -> str | None:
    """Why the slot cannot show every transaction after ``start`` (None: it can)."""
    if row is None:
        return f"replication slot {slot} does not exist"
    active, confirmed = row
    if active:
        return f"replication slot {slot} is in use (its pipeline is running)"
    if confirmed is None or lsn_to_int(confirmed) > start:
        return f"replication slot {slot} has confirmed {confirmed}, past {lsn_to_text(start)}"
    return None


def _first_change(payloads: Any, table: str, start: int, end: int) -> str | None:
    """Where a transaction changing ``table`` commits in ``(start, end]``; None if nowhere."""
    relations: dict[int, str] = {}
    touched = False
    for payload in payloads:
        message = parse_message(payload, False)
        if isinstance(message, RelationMessage):
            relations[message.relation_id] = format_table(message.namespace, message.name)
        elif isinstance(message, BeginMessage):
            touched = False
        elif isinstance(message, InsertMessage | UpdateMessage | DeleteMessage):
            touched = touched or relations.get(message.relation_id) == table
        elif isinstance(message, TruncateMessage):
            touched = touched or table in {relations.get(r) for r in message.relation_ids}
        elif isinstance(message, LogicalMessage):
            touched = touched or message.prefix == PREFIX  # a DDL: counted, whichever table
        elif isinstance(message, CommitMessage) and touched and start < message.end_lsn <= end:
            return f"a change of {table} commits at {lsn_to_text(message.end_lsn)}"
    return None
