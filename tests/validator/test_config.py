"""Configuration: the documented shape loads; every mistake names its key and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc_core.config import Secret, mask_url
from cdc_core.errors import ConfigError
from validator.config import load_validator_config

ISSUE_EXAMPLE = """\
connections:
  shop_src: {url: "mysql+pymysql://user@127.0.0.1:3306/shop"}     # any SQLAlchemy URL
  shop_pg:  {url: "postgresql+psycopg://user@127.0.0.1:5432/shop"}
  lake:     {lake: "/data/lake"}                                    # Delta tables
comparisons:
  - name: orders
    source: {connection: shop_src, table: orders}
    target: {connection: lake, table: shop.orders}
    key: [id]                      # optional when the source has a primary key
    columns: {exclude: [etl_loaded_at], map: {customer: customer_id}, sensitive: [email]}
    options: {timestamp_precision: 3, float_digits: 12, trim_char: true}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "replcheck.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def load(tmp_path: Path, text: str, **kwargs: object) -> object:
    return load_validator_config(write(tmp_path, text), environ={}, **kwargs)  # type: ignore[arg-type]


def test_the_documented_shape_loads(tmp_path: Path) -> None:
    config = load_validator_config(write(tmp_path, ISSUE_EXAMPLE), environ={})
    orders = config.comparison("orders")
    assert orders.source.connection == "shop_src" and orders.source.table == "orders"
    assert orders.target.table == "shop.orders"
    assert orders.key == ("id",)
    assert orders.columns.exclude == ("etl_loaded_at",)
    assert orders.columns.target_name("customer") == "customer_id"
    assert orders.columns.sensitive == ("email",)
    assert orders.options.timestamp_precision == 3
    assert orders.options.float_digits == 12
    assert orders.options.trim_char is True
    assert config.connections["lake"].is_lake
    assert config.spark.master == "local[2]"


def test_a_path_given_as_text_loads_the_same(tmp_path: Path) -> None:
    """Issue 38, item 8: ``load_validator_config('file.yaml')`` failed on a ``str``."""
    path = write(tmp_path, ISSUE_EXAMPLE)
    assert load_validator_config(str(path), environ={}) == load_validator_config(path, environ={})


def test_unknown_keys_name_the_path_and_line(tmp_path: Path) -> None:
    text = ISSUE_EXAMPLE.replace("    key: [id]", "    keys: [id]")
    with pytest.raises(ConfigError) as excinfo:
        load(tmp_path, text)
    message = str(excinfo.value)
    assert "line 9" in message
    assert "comparisons[0].keys" in message
    assert "unknown key" in message


def test_an_unknown_option_is_an_error(tmp_path: Path) -> None:
    text = ISSUE_EXAMPLE.replace("trim_char: true", "trim_chars: true")
    with pytest.raises(ConfigError, match=r"line 11.*options\.trim_chars.*unknown key"):
        load(tmp_path, text)


def test_an_out_of_range_option_names_its_section(tmp_path: Path) -> None:
    text = ISSUE_EXAMPLE.replace("timestamp_precision: 3", "timestamp_precision: 9")
    with pytest.raises(ConfigError, match=r"comparisons\[0\]\.options.*timestamp_precision"):
        load(tmp_path, text)


def test_a_wrongly_typed_value_is_an_error(tmp_path: Path) -> None:
    text = ISSUE_EXAMPLE.replace("float_digits: 12", "float_digits: twelve")
    with pytest.raises(ConfigError, match=r"options\.float_digits: must be int, not str"):
        load(tmp_path, text)


def test_duplicate_keys_are_errors(tmp_path: Path) -> None:
    text = ISSUE_EXAMPLE.replace("    key: [id]", "    key: [id]\n    key: [other]")
    with pytest.raises(ConfigError, match=r"line 10: key 'key' appears twice"):
        load(tmp_path, text)


def test_an_unknown_connection_lists_the_known_ones(tmp_path: Path) -> None:
    text = ISSUE_EXAMPLE.replace("{connection: lake,", "{connection: lakehouse,")
    with pytest.raises(ConfigError, match=r"unknown connection 'lakehouse'; known: lake, shop_pg"):
        load(tmp_path, text)


