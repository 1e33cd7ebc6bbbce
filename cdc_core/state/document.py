"""Versioned, checksummed documents of the state directory, and reading the pickled past.

A state document is one JSON object (UTF-8)::

    {"format": "<kind>", "version": <int>, "checksum": "sha256:<hex>", "body": {...}}

The checksum is SHA-256 of the body as ``json.dumps(body, sort_keys=True,
separators=(",", ":"))`` writes it, so a flipped byte, a truncated file or a hand edit
that forgot the checksum is refused before any field is read. JSON builds only dicts,
lists, strings, numbers, booleans and nulls: reading a document runs no code. Row values
inside a body use ``cdc_core.state.value_codec``'s tagged form.

Releases before format version 2 pickled the checkpoint and the buffer state.
``load_legacy_pickle`` reads such a file once, for the migration, with an unpickler that
resolves only the project's own state classes and the standard library's value types
(``LEGACY_CLASSES``); any other name the pickle asks for, such as ``os.system``, is refused
with ``ForbiddenPickleError`` naming it, before anything is called.
"""

from __future__ import annotations

import hashlib
import io
import json
import pickle
import zoneinfo
from pathlib import Path
from typing import Any

from cdc_core.errors import TerminalError

# What a pickled checkpoint, buffer state, spill record or row image of version 1 can hold:
# each class by the name the pickle gives it, and the module that holds it today.
LEGACY_CLASSES: dict[tuple[str, str], str] = {
    ("cdc_core.checkpoint", "Checkpoint"): "cdc_core.pipeline.checkpoint",
    ("cdc_core.buffer", "BufferState"): "cdc_core.buffer.buffer_state",
    ("cdc_core.buffer", "TransactionState"): "cdc_core.buffer.buffer_state",
    ("cdc_core.spill", "SegmentRef"): "cdc_core.buffer.spill",
    ("cdc_core.position", "Position"): "cdc_core.capture.position",
    ("cdc_core.table_refresh", "RefreshState"): "cdc_core.ddl.table_refresh",
    ("cdc_core.events", "ABSENT"): "cdc_core.capture.events",
    ("cdc_core.events", "UNAVAILABLE"): "cdc_core.capture.events",
    ("merkle.canonical", "Interval"): "cdc_core.capture.events",
    ("cdc_core.events", "Interval"): "cdc_core.capture.events",
    ("datetime", "date"): "datetime",
    ("datetime", "datetime"): "datetime",
    ("datetime", "time"): "datetime",
    ("datetime", "timedelta"): "datetime",
    ("datetime", "timezone"): "datetime",
    ("decimal", "Decimal"): "decimal",
    ("uuid", "UUID"): "uuid",
    ("uuid", "SafeUUID"): "uuid",
    ("zoneinfo", "ZoneInfo"): "zoneinfo",
    ("builtins", "getattr"): "builtins",  # resolved to _zone_getattr: ZoneInfo._unpickle only
    ("builtins", "bytearray"): "builtins",
    ("builtins", "set"): "builtins",
    ("builtins", "frozenset"): "builtins",
}
# The same classes by today's names (a pickle made by this code, as the tests make them).
_TODAY = {(module, name): module for (_, name), module in LEGACY_CLASSES.items()}


class StateFileCorruptError(TerminalError):
    """A state document is corrupt, truncated, or of another kind or version."""


class ForbiddenPickleError(TerminalError):
    """A pickled state file asks for a class the migration does not allow (never loaded)."""


def _checksum(body: object) -> str:
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def to_state_document(kind: str, version: int, body: dict[str, Any]) -> bytes:
    """The bytes of a state document holding ``body`` (JSON types and tagged values only)."""
    document = {"format": kind, "version": version, "checksum": _checksum(body), "body": body}
    return json.dumps(document, sort_keys=True, indent=1).encode("utf-8")


def from_state_document(data: bytes, kind: str, version: int) -> dict[str, Any]:
    """The body of a state document, after checking its kind, version and checksum.

    Raises:
        StateFileCorruptError: With what is wrong; the caller adds the file and the fix.
    """
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise StateFileCorruptError(f"it is not a complete JSON document ({exc})") from exc
    if not isinstance(document, dict) or document.get("format") != kind:
        raise StateFileCorruptError(f"it is not a {kind} document")
    if document.get("version") != version:
        raise StateFileCorruptError(
            f"it has version {document.get('version')!r}; this release reads version {version}"
        )
    body = document.get("body")
    if not isinstance(body, dict) or document.get("checksum") != _checksum(body):
        raise StateFileCorruptError("its checksum does not match its contents")
    return body


def read_json_file(path: Path, fix: str) -> dict[str, Any]:
    """The JSON object a plain state file of the lake or the state directory holds.

    Every such file (a pipeline's progress file, say) is read here, so a truncated or
    edited one is an error naming it and the fix, never a bare ``JSONDecodeError``.

    Args:
        path: The file.
        fix: What the user should do about a corrupt one.

    Raises:
        StateFileCorruptError: The file is not one complete JSON object.
    """
    return read_json_bytes(path.read_bytes(), path, fix)


def read_json_bytes(data: bytes, path: Path | str, fix: str) -> dict[str, Any]:
    """``read_json_file`` of bytes already read (an object store's file at ``path``)."""
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise corrupt_file(path, f"it is not a complete JSON document ({exc})", fix) from exc
    if not isinstance(document, dict):
        raise corrupt_file(path, "it is not a JSON object", fix)
    return document


def corrupt_file(path: Path | str, what: str, fix: str) -> StateFileCorruptError:
    """The error for the state file ``path``: ``what`` is wrong with it, and the ``fix``."""
    return StateFileCorruptError(
        f"the state file {path} is corrupt or truncated ({what}); {fix}", {"path": str(path)}
    )


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        where = LEGACY_CLASSES.get((module, name)) or _TODAY.get((module, name))
        if where is None:
            raise ForbiddenPickleError(
                f"the pickled state asks for {module}.{name}, which no replcheck state holds;"
                " it was not loaded (someone may have planted it)",
                {"class": f"{module}.{name}"},
            )
        if (module, name) == ("builtins", "getattr"):
            return _zone_getattr
        return super().find_class(where, name)


def _zone_getattr(owner: object, name: str) -> object:
    """The one ``getattr`` a pickle of version 1 makes: ``ZoneInfo`` pickles as
    ``getattr(ZoneInfo, "_unpickle")(key, from_cache)``. A general ``getattr`` would reach
    any module's globals through the allowed classes' functions, so nothing else is given.
    """
    if owner is zoneinfo.ZoneInfo and name == "_unpickle":
        return zoneinfo.ZoneInfo._unpickle  # type: ignore[attr-defined]
    raise ForbiddenPickleError(
        f"the pickled state asks for getattr({owner!r}, {name!r}), which no replcheck state"
        " holds; it was not loaded (someone may have planted it)",
        {"class": "builtins.getattr"},
    )


def load_legacy_pickle(payload: bytes) -> object:
    """Unpickle a state file of version 1, resolving only ``LEGACY_CLASSES``.

    Raises:
        ForbiddenPickleError: The pickle names any other class or function.
        StateFileCorruptError: The bytes are not a pickle the allowed classes can build.
    """
    try:
        return _RestrictedUnpickler(io.BytesIO(payload)).load()
    except ForbiddenPickleError:
        raise
    except Exception as exc:
        raise StateFileCorruptError(f"it is not a readable version-1 pickle ({exc})") from exc
