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
"""

from __future__ import annotations

import ctypes
import ctypes.util
import datetime as dt
import re
import struct
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
    library.PQputCopyData.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
    library.PQflush.argtypes = [ctypes.c_void_p]
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
