"""MariaDB/MySQL as a CDC log source: what ``replcheck cdc run`` builds from a pipeline's URL.

Served under the ``mysql`` and ``mariadb`` URL schemes (``connectors/mariadb/product.py``).
A pipeline's source URL is the validator's: ``mysql+pymysql://repl@127.0.0.1:3306/shop``
(the password comes from the connection's ``password: {env: ...}``). Its query may set:

=================  ========================================================  =============
parameter          meaning                                                   default
=================  ========================================================  =============
``server_id``      the replica id the binlog reader registers with; unique   ``24256``
                   among the server's replicas (two pipelines on one server
                   need two ids)
``heartbeat_s``    how often a quiet server reports the log's end, in        ``1.0``
                   seconds (bounds how late an idle pipeline checkpoints)
``key.<table>``    the columns that locate rows of a table without a         none
                   primary key, comma-separated: ``key.events=id,ts``
=================  ========================================================  =============

e.g. ``mysql+pymysql://repl@db:3306/shop?server_id=901&key.audit=id,at``. Unknown
parameters are errors. Tables are ``schema.table`` or a table of the URL's database; glob
patterns (``shop.*``) are resolved against the server's tables when the pipeline starts, so
a table created later is captured after a restart.

On a ``binlog_row_image=MINIMAL`` server an insert omits the columns it did not set, and an
update of a row stored before an ``ALTER TABLE ... ADD COLUMN`` lacks the new column: the
source's ``fetch_missing`` hooks (``connectors/mariadb/missing_columns.py``) complete them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import replace
from fnmatch import fnmatchcase
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from cdc_core.config import Secret, mask_url
from cdc_core.errors import ConfigError
from cdc_core.names import format_table, is_glob, qualify
from connectors.mariadb.log_reader import MariaDBLogReader
from connectors.mariadb.missing_columns import MissingColumns
from connectors.mariadb.position import Epoch
from connectors.mariadb.snapshot import MariaDBSnapshotReader
from connectors.mariadb.source_config import MariaDBSourceConfig
from connectors.mariadb.system_versioning import SYSTEM_VERSIONED
from connectors.mariadb.tls import TLS_PARAMETERS
from connectors.mariadb.url_parameters import LOG_PARAMETERS
from connectors.model import LogSource

# Schemas of the server itself, never captured by a pattern.
SYSTEM_SCHEMAS = ("mysql", "information_schema", "performance_schema", "sys")


def source_config(url: str, password: str | None, tables: Sequence[str]) -> MariaDBSourceConfig:
    """The source config of a pipeline URL with its query parameters (see the module doc).

    Args:
        url: ``mysql+pymysql://user@host:port/database?server_id=...``.
        password: The connection's password, if any.
        tables: The captured tables (names; patterns must be resolved by the caller).

    Raises:
        ConfigError: An unknown parameter or a value of the wrong kind.
    """
    parts = urlsplit(url)
    given = parse_qsl(parts.query, keep_blank_values=True)
    tls = urlencode([(name, value) for name, value in given if name in TLS_PARAMETERS])
    config = MariaDBSourceConfig(
        urlunsplit(parts._replace(query=tls)),  # TLS: every connection's, not the log's only
        tuple(tables),
        Secret(password) if password is not None else None,
    )
    for name, value in given:
        if name in TLS_PARAMETERS:
            continue
        if name.startswith("key.") and len(name) > 4:
            keys = {**config.keys, name[4:]: _key_columns(name, value)}
            config = replace(config, keys=keys)
        elif name == "server_id":
            config = replace(config, server_id=int(_number(name, value, int)))
        elif name == "heartbeat_s":
            config = replace(config, heartbeat_s=_number(name, value, float))
        else:
            raise ConfigError(
                f"MariaDB source URL parameter {name!r} is unknown; known:"
                f" {[*LOG_PARAMETERS, *TLS_PARAMETERS]}",
                {"parameter": name},
            )
    return config


def _key_columns(name: str, value: str) -> tuple[str, ...]:
    columns = tuple(column.strip() for column in value.split(",") if column.strip())
    if not columns:
        raise ConfigError(f"MariaDB source URL parameter {name} must name columns: {name}=a,b")
    return columns


def _number(name: str, value: str, kind: type[int] | type[float]) -> int | float:
    try:
        return kind(value)
    except ValueError as exc:
        raise ConfigError(
            f"MariaDB source URL parameter {name}={value!r} is not a {kind.__name__}",
            {"parameter": name},
        ) from exc


def list_tables(config: MariaDBSourceConfig) -> list[str]:
    """Every table of the URL's database (of every user schema without one): base tables
    and system-versioned ones (their current rows, ``system_versioning``), not views."""
    from connectors.mariadb.connector import MariaDBConnector

    password = config.password.reveal() if config.password is not None else None
    connector = MariaDBConnector(config.url, password, config.endpoint)
    database = connector.database()
    sql = (
        "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES"
        f" WHERE TABLE_TYPE IN ('BASE TABLE', '{SYSTEM_VERSIONED}')"
    )
    if database:
        sql, params = sql + " AND TABLE_SCHEMA = %s", [database]
    else:
        sql += " AND TABLE_SCHEMA NOT IN (" + ", ".join(["%s"] * len(SYSTEM_SCHEMAS)) + ")"
        params = list(SYSTEM_SCHEMAS)
    with contextlib.closing(connector.connect()) as connection, connection.cursor() as cursor:
        cursor.execute(sql + " ORDER BY 1, 2", params)
        return [format_table(schema, name) for schema, name in cursor.fetchall()]


def resolve_tables(patterns: Sequence[str], existing: Sequence[str], database: str) -> list[str]:
    """Plain names qualified as they are; globs matched against ``existing`` tables.

    No patterns (a pipeline with the ``accept`` policy) means every existing table.
    """
    if not patterns:
        return list(existing)
    resolved: list[str] = []
    for pattern in (qualify(pattern, database) for pattern in patterns):
        if is_glob(pattern) and pattern not in existing:  # a table may be named a[1]
            resolved += [table for table in existing if fnmatchcase(table, pattern)]
        else:
            resolved.append(pattern)
    return list(dict.fromkeys(resolved))


def open_log_source(url: str, password: str | None, tables: Sequence[str]) -> LogSource:
    """The ``LogSource`` of a ``mysql``/``mariadb`` URL (``connectors.registry``).

    Raises:
        ConfigError: A bad URL parameter, or no table to capture.
    """
    probe = source_config(url, password, ("probe",))  # the URL's settings, before any table
    database = probe.endpoint.database or ""

    def existing() -> list[str]:
        return list_tables(probe)

    needs_listing = not tables or any(char in "".join(tables) for char in "*?[")
    captured = resolve_tables(tables, existing() if needs_listing else [], database)
    if not captured:
        raise ConfigError(
            f"no table of {mask_url(probe.url)} matches the pipeline's tables {list(tables)};"
            " list existing tables (schema.table) in the pipeline's 'tables'",
            {"source": mask_url(probe.url)},
        )
    config = replace(probe, tables=tuple(captured))  # the URL read once, for the probe
    epoch = Epoch()  # the log reader's positions and the snapshots' are of one server
    reader = MariaDBLogReader(config, epoch)
    snapshots = MariaDBSnapshotReader(config, epoch)
    missing = MissingColumns(snapshots)  # for every table: those created while running too
    return LogSource(reader, snapshots, existing, tuple(captured), fetch_missing=missing.fetch)
