"""``replcheck hana log-position``: can a log-based reader still resume at a HANA position?

Reads the log segments and the backup catalog of the config's HANA connection
(``connectors.hana.log_retention``) and answers in one line: online (which segment),
archived (which log backup), or gone (the oldest position left, and the fix).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from cdc_core.config import SECTIONS, load_root, read_connections
from cdc_core.errors import ConfigError
from connectors.hana.connector import HanaConnector
from connectors.hana.log_retention import (
    Archived,
    Gone,
    LogLocation,
    Online,
    locate,
    read_retention,
)
from connectors.registry import scheme_of


def locate_position(
    config_path: Path,
    connection: str,
    position: int,
    *,
    volume: int,
    partition: int = 0,
) -> LogLocation:
    """Where the named HANA connection's log volume keeps ``position``.

    Raises:
        ConfigError: The connection is unknown or not a HANA database.
        TerminalError: The views cannot be read, or the volume has no log.
    """
    retention = read_retention(hana_connector(config_path, connection))
    return locate(
        position, retention.segments, retention.backups, volume=volume, partition=partition
    )


def hana_connector(
    config_path: Path, name: str, environ: Mapping[str, str] | None = None
) -> HanaConnector:
    """The connector of the config's connection ``name``, which must be a HANA database."""
    environ = os.environ if environ is None else environ
    root = load_root(config_path, None, environ, SECTIONS, ("connections",))
    connections = read_connections(root, environ)
    if name not in connections:
        known = ", ".join(sorted(connections))
        raise ConfigError(f"no connection named {name!r} in {config_path}; known: {known}")
    connection = connections[name]
    if connection.url is None or scheme_of(connection.url) not in HanaConnector.schemes:
        raise ConfigError(f"connection {name} is not a HANA database: {connection.display()}")
    password = connection.password.reveal() if connection.password else None
    return HanaConnector(connection.url, password)


def describe_location(location: LogLocation, volume: int) -> str:
    """The one-line answer for people."""
    where = f"position {location.position} of HANA log volume {volume}"
    if isinstance(location, Online):
        segment = location.segment
        return f"{where} is online: log segment {segment.segment_id} ({segment.state})"
    if isinstance(location, Archived):
        backup = location.backup
        when = backup.backed_up_at.strftime("%Y-%m-%d %H:%M:%S UTC")
        return f"{where} is archived: log backup {backup.backup_id} of {when}, {backup.path}"
    return f"{where} is gone: {_what_is_left(location)}; {location.fix}"


def _what_is_left(gone: Gone) -> str:
    oldest = gone.oldest_available
    if oldest is None:
        return "no segment or log backup of the volume holds any position"
    if oldest > gone.position:
        return f"the oldest position still available is {oldest}"
    return f"the log has a gap there (a log backup is missing); the oldest position is {oldest}"
