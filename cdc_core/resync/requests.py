"""Re-sync requests: keys a re-sync repaired in the lake, for its pipeline to read again.

A re-sync (``validator.resync.lake``) writes the differing rows into the lake itself, as
``r`` and ``d`` events at the source position Ps it read them at. The pipeline's row image
store, which completes later partial changes (MINIMAL row images, key changes, unchanged
TOAST values), knows nothing of them: a later update of a repaired row would bring the old
values back. So the re-sync also leaves a request in the lake,
``<lake>/_replcheck/resync_requests/<request>.json``: the table, Ps and the keys.

The pipeline that captures the table takes the request at its start and every
``POLL_S`` while it runs, and reads those keys again through its own table refresh
(``cdc_core.ddl.table_refresh``, a keyed one): their images, in the store and the lake, come
from the source at a position the stream then passes in order. The table's state is marked
inexact from Ps until that read is written, since changes rebuilt meanwhile used the old
images. A request is removed once a checkpoint holds its refresh; a crash before that takes
it again, which only reads the keys once more.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cdc_core.capture.position import Position
from cdc_core.errors import TerminalError
from cdc_core.lake_location import LakeLocation
from cdc_core.state.document import corrupt_file, read_json_file
from cdc_core.state.value_codec import from_tagged, to_tagged

POLL_S = 1.0  # how often a running pipeline looks for requests
_FIX = "delete it and run `replcheck resync --apply` again: the re-sync writes the request anew"


@dataclass(frozen=True, slots=True)
class ResyncRequest:
    """Keys of one table a re-sync repaired at one source position.

    Args:
        table: The table, as the lake and the pipeline name it (``schema.table``).
        position: Where the re-sync read the source (Ps).
        keys: Each key as ``{column: value}``, in the lake's column names.
        request_id: The re-sync's request, for the log.
        path: The file the request was read from (None before it is written).
    """

    table: str
    position: Position
    keys: tuple[Mapping[str, object], ...]
    request_id: str
    path: Path | None = None

    def key_tuples(self, key: Sequence[str]) -> list[tuple[object, ...]] | None:
        """The keys as tuples in ``key``'s order; None if a key lacks one of its columns
        (the table's key changed since the re-sync)."""
        if any(set(found) != set(key) for found in self.keys):
            return None
        return [tuple(found[column] for column in key) for found in self.keys]


def requests_dir(lake: Path) -> Path:
    """Where re-syncs leave their requests."""
    return lake / "_replcheck" / "resync_requests"


def write_request(lake: Path, request: ResyncRequest) -> Path:
    """Leave ``request`` for the pipeline, atomically (a reader never sees half a file)."""
    directory = requests_dir(lake)
    directory.mkdir(parents=True, exist_ok=True)
    document = {
        "table": request.table,
        "position": request.position.to_dict(),
        "keys": [to_tagged(dict(key)) for key in request.keys],
        "request_id": request.request_id,
    }
    path = directory / f"{_file_name(request)}.json"
    temporary = directory / f".{path.name}.tmp"
    with temporary.open("w", encoding="utf-8") as output:
        output.write(_dumps(document))
        output.flush()
        os.fsync(output.fileno())
    os.replace(temporary, path)
    return path


def read_requests(lake: Path | LakeLocation, tables: Collection[str]) -> list[ResyncRequest]:
    """The requests waiting for ``tables``, oldest first (others are another pipeline's)."""
    if isinstance(lake, LakeLocation):
        return []  # re-syncs do not write into object-store lakes yet (docs/object-storage.md)
    directory = requests_dir(lake)
    if not directory.is_dir():
        return []
    requests = [_read(path) for path in sorted(directory.glob("*.json"))]
    return [request for request in requests if request.table in tables]


def remove(request: ResyncRequest) -> None:
    """The request is done (its refresh is in a checkpoint)."""
    if request.path is not None:
        request.path.unlink(missing_ok=True)


def _read(path: Path) -> ResyncRequest:
    document = read_json_file(path, _FIX)
    try:
        keys = tuple(_columns(from_tagged(key)) for key in document["keys"])
        position = Position.from_dict(document["position"])
        return ResyncRequest(
            str(document["table"]), position, keys, str(document["request_id"]), path
        )
    except (KeyError, TypeError, ValueError, TerminalError) as exc:
        raise corrupt_file(path, f"a field is missing or wrong ({exc!r})", _FIX) from exc


def _columns(key: object) -> dict[str, object]:
    if not isinstance(key, dict) or not all(isinstance(column, str) for column in key):
        raise TypeError("a key is not an object of columns")
    return key


def _file_name(request: ResyncRequest) -> str:
    """Ordered by position, then unique per request and table."""
    import hashlib

    digest = hashlib.sha256(f"{request.request_id}\0{request.table}".encode()).hexdigest()
    return f"{request.position.value:020d}-{digest[:16]}"


def _dumps(document: Mapping[str, Any]) -> str:
    import json

    return json.dumps(document, separators=(",", ":"))
