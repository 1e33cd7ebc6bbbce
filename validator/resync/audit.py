"""The audit record of every re-sync: who repaired what, when, at which positions.

One record per comparison and run, appended to a Delta table ``<lake>/_replcheck/
resync_audit`` when the config has a lake (it stays with the data it describes), else
one JSON line per record in ``resync-audit.jsonl`` in the output directory. Records carry
keys (masked parts for sensitive key columns) and column names, never row values.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from cdc_core.files import open_for_append
from cdc_core.lake_location import LakeLocation, as_location
from validator.config import ValidatorConfig
from validator.result import Key

if TYPE_CHECKING:
    import pyarrow as pa

LAKE_AUDIT = ("_replcheck", "resync_audit")
JSONL_NAME = "resync-audit.jsonl"


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """One comparison's re-sync, as the audit keeps it.

    Attributes:
        run_id: Shared by the records of one run.
        at: When the repair ran (UTC).
        user: The OS user who ran it.
        comparison: The comparison.
        target: The target, for display (no secrets).
        mode: ``refreshed``, ``applied``, ``dry_run``, ``nothing`` or ``failed``.
        forced: ``--force`` overrode a safety limit.
        keys: The keys repaired (display text, sensitive parts masked).
        actions: Repairs per kind.
        source_position: The source position the rows were read at.
        result_finished: When the validation that found the differences finished.
        error: Why it failed, if it did.
    """

    run_id: str
    at: dt.datetime
    user: str
    comparison: str
    target: str
    mode: str
    forced: bool
    keys: tuple[Key, ...]
    actions: dict[str, int]
    source_position: str | None
    result_finished: str
    error: str | None = None

    @property
    def keys_count(self) -> int:
        """How many keys the record names."""
        return len(self.keys)

    def to_json(self) -> dict[str, object]:
        """The record as a JSON object."""
        data = asdict(self)
        data["at"] = self.at.isoformat()
        data["keys"] = [list(key) for key in self.keys]
        data["keys_count"] = self.keys_count
        return data


class AuditStore(Protocol):
    """Where audit records go."""

    def append(self, records: Sequence[AuditRecord]) -> None:
        """Add records (one commit or one write)."""
        ...


@dataclass(frozen=True, slots=True)
class JsonLinesAudit:
    """Audit records as JSON lines in a local file."""

    path: Path

    def append(self, records: Sequence[AuditRecord]) -> None:
        """Append one line per record."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lines = "".join(json.dumps(r.to_json(), ensure_ascii=False) + "\n" for r in records)
        with os.fdopen(open_for_append(self.path), "a", encoding="utf-8") as file:
            file.write(lines)


@dataclass(frozen=True, slots=True)
class DeltaAudit:
    """Audit records in a Delta table, one row per record (concurrent appends are safe);
    ``path`` is its folder, or its place in an object store."""

    path: Path | LakeLocation

    def append(self, records: Sequence[AuditRecord]) -> None:
        """Append the records in one commit."""
        if not records:
            return
        where = as_location(self.path)
        if where.is_local:
            where.local_path.mkdir(parents=True, exist_ok=True)
        where.write_delta(_to_arrow(records), mode="append")


def _arrow_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("run_id", pa.string(), nullable=False),
            pa.field("at", pa.timestamp("us", tz="UTC"), nullable=False),
            pa.field("user", pa.string(), nullable=False),
            pa.field("comparison", pa.string(), nullable=False),
            pa.field("target", pa.string()),
            pa.field("mode", pa.string(), nullable=False),
            pa.field("forced", pa.bool_()),
            pa.field("keys_count", pa.int64()),
            pa.field("keys", pa.list_(pa.list_(pa.string()))),
            pa.field("actions", pa.map_(pa.string(), pa.int64())),
            pa.field("source_position", pa.string()),
            pa.field("result_finished", pa.string()),
            pa.field("error", pa.string()),
        ]
    )


def _to_arrow(records: Sequence[AuditRecord]) -> pa.Table:
    import pyarrow as pa

    rows = []
    for record in records:
        row = record.to_json()
        row["at"] = record.at
        row["actions"] = list(record.actions.items())
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=_arrow_schema())


def audit_store(config: ValidatorConfig, out_dir: Path) -> AuditStore:
    """The audit store of a run: the config's lake unless ``resync.audit`` says ``file``."""
    lake = next((c.lake for c in config.connections.values() if c.lake is not None), None)
    if lake is not None and config.resync.audit != "file":
        where = as_location(lake).join(*LAKE_AUDIT)
        return DeltaAudit(where.place())
    return JsonLinesAudit(out_dir / JSONL_NAME)


def read_audit(store: AuditStore) -> list[dict[str, object]]:
    """Every record of a store, oldest first (for reviews and tests)."""
    if isinstance(store, JsonLinesAudit):
        if not store.path.exists():
            return []
        lines = store.path.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines if line.strip()]
    assert isinstance(store, DeltaAudit)
    where = as_location(store.path)
    if not where.join("_delta_log").is_dir():
        return []
    rows = where.open_delta().to_pyarrow_table().to_pylist()
    return sorted(rows, key=lambda row: row["at"])
