"""A MariaDB/MySQL replica fed by the server's own replication: the source's GTID position,
and waiting until a replica has applied it.

- ``replication: mariadb``: ``@@gtid_binlog_pos``, waited for with ``MASTER_GTID_WAIT``
  (https://mariadb.com/kb/en/master_gtid_wait/);
- ``replication: mysql``: the source's ``@@GLOBAL.gtid_executed``, waited for with
  ``WAIT_FOR_EXECUTED_GTID_SET`` (0: applied, 1: timed out;
  https://dev.mysql.com/doc/refman/8.4/en/gtid-functions.html#function_wait-for-executed-gtid-set).
  MySQL without ``gtid_mode=ON`` has no GTID set to wait for (an empty set would be
  "applied" at once), so it is refused by name, as is a server of the other product.

``GTID_WAITS`` holds both, keyed by the ``replication`` value that asks for them.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass

from cdc_core.config import mask_url
from cdc_core.errors import ConfigError, TransientError
from connectors.mariadb.connector import MariaDBConnector


def gtid_position(source: MariaDBConnector) -> str:
    """The GTID position of every transaction the source has written to its binlog.

    Raises:
        ConfigError: The source is MySQL (``replication: mysql``).
    """
    _check_product(source, "mariadb")
    with contextlib.closing(source.connect()) as connection, connection.cursor() as cursor:
        cursor.execute("SELECT @@gtid_binlog_pos")
        (position,) = cursor.fetchone()
    return str(position)


def wait_for_gtid(replica: MariaDBConnector, position: str, timeout_s: float) -> None:
    """Return once ``replica`` has applied ``position``.

    Raises:
        TransientError: Not within ``timeout_s``: names the replica, the position it applied
            and the one needed.
        ConfigError: The replica is MySQL (``replication: mysql``).
    """
    _check_product(replica, "mariadb")
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


def is_replica(server: MariaDBConnector, of: MariaDBConnector) -> str | None:
    """The ``replication:`` kind by which ``server`` replicates ``of``: ``mariadb`` when it
    has replication status and the GTIDs it applied carry ``of``'s server id
    (``domain-server_id-sequence``), ``mysql`` when one of its channels replicates from
    ``of``'s server UUID; None otherwise (also for servers of different products)."""
    if server.flavour().is_mysql != of.flavour().is_mysql:
        return None
    if server.flavour().is_mysql:
        return "mysql" if server_uuid(of) in _source_uuids(server) else None
    with contextlib.closing(server.connect()) as connection, connection.cursor() as cursor:
        cursor.execute("SHOW SLAVE STATUS")
        if cursor.fetchone() is None:
            return None
        cursor.execute("SELECT @@gtid_slave_pos")
        (applied,) = cursor.fetchone()
    with contextlib.closing(of.connect()) as connection, connection.cursor() as cursor:
        cursor.execute("SELECT @@server_id")
        (server_id,) = cursor.fetchone()
    parts = str(applied).split(",")
    return "mariadb" if any(p.split("-")[1:2] == [str(server_id)] for p in parts) else None


def server_uuid(server: MariaDBConnector) -> str:
    """MySQL: the server's UUID (the source part of the GTIDs it writes)."""
    with contextlib.closing(server.connect()) as connection, connection.cursor() as cursor:
        cursor.execute("SELECT @@server_uuid")
        (uuid,) = cursor.fetchone()
    return str(uuid)


def _source_uuids(replica: MariaDBConnector) -> set[str]:
    """MySQL: the server UUIDs its replication channels read from (none: not a replica).
    ``SHOW REPLICA STATUS`` and ``Source_UUID`` since 8.0.22; the older spellings before
    (8.4 removed them)."""
    renamed = replica.flavour().version >= (8, 0, 22)
    statement = "SHOW REPLICA STATUS" if renamed else "SHOW SLAVE STATUS"
    with contextlib.closing(replica.connect()) as connection, connection.cursor() as cursor:
        cursor.execute(statement)
        names = [column[0] for column in cursor.description or ()]
        rows = cursor.fetchall()
    column = names.index("Source_UUID" if renamed else "Master_UUID") if rows else 0
    return {str(row[column]) for row in rows}


