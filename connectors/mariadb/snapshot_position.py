"""The binlog position of a consistent snapshot, as each product gives it.

Every snapshot path (the CDC snapshot reader, the validator's partition reads and digest
sessions) opens its snapshot here, so MariaDB and MySQL each have one way to it:

- **MariaDB** reads ``Binlog_snapshot_file``/``Binlog_snapshot_position`` after ``START
  TRANSACTION WITH CONSISTENT SNAPSHOT``: the server takes them atomically with the
  snapshot, so no lock and no privilege is needed
  (https://mariadb.com/kb/en/enhancements-for-start-transaction-with-consistent-snapshot/).
- **MySQL 8.0/8.4** has no such status. Its position is read under a brief global read
  lock, as ``mysqldump --single-transaction --source-data`` and Debezium's ``minimal``
  locking do (https://dev.mysql.com/doc/refman/8.4/en/mysqldump.html#option_mysqldump_single-transaction)::

      SET SESSION lock_wait_timeout = 10
      FLUSH TABLES WITH READ LOCK
      START TRANSACTION WITH CONSISTENT SNAPSHOT
      SHOW MASTER STATUS            -- SHOW BINARY LOG STATUS on 8.4
      UNLOCK TABLES
      SET SESSION lock_wait_timeout = @@GLOBAL.lock_wait_timeout

  ``FLUSH TABLES WITH READ LOCK`` waits until every transaction being committed has
  committed in InnoDB and blocks new commits, so the snapshot opened under it holds exactly
  the transactions the binlog holds up to the position shown, and its ``Executed_Gtid_Set``
  is their GTID set. The lock is held for those two statements only; waiting for it is
  bounded by ``LOCK_WAIT_S`` (a long query or an open ``LOCK TABLES`` holds it off), so
  writers are never queued behind it for longer. It needs ``RELOAD``; the status statement
  needs ``REPLICATION CLIENT`` (https://dev.mysql.com/doc/refman/8.4/en/flush.html).
  ``LOCK INSTANCE FOR BACKUP`` with ``performance_schema.log_status`` is not used: that lock
  blocks DDL but not commits, so a commit between the snapshot and the ``log_status`` read
  would be after the position and missing from the snapshot: lost
  (https://dev.mysql.com/doc/refman/8.4/en/lock-instance-for-backup.html).
  A server without a binlog (``log_bin`` off, e.g. a target) gets its snapshot without any
  lock and no position.
- **A pipeline's snapshot on MySQL** also asks ``XA RECOVER`` under the lock: MySQL writes an
  XA transaction's changes to the binlog at ``XA PREPARE``, so one prepared before the
  position and committed after it would be in neither the snapshot nor the log read from
  there. The snapshot is refused while one is prepared (``PreparedXaError``, naming the
  XIDs); it needs ``XA_RECOVER_ADMIN``. The validator's snapshots do not ask: neither side
  of a comparison holds a prepared transaction's rows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from cdc_core.capture.position import Position
from connectors.mariadb.errors import PreparedXaError, SnapshotLockError, SnapshotPrivilegeError
from connectors.mariadb.flavour import ServerFlavour
from connectors.mariadb.position import position_of, to_position

LOCK_WAIT_S = 10  # the longest wait for the brief global read lock on MySQL
# ER_LOCK_WAIT_TIMEOUT; ER_SPECIFIC_ACCESS_DENIED_ERROR ("you need (at least one of) the
# RELOAD privilege(s)"), ER_DBACCESS_DENIED_ERROR
# (https://dev.mysql.com/doc/mysql-errors/8.4/en/server-error-reference.html).
ER_LOCK_WAIT_TIMEOUT = 1205
ACCESS_DENIED_CODES = (1227, 1044)
_ISOLATION = "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ"
_SNAPSHOT = "START TRANSACTION WITH CONSISTENT SNAPSHOT"


@dataclass(frozen=True, slots=True)
class SnapshotPosition:
    """Where a snapshot stands in the binlog.

    Args:
        log_file: The binlog file (``binlog.000003``).
        offset: The offset in it: the snapshot holds every transaction before it.
        gtid_set: MySQL's ``Executed_Gtid_Set`` at that offset (empty with
            ``gtid_mode=OFF``); MariaDB's snapshot status has none, so "" there.
    """

    log_file: str
    offset: int
    gtid_set: str = ""

    def __post_init__(self) -> None:
        if not self.log_file or self.offset < 0:
            raise ValueError(f"not a binlog position: {self.log_file}:{self.offset}")

    @property
    def value(self) -> int:
        """The ordered BIGINT form (``position.to_position``)."""
        return to_position(self.log_file, self.offset)

    def to_position(self, epoch: int = 0) -> Position:
        """The pipeline's ``Position`` (``file:offset`` of the ``epoch``-th server a pipeline
        followed; the GTID set is the reader's, ``gtid.py``)."""
        return position_of(self.log_file, self.offset, epoch)


