"""Re-sync requests: keys a re-sync repaired in the lake, for its pipeline to read again.

A re-sync (``validator.resync.lake``) writes the differing rows into the lake itself, as
``r`` and ``d`` events at the source position Ps it read them at. The pipeline's row image
store, which completes later partial changes (MINIMAL row images, key changes, unchanged
TOAST values), knows nothing of them: a later update of a repaired row would bring the old
values back. So the re-sync also leaves a request in the lake,
``<lake>/_replcheck/resync_requests/<request>.json``: the table, Ps and the keys (on an
object-store lake one object, written in one PUT).

The pipeline that captures the table takes the request at its start and every
``POLL_S`` while it runs (``STORE_POLL_S`` on an object store: each look is a LIST
request), and reads those keys again through its own table refresh
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
from cdc_core.lake_location import LakeLocation, as_location
from cdc_core.state.document import corrupt_file, read_json_bytes, read_json_file
from cdc_core.state.value_codec import from_tagged, to_tagged

POLL_S = 1.0  # how often a running pipeline looks for requests
STORE_POLL_S = 30.0  # the same, on an object-store lake (a LIST request costs money)
_FIX = "delete it and run `replcheck resync --apply` again: the re-sync writes the request anew"


@dataclass(frozen=True, slots=True)
class ResyncRequest:
    """Keys of one table a re-sync repaired at one source position.

    Args:
        table: The table, as the lake and the pipeline name it (``schema.table``).
        position: Where the re-sync read the source (Ps).
        keys: Each key as ``{column: value}``, in the lake's column names.
        request_id: The re-sync's request, for the log.
        path: The file (object) the request was read from (None before it is written).
    """

    table: str
    position: Position
    keys: tuple[Mapping[str, object], ...]
    request_id: str
    path: Path | LakeLocation | None = None

    def key_tuples(self, key: Sequence[str]) -> list[tuple[object, ...]] | None:
        """The keys as tuples in ``key``'s order; None if a key lacks one of its columns
        (the table's key changed since the re-sync)."""
        if any(set(found) != set(key) for found in self.keys):
            return None
        return [tuple(found[column] for column in key) for found in self.keys]


def requests_dir(lake: Path | LakeLocation) -> LakeLocation:
    """Where re-syncs leave their requests."""
    return as_location(lake).join("_replcheck", "resync_requests")


def poll_every(lake: Path | LakeLocation) -> float:
    """How often a running pipeline looks for requests in ``lake``, in seconds."""
    return POLL_S if as_location(lake).is_local else STORE_POLL_S


def write_request(lake: Path | LakeLocation, request: ResyncRequest) -> Path | LakeLocation:
    """Leave ``request`` for the pipeline, atomically (a reader never sees half a file)."""
    directory = requests_dir(lake)
    document = {
        "table": request.table,
        "position": request.position.to_dict(),
        "keys": [to_tagged(dict(key)) for key in request.keys],
        "request_id": request.request_id,
    }
    name = f"{_file_name(request)}.json"
    if not directory.is_local:  # one PUT: a reader sees the whole object or none
        directory.join(name).write_bytes(_dumps(document).encode())
        return directory.join(name)
    folder = directory.local_path
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    temporary = folder / f".{name}.tmp"
    with temporary.open("w", encoding="utf-8") as output:
        output.write(_dumps(document))
        output.flush()
        os.fsync(output.fileno())
    os.replace(temporary, path)
    return path


def read_requests(lake: Path | LakeLocation, tables: Collection[str]) -> list[ResyncRequest]:
    """The requests waiting for ``tables``, oldest first (others are another pipeline's)."""
    directory = requests_dir(lake)
    requests = []
    for name in directory.list_names(".json"):
        where = directory.join(name)
        if where.is_local:
            requests.append(_read(read_json_file(where.local_path, _FIX), where.local_path))
            continue
        data = where.read_bytes()
        if data is not None:  # gone since listed: its pipeline took it
            requests.append(_read(read_json_bytes(data, where.display(), _FIX), where))
    return [request for request in requests if request.table in tables]


def remove(request: ResyncRequest) -> None:
    """The request is done (its refresh is in a checkpoint)."""
    if request.path is not None:
        as_location(request.path).delete()


def _read(document: Mapping[str, Any], path: Path | LakeLocation) -> ResyncRequest:
    try:
        keys = tuple(_columns(from_tagged(key)) for key in document["keys"])
        position = Position.from_dict(document["position"])
        return ResyncRequest(
            str(document["table"]), position, keys, str(document["request_id"]), path
        )
    except (KeyError, TypeError, ValueError, TerminalError) as exc:
        where = path if isinstance(path, Path) else path.display()
        raise corrupt_file(where, f"a field is missing or wrong ({exc!r})", _FIX) from exc


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
