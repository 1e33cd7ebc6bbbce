"""The ``postgresql`` URL of a pipeline's source: replcheck's parameters and libpq's."""

from __future__ import annotations

import pytest

from cdc_core.errors import ConfigError
from connectors.postgres.log_reader import PostgresLogReader
from connectors.postgres.log_source import resolve_tables, source_config
from connectors.registry import log_source_for


def test_parameters_are_read_and_libpq_ones_stay_in_the_url() -> None:
    config = source_config(
        "postgresql+psycopg://repl@db:5432/shop?slot=shop_cdc&publication=shop_pub"
        "&create_slot=false&idle_s=2&decoding_work_mem=64kB&key.audit=id,%20at&sslmode=require",
        "secret",
        ["public.orders", "audit"],
    )
    assert config.url == "postgresql+psycopg://repl@db:5432/shop?sslmode=require"
    assert (config.slot, config.publication, config.create_slot) == ("shop_cdc", "shop_pub", False)
    assert (config.idle_s, config.decoding_work_mem) == (2.0, "64kB")
    assert config.qualified_keys() == {"public.audit": ("id", "at")}
    assert config.qualified_tables() == ("public.orders", "public.audit")
    assert config.password is not None and str(config.password) == "***"


@pytest.mark.parametrize(
    ("query", "problem"),
    [
        ("create_slot=maybe", "must be true or false"),
        ("idle_s=soon", "is not a number"),
        ("slot=Bad-Name", "must be 1-63 lower-case"),
        ("decoding_work_mem=lots", "must be a size such as 64kB"),
    ],
)
def test_bad_parameters_name_the_problem(query: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        source_config(f"postgresql://repl@db/shop?{query}", None, ["t"])


def test_registered_for_postgresql_urls() -> None:
    source = log_source_for("postgresql+psycopg://repl@db:5432/shop", None, ["t"])
    assert isinstance(source.reader, PostgresLogReader)
    assert source.snapshots is not None


def test_table_patterns_resolve_against_existing_tables() -> None:
    existing = ["public.a", "public.ab", "shop.orders", "shop.lines"]
    assert resolve_tables(["a", "shop.orders"], lambda: []) == ["public.a", "shop.orders"]
    assert resolve_tables(["a*", "shop.*"], lambda: existing) == existing
    assert resolve_tables(["shop.l*", "a"], lambda: existing) == ["shop.lines", "public.a"]
    assert resolve_tables([], lambda: existing) == existing
