"""PostgreSQL as a CDC log source: what ``replcheck cdc run`` builds from a pipeline's URL.

Served under the ``postgresql`` URL scheme (``connectors/postgres/product.py``). A pipeline's
source URL is the validator's, ``postgresql+psycopg://repl@127.0.0.1:5432/shop`` (the
password comes from the connection's ``password: {env: ...}``). Its query may set:

=====================  ====================================================  ==============
parameter              meaning                                               default
=====================  ====================================================  ==============
``slot``               the pipeline's logical replication slot               ``replcheck``
``publication``        the publication of the captured tables                ``replcheck``
``create_slot``        create the slot if missing (``false``: an error)      ``true``
``create_publication`` create the publication if missing                     ``true``
``record_rewrites``    install the event triggers that put DDL the catalog      ``true``
                       cannot show into the log (``rewrites.py``; superuser)
``idle_s``             how often a quiet stream reports its position, in s   ``0.5``
``decoding_work_mem``  the walsender's ``logical_decoding_work_mem``: larger  the server's
                       transactions are streamed while in progress
``key.<table>``        the columns locating rows of a table without a        none
                       primary key or replica identity index, comma-separated
=====================  ====================================================  ==============

Other query parameters are libpq's (``sslmode``, ``options``...) and stay in the URL.
Tables are ``schema.table`` (a bare name is in ``public``); glob patterns (``shop.*``) are
resolved against the database's tables when the pipeline starts. A partition whose
partitioned ancestor is captured too is captured through it, not on its own
(``partitions.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from fnmatch import fnmatchcase
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from cdc_core.config import Secret
from cdc_core.errors import ConfigError
from cdc_core.names import is_glob
from connectors.model import LogSource
from connectors.postgres.connector import PostgresConnector, qualified_name
from connectors.postgres.errors import lost_connections
from connectors.postgres.log_reader import PostgresLogReader
from connectors.postgres.partitions import (
    leave_out_partitions,
    listing_without_partitions,
    partition_ancestors,
)
from connectors.postgres.replication import connector_of
from connectors.postgres.snapshot import PostgresSnapshotReader
from connectors.postgres.source_config import PostgresSourceConfig
from connectors.postgres.url_parameters import (
    FLAGS,
    KEY_PREFIX,
    SECONDS,
    TEXT,
)


def source_config(url: str, password: str | None, tables: Sequence[str]) -> PostgresSourceConfig:
    """The source config of a pipeline URL with its query parameters (see the module doc).

    Raises:
        ConfigError: A parameter with a value of the wrong kind.
    """
    parts = urlsplit(url)
    libpq: list[tuple[str, str]] = []
    values: dict[str, Any] = {}
    keys: dict[str, tuple[str, ...]] = {}
    for name, value in parse_qsl(parts.query, keep_blank_values=True):
        if name.startswith(KEY_PREFIX) and name != KEY_PREFIX:
            keys[name[len(KEY_PREFIX) :]] = tuple(c.strip() for c in value.split(",") if c.strip())
        elif name in TEXT:
            values[name] = value
        elif name in FLAGS:
            values[name] = _flag(name, value)
        elif name in SECONDS:
            values[name] = _seconds(name, value)
        else:
            libpq.append((name, value))
    config = PostgresSourceConfig(
        urlunsplit(parts._replace(query=urlencode(libpq))),
        tuple(tables),
        Secret(password) if password is not None else None,
    )
    return replace(config, keys=keys, **values)


def _flag(name: str, value: str) -> bool:
    if value.lower() not in ("true", "false", "1", "0"):
        raise ConfigError(f"Postgres source URL parameter {name}={value!r} must be true or false")
    return value.lower() in ("true", "1")


def _seconds(name: str, value: str) -> float:
    try:
        return float(value)
    except ValueError as exc:
        raise ConfigError(
            f"Postgres source URL parameter {name}={value!r} is not a number"
        ) from exc


def resolve_tables(patterns: Sequence[str], existing: Callable[[], list[str]]) -> list[str]:
    """Plain names qualified (``public`` by default); globs matched against the existing
    tables (``schema.table``); no patterns (the ``accept`` policy) means every table."""
    if patterns and not any(is_glob(p) for p in patterns):
        return [qualified_name(pattern) for pattern in patterns]
    tables = existing()
    if not patterns:
        return tables
    resolved: list[str] = []
    for pattern in map(qualified_name, patterns):
        if is_glob(pattern) and pattern not in tables:  # a table may be named a[1]
            resolved += [table for table in tables if fnmatchcase(table, pattern)]
        else:
            resolved.append(pattern)
    return list(dict.fromkeys(resolved))


def open_source(url: str, password: str | None, tables: Sequence[str]) -> LogSource:
    """The slot reader and exported-snapshot reader of ``tables`` of a ``postgresql`` URL.

    Raises:
        ConfigError: A bad URL parameter, or no table matches the patterns.
    """
    probe = source_config(url, password, ("probe",))  # the URL's settings, before any table
    connector = connector_of(probe)

    captured = resolve_tables(tables, connector.table_names)
    if not captured:
        raise ConfigError(f"no table of {connector.where} matches {list(tables)}")
    if len(captured) > 1:  # a partition and an ancestor of it are both captured, or none
        named = {qualified_name(table) for table in tables}  # patterns and plain names
        captured = leave_out_partitions(captured, _ancestors(connector), named)
    config = replace(probe, tables=tuple(captured))
    reader, snapshots = PostgresLogReader(config), PostgresSnapshotReader(config)
    listing = listing_without_partitions(
        connector.table_names, lambda: _ancestors(connector), captured
    )
    return LogSource(reader, snapshots, listing, tuple(captured))


def _ancestors(connector: PostgresConnector) -> dict[str, list[str]]:
    """Every partition of the source with its ancestors (``partitions.py``)."""
    with lost_connections(connector.where), connector.connect() as connection:
        return partition_ancestors(connection)
