"""URLs in messages show neither the password nor any value ``${NAME}`` put into them.

Issue 19, item 8: a user name substituted from the environment was printed in clear.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc_core import config as config_module
from cdc_core.config import load_root, mask_url, read_connections


@pytest.fixture(autouse=True)
def _no_values_substituted_before(monkeypatch: pytest.MonkeyPatch) -> None:
    """Values other tests of this process put into URLs (a user ``repl``) are masked
    wherever they appear: each test here starts with none."""
    monkeypatch.setattr(config_module, "_SUBSTITUTED", set())


def test_values_substituted_into_a_url_are_masked_wherever_it_is_printed(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(
        'connections:\n  src: {url: "postgresql+psycopg://${DB_USER}@${DB_HOST}:5432/shop"}\n',
        encoding="utf-8",
    )
    environ = {"DB_USER": "canary-user-7", "DB_HOST": "db.canary.internal"}
    root = load_root(config, None, environ, ("connections",), ("connections",))
    connection = read_connections(root, environ)["src"]

    assert connection.url == "postgresql+psycopg://canary-user-7@db.canary.internal:5432/shop"
    shown = connection.display()
    assert "canary" not in shown
    assert shown == "postgresql+psycopg://***@***:5432/shop"
    assert "canary" not in mask_url(f"{connection.url}?slot=x")  # as connectors print it


def test_a_password_is_masked_as_before() -> None:
    assert (
        mask_url("mysql+pymysql://repl:s3cret@db:3306/shop")
        == "mysql+pymysql://repl:***@db:3306/shop"
    )


def test_a_password_in_the_query_string_is_masked_too() -> None:
    """Issue 37, item 2: ``?password=`` reached the terminal, result.json and the report."""
    shown = mask_url("postgresql+psycopg://u@db:5432/shop?sslmode=require&password=s3cret&x=1")
    assert "s3cret" not in shown and shown.endswith("password=***&x=1")
    assert "s3cret" not in mask_url("mysql+pymysql://db/shop?PWD=s3cret")
    assert "s3cret" not in mask_url("postgresql://:s3cret@db/shop")  # no user name


def test_an_inline_password_in_any_position_is_refused_by_name(tmp_path: Path) -> None:
    from cdc_core.errors import ConfigError

    for url, where in (
        ("postgresql+psycopg://u@db:5432/shop?password=s3cret", "query string (password=)"),
        ("mysql+pymysql://u@db/shop?charset=utf8mb4&passwd=s3cret", "query string (passwd=)"),
        ("mysql+pymysql://u:s3cret@db/shop", "after the user name"),
        ("postgresql://:s3cret@db/shop", "after the user name"),
    ):
        config = tmp_path / "c.yaml"
        config.write_text(f'connections:\n  src: {{url: "{url}"}}\n', encoding="utf-8")
        root = load_root(config, None, {}, ("connections",), ("connections",))
        with pytest.raises(ConfigError, match="inline password") as raised:
            read_connections(root, {})
        assert where in str(raised.value) and "s3cret" not in str(raised.value)
