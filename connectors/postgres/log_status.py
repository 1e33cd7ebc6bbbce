"""How PostgreSQL's WAL stands for one pipeline (a ``connectors.model.LogStatusReader``):
the WAL's end, how far the pipeline is from it, and what its replication slot keeps.

A logical slot keeps the WAL from its ``restart_lsn`` on until its consumer confirms past
it, whether the pipeline runs or not: a stopped pipeline's slot makes the source's WAL grow
with every write on the server, in any database. ``pg_replication_slots.wal_status``
(https://www.postgresql.org/docs/current/view-pg-replication-slots.html) says how safe that
WAL is: ``reserved`` (within ``max_wal_size``), ``extended`` (beyond it, kept for the slot),
``unreserved`` (removed at the next checkpoint unless the slot catches up: past
``max_slot_wal_keep_size``) and ``lost`` (removed: the slot can no longer serve). Reading
the view and ``pg_current_wal_lsn()`` changes nothing, so a running pipeline is undisturbed.
"""

from __future__ import annotations

import contextlib
from typing import Any

from cdc_core.capture.position import Position
from connectors.model import LogStatus
from connectors.postgres.connector import PostgresConnector
from connectors.postgres.log_source import source_config
from connectors.postgres.position import ALIGN, describe_position, lsn_to_int

_END = "SELECT pg_current_wal_lsn()::text"
_SLOT = (
    "SELECT active, wal_status, pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint,"
    " safe_wal_size FROM pg_replication_slots"
    " WHERE slot_name = %s AND database = current_database()"
)
_ANEW = "remove its state directory and its target's tables to load the tables anew"
_AT_RISK = {
    "extended": "it keeps more WAL than max_wal_size (wal_status extended)",
    "unreserved": "its WAL is removed at the server's next checkpoint unless the pipeline"
    " catches up (wal_status unreserved: past max_slot_wal_keep_size); start it now",
    "lost": f"its WAL was removed (wal_status lost): the pipeline cannot resume; {_ANEW}",
}


def read_log_status(
    url: str, password: str | None, held: Position | None, resume_at: Position | None
) -> LogStatus:
    """The WAL's end and the pipeline slot's state (``LogStatusReader``)."""
    config = source_config(url, password, ("probe",))
    connector = PostgresConnector(config.url, password, config.endpoint)
    with contextlib.closing(connector.connect()) as connection:
        row = connection.execute(_END).fetchone()
        slot = connection.execute(_SLOT, (config.slot,)).fetchone()
    lsn = lsn_to_int(str(row[0])) if row else 0
    end = Position(lsn - lsn % ALIGN, describe_position(lsn - lsn % ALIGN))
    behind = None if held is None else max(end.value - held.value, 0)
    if slot is None:
        return _without_slot(config.slot, connector.where, end, behind, resume_at)
    return _with_slot(config.slot, connector.where, end, behind, slot)


def _without_slot(
    slot: str, where: str, end: Position, behind: int | None, resume_at: Position | None
) -> LogStatus:
    """A missing slot: harmless before the first run (it creates one), fatal after it (a
    slot created now starts now, and the changes since the pipeline's position are lost)."""
    retention = f"replication slot {slot} does not exist on {where}: no WAL is kept for it"
    attention = None
    if resume_at is not None:
        attention = f"replication slot {slot} is gone: the pipeline cannot resume; {_ANEW}"
    return LogStatus(end, behind, retention, attention=attention, reading=False)


def _with_slot(slot: str, where: str, end: Position, behind: int | None, row: Any) -> LogStatus:
    active, wal_status, retained, safe = row
    kept = None if retained is None else max(int(retained), 0)
    state = "in use" if active else "inactive"
    retention = f"replication slot {slot} ({state}): wal_status {wal_status}"
    if kept is not None:
        retention += f", {kept:,} bytes of WAL retained on {where}"
    if safe is not None:
        retention += f", {int(safe):,} bytes more before max_slot_wal_keep_size removes them"
    risk = _AT_RISK.get(str(wal_status))
    attention = None if risk is None else f"replication slot {slot}: {risk}"
    stopped = (
        f"replication slot {slot} keeps the WAL of {where} while the pipeline is stopped"
        f" ({kept or 0:,} bytes now): it grows with every write on the server until"
        " `replcheck cdc run` starts again (`replcheck cdc status` shows how much;"
        f" SELECT pg_drop_replication_slot('{slot}') frees it once the pipeline is retired)"
    )
    return LogStatus(end, behind, retention, kept, attention, stopped, bool(active))
