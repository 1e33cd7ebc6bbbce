"""How MariaDB's binlog stands for one pipeline (a ``connectors.model.LogStatusReader``):
the binlog's end, how many bytes of it lie beyond the pipeline's position, and whether the
files the pipeline resumes from are still on the server.

MariaDB keeps nothing for a stopped reader: it purges binlog files older than
``binlog_expire_logs_seconds`` (or ``expire_logs_days``; https://mariadb.com/kb/en/replication-and-binary-log-system-variables/#binlog_expire_logs_seconds)
whether a pipeline still needs them or not, so a pipeline stopped for longer cannot resume.
``SHOW MASTER STATUS`` and ``SHOW BINARY LOGS`` need the BINLOG MONITOR privilege the
pipeline's user has already; they register no replica and disturb no running pipeline.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from cdc_core.capture.position import Position
from cdc_core.config import mask_url
from connectors.mariadb.connector import MariaDBConnector
from connectors.mariadb.log_source import source_config
from connectors.mariadb.position import position_of, split_position
from connectors.model import LogStatus

_EXPIRY = (
    "SHOW GLOBAL VARIABLES WHERE Variable_name IN"
    " ('binlog_expire_logs_seconds', 'expire_logs_days')"
)
_DAY_S = 86_400
_ANEW = "remove its state directory and its target's tables to load the tables anew"


def read_log_status(
    url: str, password: str | None, held: Position | None, resume_at: Position | None
) -> LogStatus:
    """The binlog's end and files, and how long the server keeps them (``LogStatusReader``)."""
    config = source_config(url, password, ("probe",))
    connector = MariaDBConnector(config.url, password, config.endpoint)
    with contextlib.closing(connector.connect()) as connection, connection.cursor() as cursor:
        cursor.execute("SHOW MASTER STATUS")
        log_file, offset = cursor.fetchone()[:2]
        cursor.execute("SHOW BINARY LOGS")
        files = {str(row[0]): int(row[1]) for row in cursor.fetchall()}
        cursor.execute(_EXPIRY)
        expiry_s = _expiry_seconds(dict(cursor.fetchall()))
    end = position_of(str(log_file), int(offset))
    basename = str(log_file).rpartition(".")[0]
    behind = None if held is None else _bytes_between(files, basename, held, end)
    return _retention(mask_url(config.url), files, basename, end, behind, resume_at, expiry_s)


def _expiry_seconds(variables: Mapping[str, Any]) -> int:
    """Seconds after which the server purges a binlog file (0: never by itself)."""
    seconds = int(float(variables.get("binlog_expire_logs_seconds") or 0))
    return seconds or int(float(variables.get("expire_logs_days") or 0) * _DAY_S)


def _bytes_between(files: Mapping[str, int], basename: str, start: Position, end: Position) -> int:
    """Bytes of binlog from ``start`` to ``end`` (files the server no longer has count 0)."""
    first, offset = split_position(start.value, basename)
    last, end_offset = split_position(end.value, basename)
    if first == last:
        return max(end_offset - offset, 0)
    later = sum(size for name, size in files.items() if first < name < last)
    return max(files.get(first, offset) - offset, 0) + later + end_offset


def _retention(
    where: str,
    files: Mapping[str, int],
    basename: str,
    end: Position,
    behind: int | None,
    resume_at: Position | None,
    expiry_s: int,
) -> LogStatus:
    """Whether the binlog file the pipeline resumes from is still there, and for how long
    the server keeps its files."""
    kept = (
        f"files older than {expiry_s:,} s are purged (binlog_expire_logs_seconds)"
        if expiry_s
        else "no file is purged by the server itself (binlog_expire_logs_seconds is 0)"
    )
    oldest = min(files, default="none")
    if resume_at is None:
        return LogStatus(end, behind, f"binlog files from {oldest} on; {kept}")
    needed, _ = split_position(resume_at.value, basename)
    retention = f"binlog files from {oldest} on; the pipeline resumes in {needed}; {kept}"
    if needed not in files:
        attention = f"binlog {needed} was purged from {where}: the pipeline cannot resume; {_ANEW}"
        return LogStatus(end, behind, retention, attention=attention)
    stopped = None
    if expiry_s:
        stopped = (
            f"MariaDB purges binlog files after {expiry_s:,} s: start `replcheck cdc run`"
            f" again before {needed} is purged, or the pipeline cannot resume"
        )
    return LogStatus(end, behind, retention, while_stopped=stopped)
