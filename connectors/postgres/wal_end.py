"""Where the WAL of every commit made so far ends, once it is flushed.

A commit becomes visible when its record is inserted into the WAL; with
``synchronous_commit = off`` it is flushed later, by the WAL writer, within three
``wal_writer_delay``s (https://www.postgresql.org/docs/current/wal-async-commit.html). The
walsender sends only flushed WAL, so neither a pipeline nor a replica can reach a commit
before then, and ``pg_current_wal_lsn()`` (the write position) may lie before commits a
reader already sees. The end position of the commits so far is the insert position of the
call, once the flush position has passed it; the tail of a transaction still in progress
may stay unflushed until its own commit, so after three WAL writer delays the flush
position is taken instead: every commit made before the call is flushed by then.
"""

from __future__ import annotations

import time
from typing import Any

from connectors.postgres.position import lsn_to_int

ASYNC_COMMIT_DELAYS = 3  # wal_writer_delays within which an asynchronous commit is flushed


def committed_end(connection: Any) -> int:
    """The WAL position every commit made before this call ends at or before, flushed."""
    insert = _lsn(connection, "pg_current_wal_insert_lsn()")
    delay_s = _milliseconds(connection, "wal_writer_delay") / 1000
    deadline = time.monotonic() + ASYNC_COMMIT_DELAYS * delay_s
    while True:
        flushed = _lsn(connection, "pg_current_wal_flush_lsn()")
        if flushed >= insert:
            return insert
        if time.monotonic() >= deadline:
            return flushed
        time.sleep(delay_s / 10)


def _lsn(connection: Any, expression: str) -> int:
    """The value of an LSN-valued SQL expression."""
    row = connection.execute(f"SELECT ({expression})::text").fetchone()
    return lsn_to_int(row[0])


def _milliseconds(connection: Any, setting: str) -> float:
    """A duration setting in milliseconds."""
    row = connection.execute(
        "SELECT extract(epoch FROM current_setting(%s)::interval) * 1000", (setting,)
    ).fetchone()
    return float(row[0])
