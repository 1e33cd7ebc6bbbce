"""PostgreSQL as the core sees it: exported snapshots, the WAL through a slot, trigger
capture with ``capture=trigger``, and logical subscribers or standbys as replicas."""

from __future__ import annotations

from connectors.base import Lazy, ProductDescription
from connectors.model import RepairDialect

POSTGRES = ProductDescription(
    name="postgres",
    schemes=("postgresql", "postgres"),
    connector=Lazy("connectors.postgres.connector:PostgresConnector"),
    # Its connector serves only ``postgresql``, the scheme SQLAlchemy knows (1.4 dropped
    # ``postgres``); its log source and trigger capture take both.
    connector_schemes=("postgresql",),
    repair=RepairDialect(
        utc_session="SET TIME ZONE 'UTC'",
        lock_wait=lambda seconds: f"SET LOCAL lock_timeout = '{int(seconds * 1000)}ms'",
        keeps_time_zone=True,  # timestamptz; a plain timestamp column drops it (see repair_sql)
        bytes_literal=lambda value: f"'\\x{value.hex()}'::bytea",  # bytea's hex input format
        # https://www.postgresql.org/docs/current/sql-syntax-lexical.html#SQL-SYNTAX-STRINGS
        standard_strings="SET standard_conforming_strings = on",
    ),
    log_source=Lazy("connectors.postgres.log_source:open_source"),
    log_parameters=Lazy("connectors.postgres.url_parameters:is_log_parameter"),
    quiet_log=Lazy("connectors.postgres.quiet_log:open_quiet_log"),
    log_status=Lazy("connectors.postgres.log_status:read_log_status"),
    capture_dialect=Lazy("connectors.postgres.trigger_dialect:capture_dialect"),
    replica_check=Lazy("connectors.postgres.replica:is_replica"),
    jdbc_driver=Lazy("connectors.postgres.jdbc:DRIVER"),
)
