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


# The slowest files (about 35 s or more each in a clean `make test`), run first: `-n 2 --dist
# loadfile` hands files to the two workers in collection order, so a slow file last keeps
# one worker busy while the other idles (a 40 s tail was measured). Order only, never
# which tests run.
SLOW_FIRST = (
    "tests/validator/type_matrix/test_type_matrix.py",
    "tests/generative/sql/test_sql_generative.py",
    "tests/test_cli.py",
    "tests/connectors/mariadb/test_ddl_refresh.py",
    "tests/connectors/postgres/test_ddl_refresh.py",
    "tests/validator/test_expectations.py",
    "tests/generative/sql/test_vocabulary_coverage.py",
    "tests/merkle/test_spark_contract.py",
    "tests/validator/test_identifiers_postgres.py",
    "tests/validator/test_identifiers_databases.py",
    "tests/validator/commands/test_spark_submit.py",
    "tests/cdc_core/pipeline/test_pipeline_sigkill.py",
    "tests/validator/engines/test_engine_progress.py",
    "tests/cdc_core/pipeline/test_pipeline_crashes.py",
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
