"""MySQL 8's default authentication, ``caching_sha2_password``, against the fake server's
side of it (``fake_auth``, written from MySQL's documented exchanges; not a server): the
connector's and the binlog reader's connections log in by each of its paths (the cached
fast path, the password over TLS, the password under the server's RSA key without TLS), and
a wrong password is refused with one line.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Iterator

import pytest

from cdc_core.errors import TransientError
from connectors.mariadb.binlog.stream import StreamSettings, server_facts
from connectors.mariadb.connector import MariaDBConnector
from connectors.mariadb.source_config import MariaDBSourceConfig
from tests.connectors.mysql.fake_auth import Sha2Auth
from tests.connectors.mysql.fake_server import FakeMySQLServer, mysql_answers
from tests.tls_certs import Certificates, make_certificates

PASSWORD = "s3cret-42"


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("tls"))


@contextlib.contextmanager
def _served(auth: Sha2Auth) -> Iterator[FakeMySQLServer]:
    answers = mysql_answers(("binlog.000001", 4))
    with FakeMySQLServer([], answers, auth=auth) as server:
        yield server


def _tls(certificates: Certificates) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificates.server_cert, certificates.server_key)
    return context


def _version(url: str, password: str) -> str:
    connector = MariaDBConnector(url, password)
    return connector.flavour().series


@pytest.mark.parametrize(
    ("cached", "over_tls", "path"),
    [
        (True, False, "fast"),
        (False, True, "tls"),
        (False, False, "rsa"),
    ],
)
def test_each_caching_sha2_path_logs_the_connector_and_the_binlog_reader_in(
    certificates: Certificates, cached: bool, over_tls: bool, path: str
) -> None:
    auth = Sha2Auth(PASSWORD, cached, _tls(certificates) if over_tls else None)
    with _served(auth) as server:
        url = server.url("shop")
        if over_tls:
            url += f"?ssl_mode=VERIFY_IDENTITY&ssl_ca={certificates.ca}"
        assert _version(url, PASSWORD) == "MySQL 8.0"
        config = MariaDBSourceConfig(url=url, tables=("t",))
        facts = server_facts(StreamSettings.from_config(config, PASSWORD))
        assert facts.log_file == "binlog.000001"
    assert auth.outcomes == [path, path]


def test_a_wrong_password_is_refused_with_one_line(certificates: Certificates) -> None:
    auth = Sha2Auth(PASSWORD)
    with _served(auth) as server, pytest.raises(TransientError) as raised:
        _version(server.url("shop"), "wrong")
    assert auth.outcomes == ["refused"]
    message = str(raised.value)
    assert "access denied (check user and password)" in message, message
    assert "wrong" not in message and PASSWORD not in message
