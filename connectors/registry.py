"""What serves a URL: one registry of the products, for snapshot reads and for logs.

Each product folder's ``connector.py`` registers its ``Connector`` class and, where the
product has a log, its ``log_source.py`` registers a ``LogSource`` factory (with the URL
query parameters that factory takes); importing the module is what registers it, and the
registry imports the products' modules the first time it is asked. Drivers load lazily.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from cdc_core.errors import ConfigError
from connectors.model import LogSource, LogSourceFactory

if TYPE_CHECKING:
    from connectors.base import Connector
    from connectors.jdbc import JdbcDriver

PRODUCTS = ("duckdb", "hana", "mariadb", "oracle", "postgres", "sqlite", "synthetic")
"""The product folders of ``connectors/`` (each may hold ``connector.py``, ``log_source.py``)."""

_CONNECTORS: dict[str, type[Connector]] = {}
_LOG_SOURCES: dict[str, LogSourceFactory] = {}
_LOG_PARAMETERS: dict[str, Callable[[str], bool]] = {}


def scheme_of(url: str) -> str:
    """A URL's scheme without its ``+driver``, lower-cased (``mysql+pymysql://`` -> mysql)."""
    return url.split(":", 1)[0].split("+", 1)[0].lower()


def register_connector(connector: type[Connector]) -> type[Connector]:
    """Class decorator: make a connector available under its URL schemes."""
    for scheme in connector.schemes:
        _CONNECTORS[scheme] = connector
    return connector


def register_log_source(
    schemes: Sequence[str],
    factory: LogSourceFactory,
    is_log_parameter: Callable[[str], bool] | None = None,
) -> None:
    """Make ``factory`` the log source of URLs with these schemes; ``is_log_parameter``
    tells the URL query parameters it takes (other consumers leave them out)."""
    for scheme in schemes:
        _LOG_SOURCES[scheme] = factory
        if is_log_parameter is not None:
            _LOG_PARAMETERS[scheme] = is_log_parameter


def connector_for(url: str, password: str | None = None) -> Connector:
    """The connector serving ``url``.

    Raises:
        ConfigError: No product serves the scheme.
    """
    _load_products("connector")
    scheme = scheme_of(url)
    if scheme not in _CONNECTORS:
        known = ", ".join(sorted(_CONNECTORS))
        raise ConfigError(f"no connector for URL scheme {scheme!r}; known: {known}")
    return _CONNECTORS[scheme](url, password)


def log_source_for(url: str, password: str | None, tables: Sequence[str]) -> LogSource:
    """The log source serving ``url``.

    Raises:
        ConfigError: No product with a log reader serves the scheme.
    """
    _load_products("log_source")
    scheme = scheme_of(url)
    if scheme not in _LOG_SOURCES:
        known = ", ".join(sorted(_LOG_SOURCES))
        raise ConfigError(
            f"no log reader for URL scheme {scheme!r}: a pipeline's source must be one of {known}"
        )
    return _LOG_SOURCES[scheme](url, password, tables)


def without_log_parameters(url: str) -> str:
    """``url`` without the query parameters its product's log source takes, for a consumer
    that hands the rest to a driver (one connection serves the pipeline and the validator)."""
    from sqlalchemy.engine import make_url

    _load_products("log_source")
    is_log_parameter = _LOG_PARAMETERS.get(scheme_of(url))
    if is_log_parameter is None:
        return url
    parsed = make_url(url)
    dropped = [name for name in parsed.query if is_log_parameter(name)]
    return parsed.difference_update_query(dropped).render_as_string(hide_password=False)


def jdbc_drivers() -> list[JdbcDriver]:
    """The JDBC drivers of the products read over JDBC (each one's ``jdbc.py`` ``DRIVER``)."""
    found = []
    for product in PRODUCTS:
        module = f"connectors.{product}.jdbc"
        if importlib.util.find_spec(module) is not None:
            found.append(importlib.import_module(module).DRIVER)
    return found


def _load_products(role: str) -> None:
    """Import every product's ``role`` module (``connector`` or ``log_source``), which
    registers it; a log source's module is imported only when a log is asked for."""
    for product in PRODUCTS:
        module = f"connectors.{product}.{role}"
        if importlib.util.find_spec(module) is not None:
            importlib.import_module(module)
