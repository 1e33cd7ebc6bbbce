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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip live Oracle/HANA/MySQL tests, with the reason, unless their server URL is set."""
    for marker, (vendor, variable) in _LIVE_SERVER_URLS.items():
        if os.environ.get(variable):
            continue
        skip = pytest.mark.skip(reason=f"set {variable} to run {vendor} live tests")
        for item in items:
            if item.get_closest_marker(marker) is not None:
                item.add_marker(skip)
