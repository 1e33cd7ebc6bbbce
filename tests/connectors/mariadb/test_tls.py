"""TLS from the URL (``connectors/mariadb/tls.py``) against a private MariaDB server that
offers TLS with a certificate of the test's own CA, and a user that must use TLS
(``REQUIRE SSL``): every mode connects over TLS, the refusals name the problem, and a
pipeline reads the snapshot and the binlog over TLS into a lake that validates in sync.
"""

from __future__ import annotations

import contextlib
import json
import ssl
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest

from cdc_core.errors import ConfigError, TransientError
from connectors.mariadb.binlog.stream import StreamSettings
from connectors.mariadb.connector import MariaDBConnector
from connectors.mariadb.product import MARIADB
from connectors.mariadb.source_config import MariaDBSourceConfig
from connectors.mariadb.tls import TlsSettings
from connectors.sql_target import build_engine
from tests.cli_runs import catch_up, validate, write_config
from tests.private_servers import MariaDBServer, running_tls_mariadb
from tests.tls_certs import Certificates, make_certificates

pytestmark = [pytest.mark.integration, pytest.mark.mariadb]

USER = "secure"  # REQUIRE SSL, no password


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def server(certificates: Certificates) -> Iterator[MariaDBServer]:
    files = certificates
    with running_tls_mariadb(files.server_cert, files.server_key, files.ca) as running:
        with contextlib.closing(running.connect(None)) as conn, conn.cursor() as cur:
            cur.execute(f"CREATE USER '{USER}'@'127.0.0.1' REQUIRE SSL")
            cur.execute(f"GRANT ALL ON *.* TO '{USER}'@'127.0.0.1'")
            cur.execute("CREATE DATABASE shop")
            cur.execute("CREATE TABLE shop.items (id INT PRIMARY KEY, name VARCHAR(20))")
            cur.execute("INSERT INTO shop.items VALUES (1, 'a'), (2, 'b')")
        yield running


def _url(server: MariaDBServer, **tls: str) -> str:
    query = f"?{urlencode(tls)}" if tls else ""
    return f"mysql+pymysql://{USER}@127.0.0.1:{server.port}/shop{query}"


def _cipher(url: str) -> str:
    connector = MariaDBConnector(url)
    with contextlib.closing(connector.connect()) as connection, connection.cursor() as cursor:
        cursor.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        return str(cursor.fetchone()[1])


def test_every_mode_but_disabled_connects_over_tls(
    server: MariaDBServer, certificates: Certificates
) -> None:
    ca = str(certificates.ca)
    for tls in (
        {},  # PREFERRED: the server offers TLS
        {"ssl_mode": "REQUIRED"},
        {"ssl_ca": ca},  # VERIFY_CA, as the mysql client takes it
        {"ssl_mode": "VERIFY_IDENTITY", "ssl_ca": ca},
    ):
        assert _cipher(_url(server, **tls)), tls


def test_a_refused_connection_names_what_to_change(
    server: MariaDBServer, certificates: Certificates
) -> None:
    with pytest.raises(TransientError, match=r"access denied \(.*must use TLS\)"):
        _cipher(_url(server, ssl_mode="DISABLED"))
    other = str(certificates.other_ca)
    with pytest.raises(ConfigError) as raised:
        _cipher(_url(server, ssl_mode="VERIFY_CA", ssl_ca=other))
    assert "TLS certificate was not accepted" in str(raised.value)
    assert "check ssl_ca" in str(raised.value)


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ({"ssl_mode": "VERIFY"}, "is not one of DISABLED, PREFERRED, REQUIRED"),
        ({"ssl_mode": "VERIFY_CA", "ssl_ca": "/nowhere/ca.pem"}, "ssl_ca=/nowhere/ca.pem"),
        ({"ssl_mode": "DISABLED", "ssl_ca": "{ca}"}, "contradict each other"),
        ({"ssl_mode": "PREFERRED", "ssl_ca": "{ca}"}, "verifies nothing"),
        ({"ssl_mode": "REQUIRED", "ssl_key": "{ca}"}, "ssl_key (in"),
    ],
)
def test_tls_parameters_are_checked_before_connecting(
    query: dict[str, str], says: str, certificates: Certificates
) -> None:
    given = {name: value.format(ca=certificates.ca) for name, value in query.items()}
    with pytest.raises(ConfigError, match="URL parameter") as raised:
        TlsSettings.from_query(given, "mysql+pymysql://u@h/db")
    assert says in str(raised.value)


def test_a_pipeline_reads_snapshot_and_binlog_over_tls_and_validates(
    tmp_path: Path, server: MariaDBServer, certificates: Certificates
) -> None:
    url = _url(server, ssl_mode="VERIFY_IDENTITY", ssl_ca=str(certificates.ca))
    config = write_config(tmp_path, url, ["shop.items"], compared=("shop.items", "shop.items"))
    catch_up(config)  # the snapshot
    with contextlib.closing(server.connect("shop")) as conn, conn.cursor() as cur:
        cur.execute("INSERT INTO items VALUES (3, 'c')")
        cur.execute("UPDATE items SET name = 'A' WHERE id = 1")
    done = catch_up(config)  # the binlog, over TLS
    assert "reading the log" in done.stderr, done.stderr[-2000:]
    code, comparison = validate(config, tmp_path / "validated")
    assert (code, comparison["status"]) == (0, "in_sync"), json.dumps(comparison)[:2000]
    assert comparison["source_rows"] == 3, comparison


def test_the_binlog_stream_and_sqlalchemy_connect_with_the_url_tls(
    server: MariaDBServer, certificates: Certificates
) -> None:
    """The two other ways to the server: the binlog stream's own pymysql connection, and
    SQLAlchemy's engine (a database target, resync), which must not see ``ssl_mode``."""
    import sqlalchemy as sa

    url = _url(server, ssl_mode="VERIFY_IDENTITY", ssl_ca=str(certificates.ca))
    settings = StreamSettings.from_config(MariaDBSourceConfig(url=url, tables=("items",)), None)
    context = settings.connection()["ssl"]
    assert (context.verify_mode, context.check_hostname) == (ssl.CERT_REQUIRED, True)
    assert StreamSettings.from_config(
        MariaDBSourceConfig(url=_url(server, ssl_mode="DISABLED"), tables=("items",)), None
    ).connection()["ssl_disabled"]

    engine = build_engine(url, None, MARIADB.repair)
    try:
        with engine.connect() as connection:
            cipher = connection.execute(sa.text("SHOW SESSION STATUS LIKE 'Ssl_cipher'")).one()
    finally:
        engine.dispose()
    assert cipher[1]
