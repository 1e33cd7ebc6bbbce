"""Standby status updates written to the replication connection through libpq directly.

Why not psycopg2's ``send_feedback``: when a keepalive arrives, psycopg2 moves its flush
position on to the keepalive's WAL end whenever the flush position the client gave it is
at or after the ``data_start`` of the last XLogData message (``pq_read_replication_message``
in psycopg2's ``pqpath.c``), assuming ``data_start`` grows. pgoutput's does not (a
transaction sent at its commit starts with changes older than earlier commits), so psycopg2
would confirm transactions the lake does not hold yet, and after a crash the slot would
skip them. So the reader never gives psycopg2 a flush position, turns its periodic feedback
off (a long ``status_interval``), and sends its own status updates often enough that the
server never asks psycopg2 for one (it asks after ``wal_sender_timeout / 2`` of silence).

Message: ``r``, write, flush and apply LSNs, the client's clock (microseconds since
2000-01-01) and a reply-request flag ("Standby status update",
https://www.postgresql.org/docs/current/protocol-replication.html).

Ending a stream (``end_stream``): closing the connection mid-stream makes the server notice
the loss on its own time, so for a moment the walsender still holds the slot (the next
session's START_REPLICATION fails: "replication slot is active"), and a last status update
may not be applied yet -- or not at all: a socket closed with unread data is reset, and the
server drops what it had not read. So the reader ends COPY BOTH as the protocol does: a
last status update, then CopyDone; the server applies the update (it reads messages in
order), answers CopyDone, releases the slot and completes the command
(``StartLogicalReplication`` in walsender.c releases the slot before CommandComplete),
while the client drops the data still in flight.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import datetime as dt
import re
import select
import struct
import time
from functools import cache
from typing import Any

from cdc_core.errors import TransientError

_EPOCH = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)


@cache
def _libpq() -> ctypes.CDLL:
    """The libpq psycopg2 uses (the one loaded in this process; else the system's)."""
    with open("/proc/self/maps", encoding="utf-8") as maps:
        loaded = sorted(set(re.findall(r"/\S*libpq[^/\s]*\.so[^/\s]*", maps.read())))
    path = loaded[0] if loaded else ctypes.util.find_library("pq")
    if path is None:
        raise TransientError("libpq is not loaded; import psycopg2 first")
    library = ctypes.CDLL(path)
    pointer = ctypes.c_void_p
    library.PQputCopyData.argtypes = [pointer, ctypes.c_char_p, ctypes.c_int]
    library.PQflush.argtypes = [pointer]
    library.PQputCopyEnd.argtypes = [pointer, ctypes.c_char_p]
    library.PQgetCopyData.argtypes = [pointer, ctypes.POINTER(pointer), ctypes.c_int]
    library.PQfreemem.argtypes = [pointer]
    library.PQconsumeInput.argtypes = [pointer]
    library.PQisBusy.argtypes = [pointer]
    library.PQgetResult.argtypes = [pointer]
    library.PQgetResult.restype = pointer
    library.PQresultStatus.argtypes = [pointer]
    library.PQclear.argtypes = [pointer]
    return library


def status_update(flushed: int, reply: bool) -> bytes:
    """The bytes of a standby status update confirming ``flushed``."""
    micros = (dt.datetime.now(dt.UTC) - _EPOCH) // dt.timedelta(microseconds=1)
    return b"r" + struct.pack(">QQQqB", flushed, flushed, flushed, micros, int(reply))


def send_status(connection: Any, flushed: int, reply: bool = False) -> None:
    """Send a status update on psycopg2 replication ``connection`` (in COPY BOTH mode).

    Raises:
        TransientError: libpq could not send it (the connection broke).
    """
    library = _libpq()
    message = status_update(flushed, reply)
    pgconn = ctypes.c_void_p(connection.pgconn_ptr)
    if library.PQputCopyData(pgconn, message, len(message)) != 1 or library.PQflush(pgconn) != 0:
        raise TransientError("cannot send a status update on the replication connection")


_COPY_DONE = -1  # PQgetCopyData: the server ended the COPY
_COPY_FAILED = -2
_FATAL_ERROR = 7  # ExecStatusType PGRES_FATAL_ERROR


def end_stream(connection: Any, flushed: int, timeout_s: float) -> bool:
    """End a replication stream cleanly (module doc): confirm ``flushed``, send CopyDone, and
    drop what the server still sends until it has completed the command.

    Returns:
        True once the server has applied the update and released the slot; False if the
        connection broke or the server did not finish within ``timeout_s`` (the caller
        closes the connection anyway).
    """
    library = _libpq()
    pgconn = ctypes.c_void_p(connection.pgconn_ptr)
    message = status_update(flushed, reply=False)
    if library.PQputCopyData(pgconn, message, len(message)) != 1:
        return False
    if library.PQputCopyEnd(pgconn, None) != 1 or library.PQflush(pgconn) != 0:
        return False
    deadline = time.monotonic() + timeout_s
    return _drain_copy(library, pgconn, connection, deadline) and _finish_command(
        library, pgconn, connection, deadline
    )


def _drain_copy(library: ctypes.CDLL, pgconn: Any, connection: Any, deadline: float) -> bool:
    """Read and drop COPY data until the server's CopyDone."""
    buffer = ctypes.c_void_p()
    while True:
        length = library.PQgetCopyData(pgconn, ctypes.byref(buffer), 1)
        if length > 0:
            library.PQfreemem(buffer)
        elif length == _COPY_DONE:
            return True
        elif length == _COPY_FAILED or not _wait_readable(library, pgconn, connection, deadline):
            return False


def _finish_command(library: ctypes.CDLL, pgconn: Any, connection: Any, deadline: float) -> bool:
    """Collect the command's results: its CommandComplete comes after the slot's release."""
    ok = True
    while True:
        while library.PQisBusy(pgconn):
            if not _wait_readable(library, pgconn, connection, deadline):
                return False
        result = library.PQgetResult(pgconn)
        if not result:
            return ok
        ok = ok and library.PQresultStatus(result) != _FATAL_ERROR
        library.PQclear(result)


def _wait_readable(library: ctypes.CDLL, pgconn: Any, connection: Any, deadline: float) -> bool:
    """Wait for input from the server and take it in; False past ``deadline`` or on error."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        return False
    select.select([connection], [], [], remaining)
    return bool(library.PQconsumeInput(pgconn))
