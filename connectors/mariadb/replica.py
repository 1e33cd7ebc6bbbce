"""A MariaDB/MySQL replica fed by the server's own replication: the source's GTID position,
and waiting until a replica has applied it (``MASTER_GTID_WAIT``,
https://mariadb.com/kb/en/master_gtid_wait/)."""

from __future__ import annotations

import contextlib

from cdc_core.config import mask_url
from cdc_core.errors import TransientError
from connectors.mariadb.connector import MariaDBConnector


def gtid_position(source: MariaDBConnector) -> str:
    """The GTID position of every transaction the source has written to its binlog."""
    with contextlib.closing(source.connect()) as connection, connection.cursor() as cursor:
        cursor.execute("SELECT @@gtid_binlog_pos")
        (position,) = cursor.fetchone()
    return str(position)


def wait_for_gtid(replica: MariaDBConnector, position: str, timeout_s: float) -> None:
    """Return once ``replica`` has applied ``position``.

    Raises:
        TransientError: Not within ``timeout_s``: names the replica, the position it applied
            and the one needed.
    """
    with contextlib.closing(replica.connect()) as connection, connection.cursor() as cursor:
        cursor.execute("SELECT MASTER_GTID_WAIT(%s, %s)", (position, timeout_s))
        (outcome,) = cursor.fetchone()
        if outcome == 0:
            return
        cursor.execute("SELECT @@gtid_slave_pos")
        (applied,) = cursor.fetchone()
    where = mask_url(replica.url)
    raise TransientError(
        f"replica {where} is behind: it applied GTID {applied}, the source is at {position},"
        f" after waiting {timeout_s:.0f} s; check SHOW SLAVE STATUS on the replica, or raise"
        " validation.replica_wait_timeout_s",
        {"replica": where, "position": position},
    )


def is_replica(server: MariaDBConnector, of: MariaDBConnector) -> bool:
    """Whether ``server`` replicates ``of``: it has replication status, and the GTIDs it
    applied carry ``of``'s server id (``domain-server_id-sequence``)."""
    with contextlib.closing(server.connect()) as connection, connection.cursor() as cursor:
        cursor.execute("SHOW SLAVE STATUS")
        if cursor.fetchone() is None:
            return False
        cursor.execute("SELECT @@gtid_slave_pos")
        (applied,) = cursor.fetchone()
    with contextlib.closing(of.connect()) as connection, connection.cursor() as cursor:
        cursor.execute("SELECT @@server_id")
        (server_id,) = cursor.fetchone()
    return any(part.split("-")[1:2] == [str(server_id)] for part in str(applied).split(","))
