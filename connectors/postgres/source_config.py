"""What a PostgreSQL CDC source is configured with (built from a pipeline's URL by
``log_source.py``; read by the log reader, the replication helpers and the snapshot reader)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from cdc_core.config import Secret
from cdc_core.errors import ConfigError
from connectors.postgres.connector import PostgresConnector, qualified_name
from connectors.urls import UNPARSED, DatabaseUrl

_NAME = re.compile(r"^[a-z0-9_]{1,63}$")  # slot names: lower-case letters, digits, underscores


@dataclass(frozen=True, slots=True)
class PostgresSourceConfig:
    """A PostgreSQL source of the CDC pipeline.

    Args:
        url: SQLAlchemy URL (``postgresql+psycopg://user@host:port/database``), no password.
        tables: The captured tables, ``schema.table`` (a bare name is in ``public``).
        password: The user's password.
        slot: The logical replication slot the pipeline reads (one per pipeline).
        publication: The publication naming the captured tables.
        create_slot: Create the slot when it does not exist (else it is an error).
        create_publication: Create the publication when it does not exist.
        record_rewrites: Install the event triggers that write table rewrites and type
            changes into the log (``connectors.postgres.rewrites``) when they are missing.
        keys: Per table without a primary key or replica identity index, the columns that
            identify a row.
        idle_s: How often a quiet stream reports ``Idle`` (and asks the server how far the
            WAL has been read), in seconds.
        decoding_work_mem: ``logical_decoding_work_mem`` of the walsender (e.g. ``64kB``):
            transactions larger than it are streamed while in progress.
        endpoint: ``url`` parsed; parsed here when not given, the one parse every reader
            and connector of the source shares.
    """

    url: str
    tables: tuple[str, ...]
    password: Secret | None = None
    slot: str = "replcheck"
    publication: str = "replcheck"
    create_slot: bool = True
    create_publication: bool = True
    record_rewrites: bool = True
    keys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    idle_s: float = 0.5
    decoding_work_mem: str | None = None
    endpoint: DatabaseUrl = field(default=UNPARSED, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.tables:
            raise ConfigError("a Postgres source needs at least one table to capture")
        for what, name in (("slot", self.slot), ("publication", self.publication)):
            if not _NAME.match(name):
                raise ConfigError(
                    f"Postgres {what} name {name!r} must be 1-63 lower-case letters, digits"
                    " or underscores"
                )
        if self.idle_s <= 0:
            raise ConfigError("idle_s must be positive")
        if self.decoding_work_mem is not None and not re.match(
            r"^\d+[kMG]B$", self.decoding_work_mem
        ):
            raise ConfigError(
                f"decoding_work_mem {self.decoding_work_mem!r} must be a size such as 64kB"
            )
        if self.endpoint is UNPARSED:
            endpoint = PostgresConnector.parse_endpoint(self.url)
            object.__setattr__(self, "endpoint", endpoint)  # frozen: set once here

    def qualified_tables(self) -> tuple[str, ...]:
        """The captured tables as ``schema.table``."""
        return tuple(qualified_name(table) for table in self.tables)

    def qualified_keys(self) -> dict[str, tuple[str, ...]]:
        """The configured keys by ``schema.table``."""
        return {qualified_name(t): tuple(k) for t, k in self.keys.items()}
