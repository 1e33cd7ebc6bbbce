"""URLs in messages show neither the password nor any value ``${NAME}`` put into them.

Issue 19, item 8: a user name substituted from the environment was printed in clear.
"""

from __future__ import annotations

from pathlib import Path

from cdc_core.config import load_root, mask_url, read_connections


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
