"""A PostgreSQL target fed by PostgreSQL's own replication: a logical subscriber of the
source's publication, or a physical standby. How far it has applied the source's WAL:

- standby (``pg_is_in_recovery()``): ``pg_last_wal_replay_lsn()``;
- subscriber: the lowest ``confirmed_flush_lsn`` of its subscriptions' slots at the source --
  the position the subscriber confirmed as applied and flushed (its apply worker reports it;
  ``pg_stat_subscription.latest_end_lsn`` only says what the source sent, applied or not).

https://www.postgresql.org/docs/current/view-pg-replication-slots.html
"""

from __future__ import annotations

import contextlib

from cdc_core.errors import ConfigError
from connectors.postgres.connector import PostgresConnector
from connectors.postgres.position import lsn_to_int

_SLOTS_SQL = """
SELECT subslotname FROM pg_subscription
 WHERE subdbid = (SELECT oid FROM pg_database WHERE datname = current_database())
   AND subslotname IS NOT NULL
"""


def applied_position(source: PostgresConnector, replica: PostgresConnector) -> int | None:
    """The source WAL position ``replica`` has applied (None: nothing confirmed yet).

    Raises:
        ConfigError: The target is neither a standby nor a subscriber.
    """
    with contextlib.closing(replica.connect()) as connection:
        standby = connection.execute("SELECT pg_is_in_recovery()").fetchone()
        if standby is not None and standby[0]:
            row = connection.execute("SELECT pg_last_wal_replay_lsn()::text").fetchone()
            return lsn_to_int(row[0]) if row and row[0] else None
        slots = [name for (name,) in connection.execute(_SLOTS_SQL).fetchall()]
    if not slots:
        raise ConfigError(
            f"replication: postgres, but {replica.where} is neither a standby nor a subscriber"
            " (no subscription in its database); check the comparison's target or replication",
            {"target": replica.where},
        )
    query = (
        "SELECT count(*), min(confirmed_flush_lsn)::text FROM pg_replication_slots"
        " WHERE slot_name = ANY(%s)"
    )
    with contextlib.closing(source.connect()) as connection:
        found = connection.execute(query, (slots,)).fetchone()
    if found is None or found[0] < len(slots):
        raise ConfigError(
            f"replication: postgres, but the source {source.where} has no slot {slots} of"
            f" the subscriptions of {replica.where}; check that it subscribes to this source",
            {"target": replica.where},
        )
    return lsn_to_int(found[1]) if found[1] else None


def is_replica(server: PostgresConnector, of: PostgresConnector) -> str | None:
    """``postgres`` when ``server`` is a standby, or its database subscribes to ``of`` (its
    subscriptions' slots are ``of``'s); else None."""
    try:
        applied_position(of, server)
    except ConfigError:
        return None
    return "postgres"
