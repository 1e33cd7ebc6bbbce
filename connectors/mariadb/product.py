"""MariaDB and MySQL as the core sees them: snapshots, the binlog, its status, and the
server's own replication."""

from __future__ import annotations

from connectors.base import Lazy, ProductDescription
from connectors.model import RepairDialect

MARIADB = ProductDescription(
    name="mariadb",
    schemes=("mysql", "mariadb"),
    connector=Lazy("connectors.mariadb.connector:MariaDBConnector"),
    repair=RepairDialect(
        utc_session="SET time_zone = '+00:00'",
        lock_wait=lambda seconds: f"SET SESSION innodb_lock_wait_timeout = {max(1, int(seconds))}",
        doubled_backticks=True,
        # https://mariadb.com/kb/en/sql-mode/#no_backslash_escapes
        standard_strings=(
            "SET SESSION sql_mode = CONCAT(@@SESSION.sql_mode, ',NO_BACKSLASH_ESCAPES')"
        ),
    ),
    log_source=Lazy("connectors.mariadb.log_source:open_log_source"),
    log_parameters=Lazy("connectors.mariadb.url_parameters:is_log_parameter"),
    quiet_log=Lazy("connectors.mariadb.quiet_log:open_quiet_log"),
    log_status=Lazy("connectors.mariadb.log_status:read_log_status"),
    replica_check=Lazy("connectors.mariadb.replica:is_replica"),
    jdbc_driver=Lazy("connectors.mariadb.jdbc:DRIVER"),
    engine_arguments=Lazy("connectors.mariadb.tls:sqlalchemy_arguments"),
)
