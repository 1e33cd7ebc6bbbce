"""``connectors.urls.parse_url`` reads a URL into the parts SQLAlchemy's ``make_url`` does."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy.engine import make_url

from cdc_core.errors import ConfigError
from connectors.base import Connector
from connectors.hana.connector import HanaConnector
from connectors.mariadb.binlog.stream import StreamSettings
from connectors.mariadb.connector import MariaDBConnector
from connectors.mariadb.log_source import source_config
from connectors.mariadb.snapshot import MariaDBSnapshotReader
from connectors.oracle.connector import OracleConnector
from connectors.urls import DatabaseUrl, parse_url

_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_NAME = st.text("abcdefghijklmnopqrstuvwxyz0123456789_", min_size=1, max_size=8)


@st.composite
def urls(draw: st.DrawFn) -> str:
    """URLs with quoted users, passwords and databases, IPv4/IPv6/no hosts, ports, queries."""
    scheme = draw(st.sampled_from(["mysql+pymysql", "postgresql", "oracle+oracledb", "hana"]))
    user = draw(st.none() | _TEXT.map(lambda t: quote(t, safe="")))
    password = draw(st.none() | _TEXT.map(lambda t: quote(t, safe="")))
    host = draw(st.sampled_from(["", "127.0.0.1", "db.example", "[::1]", "[fe80::1%25eth0]"]))
    port = draw(st.none() | st.integers(1, 65535))
    database = draw(st.none() | _TEXT.map(lambda t: quote(t, safe="")))
    pairs = draw(st.lists(st.tuples(_NAME, _TEXT.map(quote)), max_size=4))
    login = "" if user is None else user + ("" if password is None else f":{password}") + "@"
    text = f"{scheme}://{login}{host}{'' if port is None else f':{port}'}"
    text += "" if database is None else f"/{database}"
    return text + ("?" + "&".join(f"{k}={v}" for k, v in pairs) if pairs else "")


@given(urls())
def test_parts_equal_sqlalchemys(text: str) -> None:
    ours, theirs = parse_url(text), make_url(text)
    assert (ours.drivername, ours.username, ours.password) == (
        theirs.drivername,
        theirs.username,
        theirs.password,
    )
    assert (ours.host, ours.port, ours.database) == (theirs.host, theirs.port, theirs.database)
    assert dict(ours.query) == dict(theirs.query)
    assert ours.backend == theirs.get_backend_name()


def test_a_repeated_parameter_is_a_tuple() -> None:
    assert parse_url("hana://u@h:1/?a=1&b=2&a=3").query == {"a": ("1", "3"), "b": "2"}


@pytest.mark.parametrize("text", ["not a url", "mysql://u:secret@h:port/db"])
def test_not_a_url_is_refused_without_its_password(text: str) -> None:
    with pytest.raises(ConfigError, match="not a database URL") as refused:
        parse_url(text)
    assert "secret" not in str(refused.value)


def test_reading_a_mariadb_url_imports_no_sqlalchemy() -> None:
    """The point of the module: a validation of a MariaDB source needs no SQLAlchemy."""
    code = (
        "import sys; from connectors.mariadb.connector import MariaDBConnector;"
        " c = MariaDBConnector('mysql+pymysql://u@h:1/shop'); print(c.database());"
        " print('sqlalchemy' in sys.modules)"
    )
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert shown.stdout.split() == ["shop", "False"], shown.stderr


def _count_parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every URL ``parse_url`` reads from now on, in whichever module looked it up."""
    parsed: list[str] = []

    def counting(url: str) -> DatabaseUrl:
        parsed.append(url)
        return parse_url(url)

    for name, module in list(sys.modules.items()):
        if name.startswith("connectors.") and getattr(module, "parse_url", None) is parse_url:
            monkeypatch.setattr(module, "parse_url", counting)
    return parsed


@pytest.mark.parametrize(
    ("connector_class", "url", "read"),
    [
        (MariaDBConnector, "mysql+pymysql://u@h:3306/shop", MariaDBConnector.database),
        (OracleConnector, "oracle+oracledb://cdc@h:1521/?service_name=S", OracleConnector.owner),
        (HanaConnector, "hana://u@h:30015/?currentSchema=SHOP", HanaConnector.default_schema),
    ],
)
def test_a_connector_parses_its_url_once(
    monkeypatch: pytest.MonkeyPatch,
    connector_class: type[Connector],
    url: str,
    read: Callable[[Any], str],
) -> None:
    expected = parse_url(url)
    parsed = _count_parses(monkeypatch)
    connector = connector_class(url)
    assert read(connector) == read(connector)
    assert parsed == [url]
    assert connector.endpoint == expected
    assert parsed == [url]


def test_a_sources_readers_share_its_configs_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed = _count_parses(monkeypatch)
    config = source_config("mysql+pymysql://u@h:3306/shop?server_id=7", None, ["t"])
    assert MariaDBSnapshotReader(config).database == "shop"
    assert StreamSettings.from_config(config, None).database == "shop"
    assert MariaDBConnector(config.url, None, config.endpoint).database() == "shop"
    assert parsed == ["mysql+pymysql://u@h:3306/shop"]
