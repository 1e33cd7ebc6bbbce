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
from connectors.model import (
    LogSource,
    LogSourceFactory,
    LogStatusReader,
    QuietLog,
    QuietLogFactory,
)

if TYPE_CHECKING:
    from connectors.base import Connector
    from connectors.jdbc import JdbcDriver
    from connectors.trigger_capture.dialect import TriggerDialect

    CaptureDialectFactory = Callable[[str, str | None, Sequence[str]], TriggerDialect]

PRODUCTS = ("duckdb", "hana", "mariadb", "oracle", "postgres", "sqlite", "synthetic")
"""The product folders of ``connectors/`` (each may hold ``connector.py``, ``log_source.py``)."""

_CONNECTORS: dict[str, type[Connector]] = {}
_LOG_SOURCES: dict[str, LogSourceFactory] = {}
_LOG_PARAMETERS: dict[str, Callable[[str], bool]] = {}
_CAPTURE_DIALECTS: dict[str, CaptureDialectFactory] = {}
_QUIET_LOGS: dict[str, QuietLogFactory] = {}
_LOG_STATUSES: dict[str, LogStatusReader] = {}
_TRIGGER_ONLY: set[str] = set()  # schemes whose products have no log: triggers by default
CAPTURE_PARAMETER = "capture"
"""The URL query parameter choosing how changes are captured: ``log`` (the product's log, the
default where it has one) or ``trigger`` (``connectors.trigger_capture``)."""
CAPTURE_METHODS = ("log", "trigger")


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


def register_quiet_log(schemes: Sequence[str], factory: QuietLogFactory) -> None:
    """Make ``factory`` the ``QuietLog`` of URLs with these schemes (a product whose log a
    validator can read between two positions without disturbing a pipeline)."""
    for scheme in schemes:
        _QUIET_LOGS[scheme] = factory


def register_log_status(schemes: Sequence[str], reader: LogStatusReader) -> None:
    """Make ``reader`` the ``LogStatusReader`` of URLs with these schemes (each product's
    ``log_status.py``: its log's end and what it keeps for a pipeline)."""
    for scheme in schemes:
        _LOG_STATUSES[scheme] = reader


def log_status_for(url: str) -> LogStatusReader | None:
    """The ``LogStatusReader`` of ``url``'s log (None: its product, or trigger capture, has
    none)."""
    if captures_by_trigger(url):
        return None
    _load_products("log_status")
    return _LOG_STATUSES.get(scheme_of(url))


def register_capture_dialect(
    schemes: Sequence[str], factory: CaptureDialectFactory, *, only_capture: bool = False
) -> None:
    """Make ``factory`` the trigger capture of URLs with these schemes (each product's
    ``trigger_dialect.py`` registers itself); ``only_capture``: the product has no log, so
    its URLs capture by triggers without ``capture=trigger``."""
    for scheme in schemes:
        _CAPTURE_DIALECTS[scheme] = factory
        if only_capture:
            _TRIGGER_ONLY.add(scheme)


def captures_by_trigger(url: str) -> bool:
    """Whether a pipeline with this source URL reads trigger capture's logging tables."""
    method = capture_method(url)
    if method is not None:
        return method == "trigger"
    _load_products("trigger_dialect")
    return scheme_of(url) in _TRIGGER_ONLY


def capture_dialect_for(url: str, password: str | None, tables: Sequence[str]) -> TriggerDialect:
    """The trigger capture of ``tables`` at ``url``.

    Raises:
        ConfigError: No product serving the scheme has trigger capture.
    """
    _load_products("trigger_dialect")
    scheme = scheme_of(url)
    if scheme not in _CAPTURE_DIALECTS:
        known = ", ".join(sorted(_CAPTURE_DIALECTS))
        raise ConfigError(f"no trigger capture for URL scheme {scheme!r}; known: {known}")
    return _CAPTURE_DIALECTS[scheme](url, password, tables)


def capture_method(url: str) -> str | None:
    """The URL's ``capture`` parameter (``None``: not given).

    Raises:
        ConfigError: A value other than ``log`` or ``trigger``.
    """
    from urllib.parse import parse_qsl, urlsplit

    given = [v for k, v in parse_qsl(urlsplit(url).query) if k == CAPTURE_PARAMETER]
    if not given:
        return None
    if given[-1] not in CAPTURE_METHODS:
        raise ConfigError(
            f"URL parameter {CAPTURE_PARAMETER}={given[-1]!r} must be one of {CAPTURE_METHODS}"
        )
    return given[-1]


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
    if captures_by_trigger(url):
        from connectors.trigger_capture.log_source import open_trigger_source

        return open_trigger_source(capture_dialect_for(url, password, tables))
    _load_products("log_source")
    scheme = scheme_of(url)
    if scheme not in _LOG_SOURCES:
        known = ", ".join(sorted(_LOG_SOURCES))
        raise ConfigError(
            f"no log reader for URL scheme {scheme!r}: a pipeline's source must be one of {known}"
        )
    return _LOG_SOURCES[scheme](url, password, tables)


def quiet_log_for(url: str, password: str | None) -> QuietLog | None:
    """The ``QuietLog`` of ``url``'s log (None: its product, or trigger capture, has none)."""
    if captures_by_trigger(url):
        return None
    _load_products("quiet_log")
    factory = _QUIET_LOGS.get(scheme_of(url))
    return None if factory is None else factory(url, password)


def without_log_parameters(url: str) -> str:
    """``url`` without the query parameters its product's log source takes, for a consumer
    that hands the rest to a driver (one connection serves the pipeline and the validator)."""
    from sqlalchemy.engine import make_url

    _load_products("log_source")
    is_log_parameter = _LOG_PARAMETERS.get(scheme_of(url))
    if is_log_parameter is None and capture_method(url) is None:
        return url
    parsed = make_url(url)
    dropped = [
        name
        for name in parsed.query
        if name == CAPTURE_PARAMETER or (is_log_parameter is not None and is_log_parameter(name))
    ]
    if not dropped:
        return url
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
    """Import every product's ``role`` module (``connector``, ``log_source``,
    ``trigger_dialect``, ``quiet_log``, ``log_status``), which
    registers it; a log source's module is imported only when a log is asked for."""
    for product in PRODUCTS:
        module = f"connectors.{product}.{role}"
        if importlib.util.find_spec(module) is not None:
            importlib.import_module(module)
