"""What a MariaDB/MySQL CDC source is configured with (built from a pipeline's URL by
``log_source.py``; read by the log reader, the binlog stream and the snapshot reader)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from cdc_core.config import Secret
from cdc_core.errors import ConfigError
from connectors.urls import UNPARSED, DatabaseUrl, parse_url


@dataclass(frozen=True, slots=True)
class MariaDBSourceConfig:
    """A MariaDB/MySQL source of the CDC pipeline.

    Args:
        url: SQLAlchemy URL (``mysql+pymysql://user@host:port/database``), no password.
        tables: The captured tables, ``schema.table`` or a table of the URL's database.
        password: The user's password.
        keys: Per table without a primary key, the columns that identify a row.
        server_id: The replica id this reader registers with; unique among the server's
            replicas.
        heartbeat_s: How often the server reports that the log is quiet (``Idle``).
        endpoint: ``url`` parsed; parsed here when not given, the one parse every reader,
            snapshot and connector of the source shares.
    """

    url: str
    tables: tuple[str, ...]
    password: Secret | None = None
    keys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    server_id: int = 0x5EC0
    heartbeat_s: float = 1.0
    endpoint: DatabaseUrl = field(default=UNPARSED, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.tables:
            raise ConfigError("a MariaDB source needs at least one table to capture")
        if not 1 <= self.server_id < 2**32:
            raise ConfigError(f"server_id must be in 1..2**32-1, not {self.server_id}")
        if self.heartbeat_s <= 0:
            raise ConfigError("heartbeat_s must be positive")
        if self.endpoint is UNPARSED:
            object.__setattr__(self, "endpoint", parse_url(self.url))  # frozen: set once here
