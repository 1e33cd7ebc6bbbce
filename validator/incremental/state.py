"""The stored validation state of one comparison: both sides' leaf digests at P0.

Kept in the lake, beside the pipeline's own bookkeeping, one Arrow IPC file per comparison::

    <lake>/_replcheck/validation/<schema>/<table>/<comparison>.arrow

(an object-store lake's too: ``<lake>`` is then its URL, and the file one object).

Its columns are both sides' dense digests (``stored_digests``: row ``i`` is leaf ``i``), read
and written without a Python object per leaf; the schema's metadata holds the rest as JSON,
with a CRC-32 of the columns. Written atomically (a temporary file renamed over the old
one; on an object store one PUT), so a reader sees the old state or the new one, never half
of one. A file that cannot
be read as a state raises ``CorruptState`` naming it; the caller makes a full run, which
replaces it. A state of an older format (``<comparison>.json``) is never read: the run it
makes full says so, and storing the new state removes it.
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from cdc_core.errors import ContractError
from cdc_core.lake.layout import LakeTable
from cdc_core.lake_location import LakeLocation
from cdc_core.names import parse_table, to_lake_dir
from connectors.pushdown import RangeLeaves
from merkle.tree import LeafDigest
from validator.incremental.stored_digests import COUNT, SUM, StoredDigests

FORMAT = "replcheck.validation-state"
# 1 and 2 were JSON files listing the digests: too slow to read and write past 100,000 leaves;
# 3 held a contiguous sweep's cursor (a leaf), not the striped sweep's (an offset in a stripe)
FORMAT_VERSION = 4
METADATA = FORMAT.encode()  # the schema metadata key of the JSON head
SIDES = ("source", "lake")

Digests = Mapping[int, LeafDigest]
# A state's place: a file of a lake on local disk, or an object of one on an object store.
StatePath = Path | LakeLocation


class CorruptState(Exception):
    """A state file that is not a readable state (its path and the problem)."""

    def __init__(self, path: StatePath, problem: str) -> None:
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


def state_path(table: LakeTable, comparison: str) -> StatePath:
    """Where the state of ``comparison`` on the lake table ``table`` lives."""
    parts = [to_lake_dir(part) for part in parse_table(table.table).parts]
    name = f"{to_lake_dir(comparison)}.arrow"
    where = table.location.join("_replcheck", "validation", *parts, name)
    return where.place()


def legacy_path(path: Path) -> Path:
    """Where a state of format 1 or 2 beside ``path`` lives (never read)."""
    return path.with_suffix(".json")


def legacy_state(path: StatePath) -> Path | None:
    """The state of format 1 or 2 beside ``path``, if there is one (an object-store lake
    never had one: those formats predate them)."""
    if isinstance(path, LakeLocation):
        return None
    legacy = legacy_path(path)
    return legacy if legacy.exists() else None


def _mark_to(mark: LogMark | None) -> dict[str, Any] | None:
    return None if mark is None else {"table_id": mark.table_id, "version": mark.version}


def _mark_from(document: Any) -> LogMark | None:
    if document is None:
        return None
    return LogMark(str(document["table_id"]), int(document["version"]))


def _columns(state: ValidationState) -> dict[str, pa.Array]:
    sides = (state.source, state.lake)
    return {
        f"{side}_{name}": getattr(digests, name)
        for side, digests in zip(SIDES, sides, strict=True)
        for name in (COUNT, SUM)
    }


def _crc(columns: Mapping[str, pa.Array]) -> int:
    """CRC-32 of the columns' values (8 bytes each, no nulls), from their offsets."""
    crc = 0
    for column in columns.values():
        start = column.offset * 8
        crc = zlib.crc32(memoryview(column.buffers()[1])[start : start + len(column) * 8], crc)
    return crc


def to_head(state: ValidationState, crc: int) -> dict[str, Any]:
    """The JSON head of a state (all but the digests' columns, whose CRC-32 it holds)."""
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
        "crc32": crc,
    }


