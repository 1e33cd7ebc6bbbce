"""A MySQL 8 server from outside, as the MariaDB suites' server object (issue 40, test level
3): no MySQL can run on this machine, so the MariaDB end-to-end and differential suites run
against one only when ``REPLCHECK_MYSQL_URL`` names it (``mysql+pymysql://user@host:3306``;
the password there or in ``REPLCHECK_MYSQL_PASSWORD``). The user creates and drops
databases (``CREATE``, ``DROP``) besides the replication grants of ``docs/cdc-mysql.md``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from pathlib import Path

from sqlalchemy.engine import make_url

from tests.private_servers import MariaDBServer

MYSQL_URL, MYSQL_PASSWORD = "REPLCHECK_MYSQL_URL", "REPLCHECK_MYSQL_PASSWORD"


def live_mysql() -> MariaDBServer | None:
    """The server ``REPLCHECK_MYSQL_URL`` names (None: the variable is not set).

    Raises:
        AssertionError: It is not MySQL.
    """
    if not os.environ.get(MYSQL_URL):
        return None
    url = make_url(os.environ[MYSQL_URL])
    password = os.environ.get(MYSQL_PASSWORD) or url.password or ""
    server = MariaDBServer(
        url.host or "127.0.0.1",
        url.port or 3306,
        url.username or "root",
        str(password),
        Path(),  # no socket, process or directory of ours
        0,
        Path(),
        "",
        "",
    )
    with contextlib.closing(server.connect(None)) as connection, connection.cursor() as cursor:
        cursor.execute("SELECT @@version_comment, @@binlog_row_image, @@time_zone")
        comment, row_image, time_zone = cursor.fetchone()
    assert "mysql" in str(comment).lower(), f"{MYSQL_URL} must name a MySQL 8 server: {comment}"
    return dataclasses.replace(server, binlog_row_image=str(row_image), time_zone=str(time_zone))