def executed_gtid_set(source: MariaDBConnector) -> str:
    """MySQL: the GTID set of every transaction the source has committed
    (``@@GLOBAL.gtid_executed``, without the line breaks MySQL puts between UUIDs).

    Raises:
        ConfigError: The source is MariaDB, or runs without ``gtid_mode=ON``.
    """
    _check_product(source, "mysql")
    with contextlib.closing(source.connect()) as connection, connection.cursor() as cursor:
        cursor.execute("SELECT @@GLOBAL.gtid_mode, @@GLOBAL.gtid_executed")
        mode, executed = cursor.fetchone()
    if str(mode).upper() != "ON":
        where = mask_url(source.url)
        raise ConfigError(
            f"replication: mysql, but source {where} runs with gtid_mode={mode}: without GTIDs"
            " there is no position to wait for on the replica; enable gtid_mode=ON (and"
            " enforce_gtid_consistency=ON), or use replication: unknown",
            {"source": where, "setting": "gtid_mode"},
        )
    return _one_line(executed)


def wait_for_executed_gtid_set(replica: MariaDBConnector, gtid_set: str, timeout_s: float) -> None:
    """MySQL: return once ``replica`` has applied every transaction of ``gtid_set``.

    Raises:
        TransientError: Not within ``timeout_s``: names the replica, the GTID set it applied,
            the set needed and the part of it still missing.
        ConfigError: The replica is MariaDB.
    """
    _check_product(replica, "mysql")
    with contextlib.closing(replica.connect()) as connection, connection.cursor() as cursor:
        wait_s = max(1, math.ceil(timeout_s))  # whole seconds: 0 would not wait at all
        cursor.execute("SELECT WAIT_FOR_EXECUTED_GTID_SET(%s, %s)", (gtid_set, wait_s))
        (outcome,) = cursor.fetchone()
        if outcome == 0:
            return
        cursor.execute("SELECT @@GLOBAL.gtid_executed")
        applied = _one_line(cursor.fetchone()[0])
        cursor.execute("SELECT GTID_SUBTRACT(%s, %s)", (gtid_set, applied))
        missing = _one_line(cursor.fetchone()[0])
    where = mask_url(replica.url)
    raise TransientError(
        f"replica {where} is behind: it applied GTID set {applied or '(empty)'}, the source"
        f" is at {gtid_set}, missing {missing}, after waiting {timeout_s:.0f} s; check SHOW"
        " REPLICA STATUS on the replica, or raise validation.replica_wait_timeout_s",
        {"replica": where, "position": gtid_set, "applied": applied, "missing": missing},
    )


@dataclass(frozen=True, slots=True)
class GtidWait:
    """How one ``replication`` kind reads the source's position and waits for a replica.

    Args:
        product: How messages name the servers it needs.
        position: The source's GTID position now.
        wait: Return once the replica applied a position, else raise ``TransientError``.
    """

    product: str
    position: Callable[[MariaDBConnector], str]
    wait: Callable[[MariaDBConnector, str, float], None]


GTID_WAITS = {
    "mariadb": GtidWait("MariaDB/MySQL", gtid_position, wait_for_gtid),
    "mysql": GtidWait("MySQL", executed_gtid_set, wait_for_executed_gtid_set),
}


def _check_product(server: MariaDBConnector, replication: str) -> None:
    """Refuse a server of the other product by name before any wait statement is sent.

    Raises:
        ConfigError: ``replication`` does not fit the server's product.
    """
    flavour = server.flavour()
    if flavour.is_mysql == (replication == "mysql"):
        return
    fits = "mysql" if flavour.is_mysql else "mariadb"
    where = mask_url(server.url)
    raise ConfigError(
        f"replication: {replication}, but {where} is {flavour.series}: use replication: {fits}",
        {"server": where, "replication": replication},
    )


def _one_line(gtid_set: object) -> str:
    """A GTID set as one line (MySQL breaks it after each UUID's intervals)."""
    return "".join(str(gtid_set or "").split())
