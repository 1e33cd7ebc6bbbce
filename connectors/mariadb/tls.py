"""TLS of MariaDB/MySQL connections, from the URL's parameters as the ``mysql`` client names
them (https://dev.mysql.com/doc/refman/8.4/en/connection-options.html#option_general_ssl-mode):

- ``ssl_mode``: ``DISABLED``; ``PREFERRED`` (TLS when the server offers it, nothing
  verified: pymysql's default; no files with it); ``REQUIRED`` (TLS or no connection,
  nothing verified);
  ``VERIFY_CA`` (the server's certificate must be signed by ``ssl_ca``, else by a CA of the
  system's store); ``VERIFY_IDENTITY`` (also its name must be the URL's host). Without
  ``ssl_mode``, ``ssl_ca`` means ``VERIFY_CA`` (as for the ``mysql`` client), else
  ``PREFERRED``.
- ``ssl_ca``, ``ssl_cert``, ``ssl_key``: PEM files (a client certificate and its key).

Every connection of a source or target takes them: the connector's (``connector.py``), the
binlog stream's (``binlog/stream.py``) and SQLAlchemy's (``sqlalchemy_arguments``). With
``caching_sha2_password`` (MySQL 8's default), a connection over TLS sends the password in
it; without TLS pymysql asks for the server's RSA key and encrypts it (``cryptography``,
installed with the ``mariadb`` extra). Spark's JDBC read takes the Python read instead
whenever a TLS parameter is set (``jdbc.py``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cdc_core.config import mask_url
from cdc_core.errors import ConfigError

if TYPE_CHECKING:
    import ssl

SSL_MODES = ("DISABLED", "PREFERRED", "REQUIRED", "VERIFY_CA", "VERIFY_IDENTITY")
FILES = ("ssl_ca", "ssl_cert", "ssl_key")
TLS_PARAMETERS = ("ssl_mode", *FILES)


@dataclass(frozen=True, slots=True)
class TlsSettings:
    """A connection's TLS, as its URL asks for it.

    Args:
        mode: One of ``SSL_MODES``.
        ca: The CA certificates' PEM file ("" : none given).
        cert: The client certificate's PEM file ("": none).
        key: The client key's PEM file ("": in ``cert``, or none).
    """

    mode: str = "PREFERRED"
    ca: str = ""
    cert: str = ""
    key: str = ""

    @classmethod
    def from_query(cls, query: Mapping[str, object], url: str) -> TlsSettings:
        """The settings of a URL's query (``DatabaseUrl.query``).

        Raises:
            ConfigError: An unknown mode, a file that cannot be read, a key without its
                certificate, or files with ``ssl_mode=DISABLED``; names the parameter.
        """
        given = {name: str(query[name]) for name in TLS_PARAMETERS if name in query}
        ca, cert, key = (given.get(name, "") for name in FILES)
        mode = given.get("ssl_mode", "VERIFY_CA" if ca else "PREFERRED").upper()
        where = mask_url(url)
        if mode not in SSL_MODES:
            raise ConfigError(
                f"URL parameter ssl_mode={given['ssl_mode']!r} (in {where}) is not one of"
                f" {', '.join(SSL_MODES)}",
                {"parameter": "ssl_mode"},
            )
        if mode == "DISABLED" and (ca or cert or key):
            raise ConfigError(
                f"URL parameters ssl_mode=DISABLED and {'/'.join(FILES)} (in {where}) contradict"
                " each other: drop the files, or choose another ssl_mode",
                {"parameter": "ssl_mode"},
            )
        if mode == "PREFERRED" and (ca or cert):
            raise ConfigError(
                f"URL parameter ssl_mode=PREFERRED (in {where}) verifies nothing and may not use"
                " TLS at all: with ssl_ca or ssl_cert choose REQUIRED, VERIFY_CA or"
                " VERIFY_IDENTITY",
                {"parameter": "ssl_mode"},
            )
        if key and not cert:
            raise ConfigError(
                f"URL parameter ssl_key (in {where}) needs ssl_cert, the client certificate",
                {"parameter": "ssl_key"},
            )
        for name, path in (("ssl_ca", ca), ("ssl_cert", cert), ("ssl_key", key)):
            if path and not Path(path).is_file():
                raise ConfigError(
                    f"URL parameter {name}={path} (in {where}): no such file; give the path of"
                    " a PEM file this process can read",
                    {"parameter": name},
                )
        return cls(mode, ca, cert, key)

    @property
    def is_default(self) -> bool:
        """Whether the URL asks for nothing (pymysql's PREFERRED mode)."""
        return self == TlsSettings()

    def pymysql_arguments(self) -> dict[str, Any]:
        """pymysql's connect arguments for these settings (none for the default)."""
        if self.mode == "DISABLED":
            return {"ssl_disabled": True}
        if self.mode == "PREFERRED":
            return {}
        return {"ssl": _context(self)}


# pymysql's CR_SSL_CONNECTION_ERROR (TLS asked for, not offered); MySQL's
# ER_SECURE_TRANSPORT_REQUIRED (TLS required, not used).
CR_SSL_CONNECTION_ERROR, ER_SECURE_TRANSPORT_REQUIRED = 2026, 3159


def tls_refusal(exc: Exception, tls: TlsSettings) -> str | None:
    """What a failed connection's error says of TLS, with the fix (None: nothing)."""
    code = exc.args[0] if exc.args else None
    said = str(exc.args[-1]) if exc.args else str(exc)
    if code == CR_SSL_CONNECTION_ERROR:
        return f"the server offers no TLS, and ssl_mode={tls.mode} requires it ({said})"
    if "certificate verify failed" in said.lower():
        what = "the URL's host (VERIFY_IDENTITY)" if "match" in said else "ssl_ca"
        return f"the server's TLS certificate was not accepted ({said}): check {what}"
    if code == ER_SECURE_TRANSPORT_REQUIRED:
        return f"the server requires TLS ({said}): set ssl_mode=REQUIRED or VERIFY_CA"
    return None


def access_denied(tls: TlsSettings) -> str:
    """Access denied, in words: with TLS off, the user may be one that must use it."""
    tls_hint = ", or whether the user must use TLS" if tls.mode == "DISABLED" else ""
    return f"access denied (check user and password{tls_hint})"


def sqlalchemy_arguments(url: str) -> tuple[str, dict[str, Any]]:
    """A MariaDB/MySQL URL for SQLAlchemy without its TLS parameters, and the driver's
    connect arguments they mean (SQLAlchemy would hand ``ssl_mode`` to pymysql as is)."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    settings = TlsSettings.from_query(parsed.query, url)
    rest = parsed.difference_update_query(TLS_PARAMETERS)
    return rest.render_as_string(hide_password=False), settings.pymysql_arguments()


@functools.cache
def _context(settings: TlsSettings) -> ssl.SSLContext:
    """One context per settings and process: building one loads the CA store (tens of
    milliseconds), and a pipeline opens many connections."""
    import ssl

    verify = settings.mode in ("VERIFY_CA", "VERIFY_IDENTITY")
    context = ssl.create_default_context(cafile=settings.ca or None)
    context.check_hostname = settings.mode == "VERIFY_IDENTITY"
    context.verify_mode = ssl.CERT_REQUIRED if verify else ssl.CERT_NONE
    if settings.cert:
        context.load_cert_chain(settings.cert, keyfile=settings.key or None)
    return context
