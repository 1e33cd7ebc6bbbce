"""What serves a URL: one registry of the products, for snapshot reads and for logs.

Each product folder's ``product.py`` describes the product once (a ``ProductDescription``:
its URL schemes, connector, log source and the rest); ``PRODUCTS`` lists them, and every
function here looks a URL's scheme up in that list. The descriptions name the product's
modules without importing them, so a product's modules (and its driver) load only when a
URL of that product asks for them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from cdc_core.errors import ConfigError
from connectors.base import Connector, Lazy, ProductDescription
from connectors.duckdb.product import DUCKDB
from connectors.hana.product import HANA
from connectors.mariadb.product import MARIADB
from connectors.model import LogSource, LogStatusReader, QuietLog
from connectors.oracle.product import ORACLE
from connectors.postgres.product import POSTGRES
from connectors.sqlite.product import SQLITE
from connectors.synthetic.product import SYNTHETIC
from connectors.urls import parse_url

if TYPE_CHECKING:
    from connectors.jdbc import JdbcDriver
    from connectors.trigger_capture.dialect import TriggerDialect

T = TypeVar("T")

PRODUCTS: tuple[ProductDescription, ...] = (
    DUCKDB,
    HANA,
    MARIADB,
    ORACLE,
    POSTGRES,
    SQLITE,
    SYNTHETIC,
)
"""Every product of ``connectors/``, each described by its folder's ``product.py``."""

CAPTURE_PARAMETER = "capture"
"""The URL query parameter choosing how changes are captured: ``log`` (the product's log, the
default where it has one) or ``trigger`` (``connectors.trigger_capture``)."""
CAPTURE_METHODS = ("log", "trigger")


def scheme_of(url: str) -> str:
    """A URL's scheme without its ``+driver``, lower-cased (``mysql+pymysql://`` -> mysql)."""
    return url.split(":", 1)[0].split("+", 1)[0].lower()


def product_for(url: str) -> ProductDescription | None:
    """The description of the product serving ``url``'s scheme (None: no product does)."""
    scheme = scheme_of(url)
    return next((product for product in PRODUCTS if scheme in product.schemes), None)


def log_status_for(url: str) -> LogStatusReader | None:
    """The ``LogStatusReader`` of ``url``'s log (None: its product, or trigger capture, has
    none)."""
    if captures_by_trigger(url):
        return None
    part = _part_of(url, lambda product: product.log_status)
    return None if part is None else part.load()


def captures_by_trigger(url: str) -> bool:
    """Whether a pipeline with this source URL reads trigger capture's logging tables."""
    method = capture_method(url)
    if method is not None:
        return method == "trigger"
    product = product_for(url)
    return product is not None and product.captures_by_trigger


def capture_dialect_for(url: str, password: str | None, tables: Sequence[str]) -> TriggerDialect:
    """The trigger capture of ``tables`` at ``url``.

    Raises:
        ConfigError: No product serving the scheme has trigger capture.
    """
    part = _part_of(url, lambda product: product.capture_dialect)
    if part is None:
        known = _schemes_having(lambda product: product.capture_dialect)
        raise ConfigError(f"no trigger capture for URL scheme {scheme_of(url)!r}; known: {known}")
    return part.load()(url, password, tables)


def capture_method(url: str) -> str | None:
    """The URL's ``capture`` parameter (``None``: not given).

    Raises:
        ConfigError: A value other than ``log`` or ``trigger``.
    """
    given = parse_url(url).query.get(CAPTURE_PARAMETER)
    if given is None:
        return None
    method = given[-1] if isinstance(given, tuple) else given  # the last one given counts
    if method not in CAPTURE_METHODS:
        raise ConfigError(
            f"URL parameter {CAPTURE_PARAMETER}={method!r} must be one of {CAPTURE_METHODS}"
        )
    return method


def connector_for(url: str, password: str | None = None) -> Connector:
    """The connector serving ``url``.

    Raises:
        ConfigError: No product serves the scheme.
    """
    scheme = scheme_of(url)
    for product in PRODUCTS:
        if product.connector is not None and scheme in product.served_by_connector:
            return product.connector.load()(url, password)
    known = ", ".join(sorted(s for product in PRODUCTS for s in product.served_by_connector))
    raise ConfigError(f"no connector for URL scheme {scheme!r}; known: {known}")


def log_source_for(url: str, password: str | None, tables: Sequence[str]) -> LogSource:
    """The log source serving ``url``.

    Raises:
        ConfigError: No product with a log reader serves the scheme.
    """
    if captures_by_trigger(url):
        from connectors.trigger_capture.log_source import open_trigger_source

        return open_trigger_source(capture_dialect_for(url, password, tables))
    part = _part_of(url, lambda product: product.log_source)
    if part is None:
        known = _schemes_having(lambda product: product.log_source)
        raise ConfigError(
            f"no log reader for URL scheme {scheme_of(url)!r}: a pipeline's source must be one"
            f" of {known}"
        )
    return part.load()(url, password, tables)


def quiet_log_for(url: str, password: str | None) -> QuietLog | None:
    """The ``QuietLog`` of ``url``'s log (None: its product, or trigger capture, has none)."""
    if captures_by_trigger(url):
        return None
    part = _part_of(url, lambda product: product.quiet_log)
    return None if part is None else part.load()(url, password)


def without_log_parameters(url: str) -> str:
    """``url`` without the query parameters its product's log source takes, for a consumer
    that hands the rest to a driver (one connection serves the pipeline and the validator)."""
    from sqlalchemy.engine import make_url

    part = _part_of(url, lambda product: product.log_parameters)
    is_log_parameter = None if part is None else part.load()
    if is_log_parameter is None and capture_method(url) is None:
        return url
    parsed = make_url(url)  # SQLAlchemy's URL, to render the rest back as SQLAlchemy reads it
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
    return [product.jdbc_driver.load() for product in PRODUCTS if product.jdbc_driver]


def _part_of(url: str, part: Callable[[ProductDescription], Lazy[T] | None]) -> Lazy[T] | None:
    """One part of the description of ``url``'s product (None: no product, or no such part)."""
    product = product_for(url)
    return None if product is None else part(product)


def _schemes_having(part: Callable[[ProductDescription], object | None]) -> str:
    """The schemes of the products that have ``part``, for an error's "known" list."""
    return ", ".join(sorted(s for p in PRODUCTS if part(p) is not None for s in p.schemes))
