"""Test-wide hooks. Server fixtures live in tests/servers.py, registered here."""

from __future__ import annotations

import os

import pytest

pytest_plugins = ["tests.servers"]

# Products with no server on this machine kind: their live tests need a URL from outside.
_LIVE_SERVER_URLS = {
    "oracle": ("Oracle", "REPLCHECK_ORACLE_URL"),
    "hana": ("HANA", "REPLCHECK_HANA_URL"),
    "mysql": ("MySQL", "REPLCHECK_MYSQL_URL"),
}


# The slowest files (about 25 s or more each in a clean `make test`, measured in session 48),
# run first: `-n 2 --dist loadfile --no-loadscope-reorder` hands files to the two workers in
# collection order, so a slow file last keeps one worker busy while the other idles. (Without
# --no-loadscope-reorder, pytest-xdist orders files by their number of tests instead.) Order
# only, never which tests run.
SLOW_FIRST = (
    "tests/validator/type_matrix/test_type_matrix.py",
    "tests/generative/sql/test_sql_generative.py",
    "tests/test_cli.py",
    "tests/generative/sql/test_vocabulary_coverage.py",
    "tests/validator/test_expectations.py",
    "tests/merkle/test_spark_contract.py",
    "tests/validator/engines/test_engine_progress.py",
    "tests/validator/test_identifiers_databases.py",
    "tests/validator/commands/test_spark_submit.py",
    "tests/connectors/trigger_capture/test_sqlite.py",
    "tests/validator/engines/spark/test_spark_connect.py",
    "tests/object_store/test_spark_submit_s3.py",
    "tests/cdc_core/pipeline/test_pipeline_sigkill.py",
    "tests/validator/test_identifiers_postgres.py",
    "tests/object_store/test_spark_engines.py",
    "tests/object_store/test_azure_cdc_and_validate.py",
    "tests/connectors/postgres/test_pipeline_e2e.py",
    "tests/connectors/postgres/test_generated_columns.py",
    "tests/object_store/test_lost_commit.py",
    "tests/connectors/database_target/test_key_change_kills.py",
    "tests/cdc_core/pipeline/test_pipeline_crashes.py",
    "tests/generative/oracle/test_oracle_generative.py",
    "tests/connectors/mariadb/test_ddl_refresh.py",
    "tests/connectors/postgres/test_ddl_refresh.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the slowest files first (``SLOW_FIRST``), and skip live Oracle/HANA/MySQL tests,
    with the reason, unless their server URL is set."""
    rank = {path: index for index, path in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))
    for marker, (vendor, variable) in _LIVE_SERVER_URLS.items():
        if os.environ.get(variable):
            continue
        skip = pytest.mark.skip(reason=f"set {variable} to run {vendor} live tests")
        for item in items:
            if item.get_closest_marker(marker) is not None:
                item.add_marker(skip)