def test_invalid_yaml_and_missing_files_are_clear(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"not valid YAML: .*flow sequence that starts at line 2"):
        load(tmp_path, "connections:\n  a: [unclosed\n")
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_validator_config(tmp_path / "absent.yaml", environ={})
    with pytest.raises(ConfigError, match="missing required key 'connections'"):
        load(tmp_path, "comparisons: []\n")


def test_passwords_come_from_the_environment_or_a_file(tmp_path: Path) -> None:
    secret_file = tmp_path / "pw"
    secret_file.write_text("s3cr3t-file\n")
    secret_file.chmod(0o600)  # a secret file others can read is refused
    text = ISSUE_EXAMPLE.replace(
        '{url: "mysql+pymysql://user@127.0.0.1:3306/shop"}',
        '{url: "mysql+pymysql://${DB_USER}@127.0.0.1:3306/shop", password: {env: SHOP_PW}}',
    ).replace(
        '{url: "postgresql+psycopg://user@127.0.0.1:5432/shop"}',
        '{url: "postgresql+psycopg://user@127.0.0.1:5432/shop", '
        f"password: {{file: {secret_file}}}}}",
    )
    environ = {"SHOP_PW": "s3cr3t-env", "DB_USER": "repl"}
    config = load_validator_config(write(tmp_path, text), environ=environ)
    source = config.connections["shop_src"]
    assert source.url == "mysql+pymysql://repl@127.0.0.1:3306/shop"
    assert source.password is not None and source.password.reveal() == "s3cr3t-env"
    pg_password = config.connections["shop_pg"].password
    assert pg_password is not None and pg_password.reveal() == "s3cr3t-file"
    assert "s3cr3t" not in repr(config) and "s3cr3t" not in str(config)


def test_inline_passwords_and_missing_variables_are_refused(tmp_path: Path) -> None:
    inline = ISSUE_EXAMPLE.replace("user@127.0.0.1:3306", "user:hunter2@127.0.0.1:3306")
    with pytest.raises(ConfigError) as excinfo:
        load(tmp_path, inline)
    assert "inline password" in str(excinfo.value)
    assert "hunter2" not in str(excinfo.value)
    missing = ISSUE_EXAMPLE.replace("user@127.0.0.1:3306", "${NOPE}@127.0.0.1:3306")
    with pytest.raises(ConfigError, match="environment variable NOPE is not set"):
        load(tmp_path, missing)


def test_secrets_and_urls_are_masked() -> None:
    assert str(Secret("x")) == "***" and repr(Secret("x")) == "Secret('***')"
    assert mask_url("mysql+pymysql://u:p4ss@h:1/db") == "mysql+pymysql://u:***@h:1/db"
    assert mask_url("postgresql://u@h/db") == "postgresql://u@h/db"


def test_file_then_environment_then_flags(tmp_path: Path) -> None:
    text = ISSUE_EXAMPLE + "spark: {master: 'local[1]'}\n"
    path = write(tmp_path, text)
    assert load_validator_config(path, environ={}).spark.master == "local[1]"
    environ = {"REPLCHECK__SPARK__MASTER": "local[3]"}
    assert load_validator_config(path, environ=environ).spark.master == "local[3]"
    flagged = load_validator_config(path, {"spark.master": "local[4]"}, environ=environ)
    assert flagged.spark.master == "local[4]"


def test_unknown_comparison_names_the_known_ones(tmp_path: Path) -> None:
    config = load_validator_config(write(tmp_path, ISSUE_EXAMPLE), environ={})
    with pytest.raises(
        ConfigError, match="no comparison named 'customers'; the config has: orders"
    ):
        config.comparison("customers")


def test_boolean_columns_and_the_rounding_rule_load(tmp_path: Path) -> None:
    text = ISSUE_EXAMPLE.replace("sensitive: [email]}", "sensitive: [email], boolean: [active]}")
    text = text.replace(
        "trim_char: true}", "trim_char: true, timestamp_rounding: half_away_from_2000}"
    )
    orders = load_validator_config(write(tmp_path, text), environ={}).comparison("orders")
    assert orders.columns.boolean == ("active",)
    assert orders.options.timestamp_rounding == "half_away_from_2000"
    unset = load_validator_config(write(tmp_path, ISSUE_EXAMPLE), environ={})
    assert unset.comparison("orders").options.timestamp_rounding is None  # chosen per run


