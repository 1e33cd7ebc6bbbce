"""One consistent snapshot of a PostgreSQL database, shared by every partition: at an exact LSN
when a copy fed from the log must be read as of it, else the cheapest exact one.

Without a log position (``plain_snapshot``): a REPEATABLE READ transaction runs
``pg_export_snapshot()`` and stays open; every partition imports the snapshot as below.
It needs no slot, no ``wal_level = logical`` and no REPLICATION attribute
(https://www.postgresql.org/docs/current/functions-admin.html#FUNCTIONS-SNAPSHOT-SYNCHRONIZATION),
and reports position NULL (see the last paragraph).

At an exact LSN (``exported_snapshot``): a logical replication connection runs

    CREATE_REPLICATION_SLOT <name> TEMPORARY LOGICAL pgoutput (SNAPSHOT 'export')

which answers ``consistent_point`` (an LSN) and ``snapshot_name``. Every partition then
runs ``BEGIN ISOLATION LEVEL REPEATABLE READ`` and ``SET TRANSACTION SNAPSHOT
'<snapshot_name>'`` in its own session and sees exactly the same rows. The snapshot lives
"until a new command is executed on this connection or the replication connection is
closed" (https://www.postgresql.org/docs/15/protocol-replication.html), so the replication
connection stays open and idle for the whole ``with`` block; closing it (or dropping the
temporary slot) ends both.

Why ``consistent_point`` is exactly the snapshot's position. The exported snapshot "will
show exactly the state of the database after which all changes will be included in the
change stream" (https://www.postgresql.org/docs/15/logicaldecoding-explanation.html,
"Exported Snapshots"): the snapshot builder that exports it is the one that decides which
transactions the slot decodes. It reads WAL until it is consistent and sets
``consistent_point`` (the slot's ``confirmed_flush``) to the *end* of the record at which
it became so (logical.c, ``DecodingContextFindStartpoint``); every commit record read
before that point is in the snapshot, and the slot later decodes exactly the transactions
whose commit record lies at or after it (snapbuild.c, ``SnapBuildXactNeedsSkip``). WAL
records do not overlap, so a commit record ends at or before ``consistent_point`` or starts
at or after it, and for every transaction T:

    T is in the snapshot  <=>  T's commit record ends at or before consistent_point
                          <=>  commit_pos(T) <= consistent_point

which is DESIGN.md's contract for a snapshot at P = ``consistent_point`` ("Positions"),
with ``commit_pos`` the commit's end LSN as pgoutput reports it.

Costs and limits, all from the same pages: the slot waits until every transaction that
had an xid when it started has finished (a long write transaction delays the snapshot);
the server needs ``wal_level = logical`` and the user the ``REPLICATION`` attribute; the
temporary slot holds back WAL and catalog cleanup only while the block runs. A plain
exported snapshot, and a partition read without a shared snapshot (a REPEATABLE READ
transaction of its own), sit at a position no server function reports exactly
(``pg_current_wal_lsn()`` read inside one may lie before or after commits that are in
flight), so they report position NULL.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from cdc_core.drivers import driver_import
from cdc_core.errors import TerminalError, TransientError
from connectors.model import Snapshot
from connectors.postgres.position import position_of

if TYPE_CHECKING:
    import psycopg

log = logging.getLogger(__name__)

SLOT_PREFIX = "replcheck_snapshot_"
MIN_SERVER_VERSION = 150000  # the (SNAPSHOT 'export') option syntax of PostgreSQL 15
SLOT_WAIT_S = 120.0  # how long a snapshot waits for the running transactions of its cluster
SLOT_MECHANISM = "an exported snapshot of a temporary logical slot (exact LSN)"
PLAIN_MECHANISM = "an exported REPEATABLE READ snapshot (no replication slot)"
# Why a slot is asked for at all, in every error about one: only this case needs it.
_WHY_SLOT = (
    "a snapshot at an exact log position (to read a copy fed from the log as of it) is"
    " taken by a temporary logical replication slot, which needs wal_level = logical"
    " (postgresql.conf, then restart the server) and a user with the REPLICATION attribute"
    " (ALTER ROLE <user> REPLICATION)"
)


@contextlib.contextmanager
def plain_snapshot(connection: psycopg.Connection[Any]) -> Iterator[Snapshot]:
    """Export the snapshot of the REPEATABLE READ transaction just begun on ``connection``
    (its first statement), valid while that transaction stays open."""
    row = connection.execute("SELECT pg_export_snapshot()").fetchone()
    assert row is not None
    log.info("snapshot %s exported (no log position asked)", row[0])
    yield Snapshot(None, None, str(row[0]), PLAIN_MECHANISM)


@contextlib.contextmanager
def exported_snapshot(conninfo: str, where: str) -> Iterator[Snapshot]:
    """Hold an exported snapshot and its exact LSN for the duration of the ``with`` block.

    Args:
        conninfo: libpq connection string of the database (with the password; never logged).
        where: The database, for messages (no password).

    Raises:
        TerminalError: ``wal_level`` is not ``logical``, the user lacks ``REPLICATION``, or
            the server is older than PostgreSQL 15.
        TransientError: The server could not be reached or had no free slot or WAL sender.
    """
    slot = f"{SLOT_PREFIX}{uuid.uuid4().hex}"
    try:
        connection = replication_connection(conninfo, where)
    except TerminalError as exc:
        cause = str(exc.__cause__ or exc.message).strip()
        raise _slot_refused(where, cause) from exc
    with contextlib.closing(connection):
        snapshot = _create_slot(connection, slot, where)
        log.info("snapshot %s of %s at LSN %s", snapshot.token, where, snapshot.position_text)
        try:
            yield snapshot
        finally:
            _drop_slot(connection, slot, where)


def replication_connection(conninfo: str, where: str) -> Any:
    with driver_import("Postgres replication connections"):
        import psycopg2
        import psycopg2.extras
    try:
        connection = psycopg2.connect(
            conninfo, connection_factory=psycopg2.extras.LogicalReplicationConnection
        )
    except psycopg2.OperationalError as exc:
        # libpq reports a missing REPLICATION attribute as a failed connection: "must be
        # superuser or replication role to start walsender".
        if "replication" in str(exc):
            raise TerminalError(
                f"cannot open a replication connection to {where}: {exc}; grant the user the"
                " REPLICATION attribute (ALTER ROLE <user> REPLICATION)",
                {"source": where},
            ) from exc
        raise TransientError(f"cannot connect to {where}: {exc}", {"source": where}) from exc
    if connection.server_version < MIN_SERVER_VERSION:
        connection.close()
        raise TerminalError(f"shared snapshots need PostgreSQL 15 or later ({where})")
    return connection


def _create_slot(connection: Any, slot: str, where: str) -> Snapshot:
    import psycopg2

    cursor = connection.cursor()
    # Creating a slot waits for every transaction running in the cluster to end; cancel
    # the wait after SLOT_WAIT_S rather than hang behind a forgotten open transaction.
    watchdog = threading.Timer(SLOT_WAIT_S, connection.cancel)
    watchdog.start()
    try:
        cursor.execute(
            f"CREATE_REPLICATION_SLOT {slot} TEMPORARY LOGICAL pgoutput (SNAPSHOT 'export')"
        )
    except psycopg2.errors.QueryCanceled as exc:
        raise TransientError(
            f"taking a snapshot of {where} waited {SLOT_WAIT_S:g} s for the transactions"
            " running in its cluster to end; find the long one (pg_stat_activity, oldest"
            " xact_start) and end it, then run again",
            {"source": where},
        ) from exc
    except psycopg2.errors.ObjectNotInPrerequisiteState as exc:
        # "logical decoding requires wal_level >= logical"
        raise _slot_refused(where, str(exc).strip()) from exc
    except psycopg2.OperationalError as exc:
        raise TransientError(f"cannot create a replication slot on {where}: {exc}") from exc
    finally:
        watchdog.cancel()
    _, consistent_point, snapshot_name, _ = cursor.fetchone()
    position = position_of(consistent_point)
    return Snapshot(position.value, position.text, snapshot_name, SLOT_MECHANISM)


def _slot_refused(where: str, problem: str) -> TerminalError:
    """The error of a slot the server or the user's role cannot have, saying why one was
    needed and what it needs."""
    return TerminalError(
        f"cannot take a snapshot of {where} at an exact log position ({problem}): {_WHY_SLOT}",
        {"source": where},
    )


def _drop_slot(connection: Any, slot: str, where: str) -> None:
    """Drop the slot now rather than when the server notices the closed connection, so it
    is gone when the block ends (closing alone drops it too, a moment later)."""
    import psycopg2

    try:
        connection.cursor().execute(f"DROP_REPLICATION_SLOT {slot}")
    except psycopg2.Error as exc:
        log.warning(
            "could not drop slot %s on %s (%s); it goes with the connection", slot, where, exc
        )


def use_snapshot(connection: psycopg.Connection[Any], snapshot: Snapshot, where: str) -> None:
    """Make the transaction just begun on ``connection`` read in ``snapshot``.

    The transaction must be REPEATABLE READ and this its first statement
    (https://www.postgresql.org/docs/current/sql-set-transaction.html).
    """
    import psycopg
    from psycopg import sql

    statement = sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(snapshot.token))
    try:
        connection.execute(statement)
    except psycopg.errors.InvalidParameterValue as exc:
        raise TerminalError(
            f"snapshot {snapshot.token} of {where} is gone: {exc}; read partitions inside"
            " the shared_snapshot() block",
            {"source": where, "position": snapshot.position_text},
        ) from exc
