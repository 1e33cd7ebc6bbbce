"""The MariaDB connector's connections: TLS as pymysql's PREFERRED mode, its context built
once per process (pymysql 1.2 loads the system's CA store for every connection)."""

from __future__ import annotations

import ssl

from connectors.mariadb.connector import _connection_class


def test_connections_share_one_preferred_tls_context_and_keep_given_options() -> None:
    connection = _connection_class()
    first = connection(host="127.0.0.1", defer_connect=True)
    second = connection(host="127.0.0.1", defer_connect=True)
    assert first.ssl and not first._ssl_required  # TLS if the server offers it
    assert first.ctx is second.ctx
    assert first.ctx.verify_mode == ssl.CERT_NONE and not first.ctx.check_hostname

    given = connection(host="127.0.0.1", ssl={"verify_mode": "required"}, defer_connect=True)
    assert given._ssl_required and given.ctx is not first.ctx
    assert given.ctx.verify_mode == ssl.CERT_REQUIRED
