"""Oracle as the core sees it: flashback snapshots at an SCN, the redo log through
LogMiner."""

from __future__ import annotations

from connectors.base import Lazy, ProductDescription

ORACLE = ProductDescription(
    name="oracle",
    schemes=("oracle",),
    connector=Lazy("connectors.oracle.connector:OracleConnector"),
    log_source=Lazy("connectors.oracle.log_source:open_source"),
    log_parameters=Lazy("connectors.oracle.source_config:is_log_parameter"),
)
