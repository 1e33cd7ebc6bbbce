"""Which connector reads the log of a connection: the CDC side of the connector registry.

A product with a log reader registers a factory under its URL schemes; ``replcheck cdc run``
asks ``log_source_for`` for the reader and snapshot reader of a pipeline's source.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from cdc_core.errors import ConfigError
from cdc_core.rebuild import FetchMissing, FetchUnavailable
from cdc_core.source import LogReader, SnapshotReader


@dataclass(frozen=True, slots=True)
class LogSource:
    """A source's log reader, its snapshot reader (if it has one) and its tables.

    ``fetch_missing`` holds, per table, the hook completing columns the log leaves out
    (``PipelineConfig.fetch_missing``), for products whose log can omit them;
    ``fetch_unavailable``, per table, the hook reading new values the log cannot render as
    of their commit (``RebuildConfig.fetch_unavailable_by_table``).
    """

    reader: LogReader
    snapshots: SnapshotReader | None
    tables: Callable[[], list[str]]  # every table the source has now (schema.table)
    fetch_missing: Mapping[str, FetchMissing] = field(default_factory=dict)
    fetch_unavailable: Mapping[str, FetchUnavailable] = field(default_factory=dict)


LogSourceFactory = Callable[[str, "str | None", Sequence[str]], LogSource]
"""Builds a log source from a URL, a password and the tables to capture."""

_FACTORIES: dict[str, LogSourceFactory] = {}

BUILTIN_LOG_SOURCES = (
    "connectors.mariadb.log_source",
    "connectors.oracle.log_source",
    "connectors.postgres.log_source",
    "connectors.synthetic.log_reader",
)


def register_log_source(schemes: Sequence[str], factory: LogSourceFactory) -> None:
    """Make ``factory`` the log source of URLs with these schemes."""
    for scheme in schemes:
        _FACTORIES[scheme] = factory


def log_source_for(url: str, password: str | None, tables: Sequence[str]) -> LogSource:
    """The log source serving ``url`` (by its scheme, before any ``+driver``).

    Raises:
        ConfigError: No product with a log reader serves the scheme.
    """
    for module in BUILTIN_LOG_SOURCES:
        importlib.import_module(module)
    scheme = url.split(":", 1)[0].split("+", 1)[0].lower()
    if scheme not in _FACTORIES:
        known = ", ".join(sorted(_FACTORIES))
        raise ConfigError(
            f"no log reader for URL scheme {scheme!r}: a pipeline's source must be one of {known}"
        )
    return _FACTORIES[scheme](url, password, tables)


_URL_PARAMETERS = {
    "postgresql": "connectors.postgres.url_parameters",
    "mysql": "connectors.mariadb.url_parameters",
    "mariadb": "connectors.mariadb.url_parameters",
}


def without_log_parameters(url: str) -> str:
    """``url`` without the query parameters its product's log source takes, for a consumer
    that hands the rest to a driver (one connection serves the pipeline and the validator)."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    module = _URL_PARAMETERS.get(parsed.get_backend_name())
    if module is None:
        return url
    is_log_parameter = importlib.import_module(module).is_log_parameter
    dropped = [name for name in parsed.query if is_log_parameter(name)]
    return parsed.difference_update_query(dropped).render_as_string(hide_password=False)
