"""HANA log retention view rows written by hand (``data/log_retention.json``; not captured
from a server), as rows and as values."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from connectors.hana.log_retention import retention_from_rows

DATA = Path(__file__).parent / "data"
RECORDED: dict[str, Any] = json.loads((DATA / "log_retention.json").read_text("utf-8"))
RETENTION = retention_from_rows(RECORDED["M_LOG_SEGMENTS"], RECORDED["log_backups"])
