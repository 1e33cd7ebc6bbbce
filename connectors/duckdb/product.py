"""DuckDB as the core sees it: files read and repaired, no log, no trigger capture."""

from __future__ import annotations

from connectors.base import Lazy, ProductDescription
from connectors.model import RepairDialect

DUCKDB = ProductDescription(
    name="duckdb",
    schemes=("duckdb",),
    connector=Lazy("connectors.duckdb.connector:DuckDBConnector"),
    repair=RepairDialect(locks_rows=False),  # one writer: the write transaction serialises
)
