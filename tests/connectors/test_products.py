"""Every product is described once, in its folder's ``product.py``, and the registry reads
those descriptions: their lazy parts resolve, and asking for one product loads only it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cdc_core.errors import ConfigError
from connectors.base import Connector, Lazy, ProductDescription
from connectors.model import RepairDialect
from connectors.registry import (
    PRODUCTS,
    capture_dialect_for,
    captures_by_trigger,
    connector_for,
    log_source_for,
    product_for,
)

CONNECTORS = Path(__file__).resolve().parents[2] / "connectors"


def test_every_product_folder_is_described_once() -> None:
    folders = sorted(p.parent.name for p in CONNECTORS.glob("*/product.py"))
    assert [product.name for product in PRODUCTS] == folders
    schemes = [scheme for product in PRODUCTS for scheme in product.schemes]
    assert len(schemes) == len(set(schemes))


@pytest.mark.parametrize("product", PRODUCTS, ids=[p.name for p in PRODUCTS])
def test_every_part_resolves(product: ProductDescription) -> None:
    if product.connector is not None:
        connector = product.connector.load()
        assert issubclass(connector, Connector)
        assert (connector.name, connector.schemes) == (product.name, product.served_by_connector)
        assert connector.repair is product.repair
    assert isinstance(product.repair, RepairDialect)
    for part in (
        product.log_source,
        product.log_parameters,
        product.quiet_log,
        product.log_status,
        product.capture_dialect,
        product.replica_check,
    ):
        assert part is None or callable(part.load())
    assert product.jdbc_driver is None or product.jdbc_driver.load().class_name


def test_lookups_by_scheme() -> None:
    assert product_for("mysql+pymysql://u@h/db") is product_for("mariadb://u@h/db")
    assert product_for("nosuch://x") is None
    assert captures_by_trigger("sqlite:///x.db") and captures_by_trigger("hana://u@h:1/")
    assert not captures_by_trigger("postgresql://u@h/db")
    assert captures_by_trigger("postgresql://u@h/db?capture=trigger")
    assert not captures_by_trigger("duckdb:///x.db")


def test_unknown_schemes_name_the_known_ones() -> None:
    known = "duckdb, hana, mariadb, mysql, oracle, postgresql, sqlite"
    with pytest.raises(
        ConfigError, match=f"no connector for URL scheme 'postgres'; known: {known}"
    ):
        connector_for("postgres://u@h/db")
    logs = "mariadb, mysql, oracle, postgres, postgresql, synthetic"
    with pytest.raises(ConfigError, match=f"must be one of {logs}$"):
        log_source_for("duckdb:///x.db", None, ["t"])
    captures = "hana, postgres, postgresql, sqlite"
    with pytest.raises(ConfigError, match=f"known: {captures}$"):
        capture_dialect_for("mysql://u@h/db", None, ["t"])


def test_asking_for_one_product_loads_only_it(tmp_path: Path) -> None:
    code = (
        "import sys; from connectors.registry import connector_for, without_log_parameters; "
        f"connector_for('sqlite:///{tmp_path}/x.db'); "
        "without_log_parameters('postgresql://u@h/db?slot=s'); "
        "print(sorted(m for m in sys.modules if m.startswith('connectors.')"
        " and m.endswith(('.connector', '.log_source', '.trigger_dialect'))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "['connectors.sqlite.connector']"


def test_a_lazy_reference_names_a_module_and_an_attribute() -> None:
    with pytest.raises(Exception, match=r"must be 'connectors\.module:name'"):
        Lazy("connectors.sqlite.connector")