def from_head(head: Mapping[str, Any], table: pa.Table) -> ValidationState:
    """The inverse of ``to_head`` and the columns (KeyError, TypeError, ValueError on a bad
    head or columns)."""
    if head.get("format") != FORMAT:
        raise ValueError(f"not a {FORMAT} document")
    if head.get("format_version") != FORMAT_VERSION:
        raise OtherVersion(
            f"is of format version {head.get('format_version')}, not {FORMAT_VERSION} (written"
            " by another version of replcheck)"
        )
    leaves, position = head["leaves"], head["position"]
    changelog = _mark_from(head["changelog"])
    if changelog is None:
        raise ValueError("no changelog mark")
    scheme = RangeLeaves(int(leaves["low"]), int(leaves["width"]), int(leaves["depth"]))
    columns = {name: _one_array(table[name]) for name in table.column_names}
    if _crc(columns) != head["crc32"]:
        raise ValueError("the digests do not match their CRC-32")
    source, lake = (
        StoredDigests(columns[f"{side}_{COUNT}"], columns[f"{side}_{SUM}"]) for side in SIDES
    )
    if len(source) != scheme.count:
        raise ValueError(f"digests of {len(source)} leaves, not {scheme.count}")
    return ValidationState(
        fingerprint={str(k): str(v) for k, v in dict(head["fingerprint"]).items()},
        scheme=scheme,
        low=int(position["low"]),
        high=int(position["high"]),
        position_text=str(position["text"]),
        changelog=changelog,
        mirror=_mark_from(head["mirror"]),
        sweep_cursor=int(head["sweep_cursor"]),
        source=source,
        lake=lake,
    )


def _one_array(column: pa.ChunkedArray) -> pa.Array:
    """The column as one array: its only chunk as it is (a state's columns are written as
    one), so a mapped file's digests are never copied."""
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


class OtherVersion(ValueError):
    """A state document of another format version."""


def read_state(path: StatePath) -> ValidationState | None:
    """The state stored at ``path`` (None: there is none).

    Raises:
        CorruptState: the file exists but is not a state this version reads.
        StoreError: an object store failed the read (``cdc_core.lake_location``).
    """
    try:
        table = _read_table(path)
    except FileNotFoundError:
        return None
    except pa.ArrowInvalid as exc:
        raise CorruptState(path, f"is not a validation state ({exc})") from exc
    except OSError as exc:
        raise CorruptState(path, f"cannot be read ({exc})") from exc
    try:
        head = json.loads((table.schema.metadata or {})[METADATA])
        return from_head(head, table)
    except OtherVersion as exc:
        raise CorruptState(path, str(exc)) from exc
    except (ValueError, KeyError, TypeError, AttributeError, ContractError) as exc:
        problem = f"is not a validation state ({type(exc).__name__}: {exc})"
        raise CorruptState(path, problem) from exc


def _read_table(path: StatePath) -> pa.Table:
    if isinstance(path, LakeLocation):
        data = path.read_bytes()
        if data is None:
            raise FileNotFoundError(path.display())
        return pa.ipc.open_file(pa.py_buffer(data)).read_all()
    # Mapped, not read: reading and copying a million leaves' digests took 0.15 s.
    return pa.ipc.open_file(pa.memory_map(str(path))).read_all()


def write_state(path: StatePath, state: ValidationState) -> None:
    """Store ``state`` at ``path`` atomically (and remove a state of an older format)."""
    columns = _columns(state)
    head = json.dumps(to_head(state, _crc(columns)), separators=(",", ":"))
    table = pa.table(columns).replace_schema_metadata({METADATA: head.encode()})
    if isinstance(path, LakeLocation):  # one PUT: readers see the old object or the new one
        sink = pa.BufferOutputStream()
        with pa.ipc.new_file(sink, table.schema) as out:
            out.write_table(table)
        path.write_bytes(sink.getvalue().to_pybytes())
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp")
    with pa.OSFile(str(temporary), "wb") as file, pa.ipc.new_file(file, table.schema) as out:
        out.write_table(table)
    os.replace(temporary, path)
    legacy_path(path).unlink(missing_ok=True)