def begin_snapshot(
    cursor: Any, flavour: ServerFlavour, source: str, for_capture: bool = False
) -> SnapshotPosition | None:
    """Open a consistent snapshot on ``cursor``'s connection; where it stands in the binlog
    (None: the server writes no binlog). ``for_capture``: the snapshot a pipeline streams
    the log from; on MySQL, it is refused while an XA transaction is prepared.

    Raises:
        SnapshotLockError: MySQL: the global read lock was not granted in ``LOCK_WAIT_S``.
        SnapshotPrivilegeError: MySQL: the user lacks ``RELOAD``/``REPLICATION CLIENT``
            (``XA_RECOVER_ADMIN`` for a pipeline's snapshot).
        PreparedXaError: MySQL, ``for_capture``: an XA transaction is prepared.
    """
    cursor.execute(_ISOLATION)
    if not flavour.is_mysql:
        cursor.execute(_SNAPSHOT)
        return _mariadb_snapshot_status(cursor)
    cursor.execute("SELECT @@GLOBAL.log_bin")
    if not int(cursor.fetchone()[0] or 0):
        cursor.execute(_SNAPSHOT)
        return None
    with _read_locked(cursor, source):
        cursor.execute(_SNAPSHOT)
        if for_capture:
            _refuse_prepared_xa(cursor, source)
        return _mysql_status(cursor, flavour)


def _refuse_prepared_xa(cursor: Any, source: str) -> None:
    """An XA transaction prepared now is in neither the snapshot (its rows are not
    committed) nor the log after its position (which holds only its ``XA COMMIT``: MySQL
    writes an XA transaction's changes at its prepare). ``XA RECOVER`` lists them."""
    cursor.execute("XA RECOVER")
    prepared = [_xid(*row) for row in cursor.fetchall()]
    if prepared:
        raise PreparedXaError.prepared(source, prepared)


def _xid(format_id: object, gtrid_length: object, bqual_length: object, data: object) -> str:
    """An XID as ``XA COMMIT`` takes it: ``X'gtrid',X'bqual',formatID``."""
    raw = data if isinstance(data, bytes) else str(data).encode()
    gtrid, bqual = raw[: int(str(gtrid_length))], raw[int(str(gtrid_length)) :]
    return f"X'{gtrid.hex()}',X'{bqual[: int(str(bqual_length))].hex()}',{format_id}"


def binlog_end(cursor: Any, flavour: ServerFlavour, source: str) -> SnapshotPosition | None:
    """The binlog's end now (None: no binlog). MariaDB's snapshot status, outside a
    snapshot, is the end and needs no privilege; MySQL's status statement needs
    ``REPLICATION CLIENT``.

    Raises:
        SnapshotPrivilegeError: MySQL: the user lacks ``REPLICATION CLIENT``.
    """
    if not flavour.is_mysql:
        return _mariadb_snapshot_status(cursor)
    with _denied(source):
        return _mysql_status(cursor, flavour)


def binlog_basename(cursor: Any, flavour: ServerFlavour) -> str:
    """The binlog files' base name (``binlog``), from status or variables any user may read
    ("binlog" when the server writes none)."""
    if flavour.is_mysql:
        cursor.execute("SELECT @@GLOBAL.log_bin_basename")
        row = cursor.fetchone()
        path = str(row[0]) if row and row[0] else ""
        return path.replace("\\", "/").rpartition("/")[2] or "binlog"
    cursor.execute("SHOW STATUS LIKE 'binlog_snapshot_file'")
    row = cursor.fetchone()
    return str(row[1]).rpartition(".")[0] if row and row[1] else "binlog"


def _mariadb_snapshot_status(cursor: Any) -> SnapshotPosition | None:
    cursor.execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
    status = dict(cursor.fetchall())
    log_file = status.get("Binlog_snapshot_file")
    if not log_file:
        return None
    return SnapshotPosition(str(log_file), int(status.get("Binlog_snapshot_position") or 0))


def _mysql_status(cursor: Any, flavour: ServerFlavour) -> SnapshotPosition | None:
    """``File``, ``Position`` and ``Executed_Gtid_Set`` of the status statement (no row:
    no binlog)."""
    cursor.execute(flavour.binlog_status_statement)
    row = cursor.fetchone()
    if row is None or not row[0]:
        return None
    gtid_set = str(row[4] or "") if len(row) > 4 else ""
    return SnapshotPosition(str(row[0]), int(row[1]), gtid_set.replace("\n", ""))


@contextlib.contextmanager
def _read_locked(cursor: Any, source: str) -> Iterator[None]:
    """Hold MySQL's global read lock, waiting for it at most ``LOCK_WAIT_S``."""
    cursor.execute(f"SET SESSION lock_wait_timeout = {LOCK_WAIT_S}")
    with _denied(source):
        try:
            cursor.execute("FLUSH TABLES WITH READ LOCK")
        except Exception as exc:
            if _code(exc) == ER_LOCK_WAIT_TIMEOUT:
                raise SnapshotLockError.timed_out(source, LOCK_WAIT_S) from exc
            raise
    try:
        with _denied(source):
            yield
    finally:
        cursor.execute("UNLOCK TABLES")
        cursor.execute("SET SESSION lock_wait_timeout = @@GLOBAL.lock_wait_timeout")


@contextlib.contextmanager
def _denied(source: str) -> Iterator[None]:
    """A privilege the snapshot position needs, refused, as ``SnapshotPrivilegeError``."""
    try:
        yield
    except Exception as exc:
        if _code(exc) in ACCESS_DENIED_CODES:
            detail = str(exc.args[-1]) if exc.args else str(exc)
            raise SnapshotPrivilegeError.denied(source, detail) from exc
        raise


def _code(exc: Exception) -> object:
    """The server's error number of a pymysql error (None for other errors)."""
    import pymysql

    if isinstance(exc, pymysql.err.MySQLError) and exc.args:
        return exc.args[0]
    return None
