"""SAP HANA as the core sees it: replcheck reads no HANA log, so its changes are captured
by triggers (as SAP's own replication does) without ``capture=trigger``."""

from __future__ import annotations

from connectors.base import Lazy, ProductDescription

HANA = ProductDescription(
    name="hana",
    schemes=("hana",),
    connector=Lazy("connectors.hana.connector:HanaConnector"),
    capture_dialect=Lazy("connectors.hana.trigger_dialect:capture_dialect"),
)
