"""Database URLs (``dialect+driver://user:password@host:port/database?name=value``) read
into their parts, as SQLAlchemy's ``make_url`` reads them (a test holds the two equal).

The connectors need only the parts to open a driver's connection; importing SQLAlchemy for
them cost a validation 0.1 s, a twentieth of an incremental run. Code that renders or edits a
URL for SQLAlchemy still uses SQLAlchemy's ``URL``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, unquote

from cdc_core.config import mask_url
from cdc_core.errors import ConfigError

# SQLAlchemy's grammar (sqlalchemy.engine.url._parse_url).
_PATTERN = re.compile(
    r"""
        (?P<name>[\w\+]+)://
        (?:
            (?P<username>[^:/]*)
            (?::(?P<password>[^@]*))?
        @)?
        (?:
            (?:
                \[(?P<ipv6host>[^/\?]+)\] |
                (?P<ipv4host>[^/:\?]+)
            )?
            (?::(?P<port>[^/\?]*))?
        )?
        (?:/(?P<database>[^\?]*))?
        (?:\?(?P<query>.*))?
    """,
    re.X,
)


@dataclass(frozen=True, slots=True)
class DatabaseUrl:
    """The parts of a database URL; a query parameter given more than once is a tuple."""

    drivername: str
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    host: str | None = None
    port: int | None = None
    database: str | None = None
    query: Mapping[str, str | tuple[str, ...]] = field(default_factory=dict)

    @property
    def backend(self) -> str:
        """The dialect without its driver (``mysql`` of ``mysql+pymysql``)."""
        return self.drivername.split("+", 1)[0]


def parse_url(url: str) -> DatabaseUrl:
    """The parts of ``url``; user, password and database percent-decoded.

    Raises:
        ConfigError: ``url`` is not a database URL (shown without its password).
    """
    found = _PATTERN.match(url)
    port_text = found and found["port"]
    if found is None or (port_text and not port_text.isdigit()):
        raise ConfigError(
            f"not a database URL: {mask_url(url)}; write it as"
            " dialect+driver://user@host:port/database"
        )
    query: dict[str, str | tuple[str, ...]] = {}
    for name, value in parse_qsl(found["query"] or ""):
        before = query.get(name)
        query[name] = value if before is None else (*_values(before), value)
    decoded = {k: None if found[k] is None else unquote(found[k]) for k in _DECODED}
    return DatabaseUrl(
        drivername=found["name"],
        host=found["ipv4host"] or found["ipv6host"],
        port=int(port_text) if port_text else None,
        query=query,
        **decoded,
    )


UNPARSED = DatabaseUrl(drivername="")
"""The default ``endpoint`` of a source config built from its URL text alone: its
``__post_init__`` parses the text then, once; ``dataclasses.replace`` carries the parsed
value over to a copy, so a copy is not parsed again."""

_DECODED = ("username", "password", "database")


def _values(value: str | tuple[str, ...]) -> tuple[str, ...]:
    return value if isinstance(value, tuple) else (value,)