def test_an_unknown_rounding_rule_names_the_rules(tmp_path: Path) -> None:
    text = ISSUE_EXAMPLE.replace("trim_char: true}", "trim_char: true, timestamp_rounding: up}")
    with pytest.raises(ConfigError, match=r"comparisons\[0\]\.options.*'up'.*half_away_from_2000"):
        load(tmp_path, text)


def test_the_engine_is_auto_unless_chosen_run_wide_or_per_comparison(tmp_path: Path) -> None:
    config = load_validator_config(write(tmp_path, ISSUE_EXAMPLE), environ={})
    assert config.validation.engine == "auto" and config.comparison("orders").engine is None
    assert config.validation.database_parallelism == 2
    chosen = (
        ISSUE_EXAMPLE
        + "    engine: spark\nvalidation: {engine: database, database_parallelism: 4}\n"
    )
    config = load_validator_config(write(tmp_path, chosen), environ={})
    assert config.comparison("orders").engine == "spark"
    assert (config.validation.engine, config.validation.database_parallelism) == ("database", 4)


@pytest.mark.parametrize(
    ("tail", "message"),
    [
        (
            "    engine: pushdown\n",
            "engine: must be one of auto, spark, database, hybrid, local, not 'pushdown'",
        ),
        ("validation: {engine: fast}\n", "must be one of auto, spark, database, hybrid"),
        ("validation: {database_parallelism: 0}\n", "database_parallelism: must be at least 1"),
    ],
)
def test_an_unknown_engine_or_no_parallelism_is_an_error(
    tmp_path: Path, tail: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        load(tmp_path, ISSUE_EXAMPLE + tail)


def test_an_unreadable_table_name_names_its_key_and_the_quoting_fix(tmp_path: Path) -> None:
    text = ISSUE_EXAMPLE.replace("table: shop.orders}", "table: shop.v1.2}")
    with pytest.raises(ConfigError) as excinfo:
        load(tmp_path, text)
    message = str(excinfo.value)
    assert "comparisons[0].target.table" in message and "line 8" in message
    assert "double-quote a part that holds a dot" in message
    quoted = ISSUE_EXAMPLE.replace("table: shop.orders}", """table: 'shop."v1.2"'}""")
    assert load(tmp_path, quoted).comparisons[0].target.table == 'shop."v1.2"'  # type: ignore[attr-defined]


def test_incremental_runs_are_opt_in_and_the_flags_set_them(tmp_path: Path) -> None:
    path = write(tmp_path, ISSUE_EXAMPLE)
    settings = load_validator_config(path, environ={}).validation.incremental
    assert (settings.enabled, settings.force_full, settings.sweep_share) == (False, False, 0.1)
    assert (settings.keeps_state, settings.sweep_runs) == (False, 10)
    flags = {"validation.incremental": "true", "validation.force_full": "true"}
    flagged = load_validator_config(path, flags, environ={}).validation.incremental
    assert (flagged.enabled, flagged.force_full, flagged.keeps_state) == (True, True, True)
    shared = load(tmp_path, ISSUE_EXAMPLE + "validation: {sweep_share: 0.25}\n")
    assert shared.validation.incremental.sweep_runs == 4  # type: ignore[attr-defined]


@pytest.mark.parametrize("share", ["0", "-0.5", "1.5"])
def test_a_sweep_share_outside_0_to_1_is_an_error(tmp_path: Path, share: str) -> None:
    with pytest.raises(ConfigError, match="sweep_share: must be above 0 and at most 1"):
        load(tmp_path, ISSUE_EXAMPLE + f"validation: {{sweep_share: {share}}}\n")


def test_spark_remote_is_a_spark_connect_url(tmp_path: Path) -> None:
    path = write(tmp_path, ISSUE_EXAMPLE)
    assert load_validator_config(path, environ={}).spark.remote is None
    environ = {"REPLCHECK__SPARK__REMOTE": "sc://127.0.0.1:15002"}
    assert load_validator_config(path, environ=environ).spark.remote == "sc://127.0.0.1:15002"
    with pytest.raises(ConfigError, match=r"spark\.remote.*sc://host:port"):
        load_validator_config(path, {"spark.remote": "http://127.0.0.1:15002"}, environ={})
