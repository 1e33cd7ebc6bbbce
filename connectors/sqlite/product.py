"""SQLite as the core sees it: files read and repaired; no log replcheck reads, so its
changes are captured by triggers without ``capture=trigger``."""

from __future__ import annotations

from connectors.base import Lazy, ProductDescription
from connectors.model import RepairDialect

SQLITE = ProductDescription(
    name="sqlite",
    schemes=("sqlite",),
    connector=Lazy("connectors.sqlite.connector:SQLiteConnector"),
    repair=RepairDialect(locks_rows=False),  # one writer: the write transaction serialises
    capture_dialect=Lazy("connectors.sqlite.trigger_dialect:capture_dialect"),
)
