"""The ``pipelines:`` section: the documented shape works, mistakes name key and line."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from cdc_core.errors import ConfigError
from cdc_core.pipeline.config import RetryPolicy, load_pipeline_config

GOOD = """\
connections:
  shop_src: {url: "mysql+pymysql://repl@127.0.0.1:3306/shop"}
  lake:     {lake: /data/lake}
pipelines:
  - name: shop
    source: shop_src
    target: lake
    tables: [shop.orders, shop.customers]
    state_dir: /var/lib/replcheck/shop
  - name: crm
    source: shop_src
    target: lake
    filter: {policy: accept, drop: ["crm.audit_*"]}
    ignore_columns: {crm.people: [ssn]}
    state_dir: /var/lib/replcheck/crm
    buffer: {memory_budget_mb: 64, max_transaction_age_s: 600, max_transaction_changes: 1000}
    batch: {max_events: 500, max_seconds: 0.5}
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_documented_shape_loads(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD)

    shop = load_pipeline_config(path, "shop", environ={})
    crm = load_pipeline_config(path, "crm", environ={})

    assert shop.config.tables.captures("shop.orders")
    assert not shop.config.tables.captures("shop.other")
    assert shop.config.lake == Path("/data/lake")
    assert shop.config.memory_budget_bytes == 256 << 20
    assert shop.source.url == "mysql+pymysql://repl@127.0.0.1:3306/shop"
    assert crm.config.tables.captures("crm.people")
    assert not crm.config.tables.captures("crm.audit_2026")
    assert crm.config.tables.ignore_columns == {"crm.people": frozenset({"ssn"})}
    assert crm.config.memory_budget_bytes == 64 << 20
    assert crm.config.max_transaction_age == timedelta(seconds=600)
    assert (crm.config.batch_max_events, crm.config.batch_max_seconds) == (500, 0.5)


def test_overrides_from_the_environment_and_flags(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD)
    environ = {"REPLCHECK__PIPELINES__0__STATE_DIR": "/tmp/elsewhere"}

    setup = load_pipeline_config(path, "shop", {"pipelines.shop.batch.max_events": "7"}, environ)

    assert setup.config.state_dir == Path("/tmp/elsewhere")
    assert setup.config.batch_max_events == 7
    with pytest.raises(ConfigError, match="no list entry 'nope'"):
        load_pipeline_config(path, "shop", {"pipelines.nope.state_dir": "x"}, environ)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            ("tables: [shop.orders, shop.customers]", "tabels: [shop.orders]"),
            r"tabels: unknown key",
        ),
        (
            ("    target: lake\n    tables", "    target: shop_src\n    tables"),
            "is the pipeline's source",
        ),
        (
            (
                "    source: shop_src\n    target: lake\n    tables",
                "    source: lake\n    target: lake\n    tables",
            ),
            "must be a database",
        ),
        (
            (
                "    tables: [shop.orders, shop.customers]\n",
                "    tables: [shop.orders]\n    filter: {policy: drop}\n",
            ),
            "exactly one of 'tables'",
        ),
        (
            (
                'filter: {policy: accept, drop: ["crm.audit_*"]}',
                "filter: {policy: accept, accept: [x]}",
            ),
            "takes 'drop' patterns",
        ),
        (("memory_budget_mb: 64", "memory_budget_mb: -1"), "must be positive"),
        (
            (
                "source: shop_src\n    target: lake\n    tables",
                "source: nowhere\n    target: lake\n    tables",
            ),
            "not in 'connections'",
        ),
    ],
)
def test_mistakes_name_the_key_and_line(
    tmp_path: Path, change: tuple[str, str], message: str
) -> None:
    old, new = change
    assert old in GOOD
    path = _write(tmp_path, GOOD.replace(old, new, 1))
    name = "crm" if "crm" in old or "memory" in old else "shop"

    with pytest.raises(ConfigError, match=message) as raised:
        load_pipeline_config(path, name, environ={})
    assert "line" in str(raised.value)


def test_an_unknown_pipeline_lists_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no pipeline named 'nope' \(it has \['shop', 'crm'\]\)"):
        load_pipeline_config(_write(tmp_path, GOOD), "nope", environ={})


DATABASE_TARGET = """\
connections:
  shop_src: {url: "mysql+pymysql://repl@db1:3306/shop?server_id=7001"}
  replica:  {url: "postgresql+psycopg://app@db2:5432/reporting"}
  lake:     {lake: /data/lake}
pipelines:
  - name: shop_to_pg
    source: shop_src
    target: replica
    tables: ["shop.*"]
    state_dir: /var/lib/replcheck/shop_to_pg
    target_schema: shop
    conflicts: overwrite
"""


def test_a_database_target_loads_with_its_options(tmp_path: Path) -> None:
    setup = load_pipeline_config(_write(tmp_path, DATABASE_TARGET), "shop_to_pg")

    assert setup.config.lake is None and setup.target.name == "replica"
    assert (setup.target_options.schema, setup.target_options.conflicts) == ("shop", "overwrite")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("conflicts: overwrite", "conflicts: ignore"), r"conflicts: must be one of"),
        (("target: replica", "target: lake"), r"target_schema: and conflicts apply to a database"),
    ],
)
def test_database_target_mistakes_are_named(
    tmp_path: Path, change: tuple[str, str], message: str
) -> None:
    path = _write(tmp_path, DATABASE_TARGET.replace(*change))
    with pytest.raises(ConfigError, match=message):
        load_pipeline_config(path, "shop_to_pg")


def test_retry_defaults_suit_a_nightly_service_and_keys_override_them(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD.replace("batch: {", "retry: {attempts: 0}\n    batch: {"))

    shop = load_pipeline_config(path, "shop", environ={})
    crm = load_pipeline_config(path, "crm", environ={})
    flags = {"pipelines.shop.retry.first_wait_s": "0.2", "pipelines.shop.retry.max_wait_s": "1"}
    fast = load_pipeline_config(path, "shop", flags, environ={})

    assert shop.retry == RetryPolicy(attempts=10, first_wait_s=1.0, max_wait_s=60.0)
    assert crm.retry.attempts == 0  # exit at once
    assert [shop.retry.wait_before(n) for n in range(1, 11)] == [1, 2, 4, 8, 16, 32, 60, 60, 60, 60]
    assert [fast.retry.wait_before(n) for n in (1, 2, 3, 4)] == [0.2, 0.4, 0.8, 1.0]


@pytest.mark.parametrize(
    ("retry", "message"),
    [
        ("{attempts: -1}", r"retry\.attempts: must be 0 \(exit at once\) or more"),
        ("{attempts: 2.5}", r"retry\.attempts: must be int"),
        ("{first_wait_s: 0}", r"retry\.first_wait_s: must be positive"),
        ("{first_wait_s: 5, max_wait_s: 2}", r"retry\.max_wait_s: must be at least first_wait_s"),
        ("{attempt: 3}", r"retry\.attempt: unknown key; expected one of: attempts, first_wait_s"),
    ],
)
def test_retry_mistakes_name_the_key_and_line(tmp_path: Path, retry: str, message: str) -> None:
    path = _write(tmp_path, GOOD.replace("batch: {", f"retry: {retry}\n    batch: {{"))

    with pytest.raises(ConfigError, match=message) as raised:
        load_pipeline_config(path, "crm", environ={})
    assert "line 17" in str(raised.value)  # the retry line
