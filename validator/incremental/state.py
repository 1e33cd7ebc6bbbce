"""The stored validation state of one comparison: both sides' leaf digests at P0.

Kept in the lake, beside the pipeline's own bookkeeping, one JSON file per comparison::

    <lake>/_replcheck/validation/<schema>/<table>/<comparison>.json

written atomically (a temporary file renamed over the old one), so a reader sees the old
state or the new one, never half of one. A file that cannot be read as a state raises
``CorruptState`` naming it; the caller makes a full run, which replaces it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cdc_core.errors import ContractError
from cdc_core.lake import LakeTable
from cdc_core.names import parse_table, to_lake_dir
from connectors.pushdown import RangeLeaves
from merkle.tree import LeafDigest
from validator.incremental.stored_digests import StoredDigests

FORMAT = "replcheck.validation-state"
FORMAT_VERSION = 2  # 1 listed the digests as JSON numbers: too slow past 100,000 leaves

Digests = Mapping[int, LeafDigest]


class CorruptState(Exception):
    """A state file that is not a readable state (its path and the problem)."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


@dataclass(frozen=True, slots=True)
class LogMark:
    """A Delta table's identity and version when a run started reading it."""

    table_id: str
    version: int


@dataclass(frozen=True, slots=True)
class ValidationState:
    """Both sides' digests of one validated run, and what they hold for.

    Attributes:
        fingerprint: ``fingerprint.fingerprint_parts`` of the run.
        scheme: The leaves the digests are of.
        low, high: The lowest and highest position the run's source slices read at (P0).
        position_text: P0 as results show it.
        changelog, mirror: The lake table's Delta logs when the run started reading.
        sweep_cursor: The first leaf the next run sweeps.
        source, lake: Each side's non-empty leaves' digests.
    """

    fingerprint: Mapping[str, str]
    scheme: RangeLeaves
    low: int
    high: int
    position_text: str
    changelog: LogMark
    mirror: LogMark | None
    sweep_cursor: int
    source: StoredDigests
    lake: StoredDigests

    def __post_init__(self) -> None:
        if self.low > self.high or not 0 <= self.sweep_cursor < max(1, self.scheme.count):
            raise ValueError("positions out of order or sweep cursor beyond the leaves")

    def differing_leaves(self) -> set[int]:
        """Leaves whose digests differed at P0: always re-hashed, never reused."""
        return self.source.differing(self.lake)


def state_path(table: LakeTable, comparison: str) -> Path:
    """Where the state of ``comparison`` on the lake table ``table`` lives."""
    parts = [to_lake_dir(part) for part in parse_table(table.table).parts]
    name = f"{to_lake_dir(comparison)}.json"
    return table.lake.joinpath("_replcheck", "validation", *parts, name)


def _mark_to(mark: LogMark | None) -> dict[str, Any] | None:
    return None if mark is None else {"table_id": mark.table_id, "version": mark.version}


def _mark_from(document: Any) -> LogMark | None:
    if document is None:
        return None
    return LogMark(str(document["table_id"]), int(document["version"]))


def to_document(state: ValidationState) -> dict[str, Any]:
    """The JSON form of a state."""
    scheme = state.scheme
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "fingerprint": dict(state.fingerprint),
        "leaves": {"low": scheme.low, "width": scheme.width, "depth": scheme.depth},
        "position": {"low": state.low, "high": state.high, "text": state.position_text},
        "changelog": _mark_to(state.changelog),
        "mirror": _mark_to(state.mirror),
        "sweep_cursor": state.sweep_cursor,
        "source": state.source.to_document(),
        "lake": state.lake.to_document(),
    }


def from_document(document: Mapping[str, Any]) -> ValidationState:
    """The inverse of ``to_document`` (KeyError, TypeError, ValueError on a bad document)."""
    if document.get("format") != FORMAT or document.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"not a {FORMAT} document of version {FORMAT_VERSION}")
    leaves, position = document["leaves"], document["position"]
    changelog = _mark_from(document["changelog"])
    if changelog is None:
        raise ValueError("no changelog mark")
    return ValidationState(
        fingerprint={str(k): str(v) for k, v in dict(document["fingerprint"]).items()},
        scheme=RangeLeaves(int(leaves["low"]), int(leaves["width"]), int(leaves["depth"])),
        low=int(position["low"]),
        high=int(position["high"]),
        position_text=str(position["text"]),
        changelog=changelog,
        mirror=_mark_from(document["mirror"]),
        sweep_cursor=int(document["sweep_cursor"]),
        source=StoredDigests.from_document(document["source"]),
        lake=StoredDigests.from_document(document["lake"]),
    )


def read_state(path: Path) -> ValidationState | None:
    """The state stored at ``path`` (None: there is none).

    Raises:
        CorruptState: the file exists but is not a state this version reads.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise CorruptState(path, f"cannot be read ({exc})") from exc
    try:
        return from_document(json.loads(text))
    except (ValueError, KeyError, TypeError, AttributeError, ContractError) as exc:
        problem = f"is not a validation state ({type(exc).__name__}: {exc})"
        raise CorruptState(path, problem) from exc


def write_state(path: Path, state: ValidationState) -> None:
    """Store ``state`` at ``path`` atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps(to_document(state), separators=(",", ":")), encoding="utf-8")
    os.replace(temporary, path)
