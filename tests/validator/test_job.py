"""Whole comparisons from configuration: the demo's drift is found exactly; errors are clear."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from reports.json_schema import validate_result
from validator.config import load_validator_config
from validator.demo.duckdb import build_demo
from validator.demo.setup import found_differences
from validator.job import validate

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def demo_setup(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return build_demo(tmp_path_factory.mktemp("demo"))


def test_demo_drift_is_found_exactly(spark: Any, demo_setup: Any) -> None:
    config = load_validator_config(demo_setup.config, environ={})
    document = validate(spark, config)
    assert found_differences(document) == demo_setup.expected  # recall and precision 1.0
    assert document["status"] == "differences"
    orders = next(c for c in document["comparisons"] if c["name"] == "orders")
    assert orders["source_position"] is None and orders["target_position"] == "2"
    assert orders["schema_differences"] == []  # the millisecond copy is not a difference
    customers = next(c for c in document["comparisons"] if c["name"] == "customers")
    emails = [
        col
        for d in customers["differences"]
        if d["kind"] == "changed"
        for col in d["columns"]
        if col["column"] == "email"
    ]
    assert emails == [{"column": "email", "source": "***", "target": "***"}]
    validate_result(document)  # the documented result.json schema


def _config(tmp_path: Path, demo: Any, comparison: str) -> Path:
    text = demo.config.read_text().split("comparisons:")[0] + "comparisons:\n" + comparison
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


def test_a_missing_table_is_an_error_result(spark: Any, demo_setup: Any, tmp_path: Path) -> None:
    path = _config(
        tmp_path,
        demo_setup,
        """\
  - name: ghost
    source: {connection: demo_src, table: ghosts}
    target: {connection: lake, table: shop.ghosts}
""",
    )
    document = validate(spark, load_validator_config(path, environ={}))
    assert document["status"] == "error"
    assert "table 'ghosts' not found" in document["comparisons"][0]["error"]


def test_a_table_without_key_is_compared_by_the_columns_both_sides_have(
    spark: Any, demo_setup: Any, tmp_path: Path
) -> None:
    source = Path(demo_setup.config.read_text().split("duckdb:///")[1].split('"')[0])
    with duckdb.connect(str(source)) as connection:
        connection.execute("CREATE TABLE IF NOT EXISTS keyless AS SELECT 1 AS a")
    path = _config(
        tmp_path,
        demo_setup,
        """\
  - name: keyless
    source: {connection: demo_src, table: keyless}
    target: {connection: lake, table: shop.customers}
""",
    )
    document = validate(spark, load_validator_config(path, environ={}))
    error = document["comparisons"][0]["error"]
    assert "has no key, and none of its columns is comparable on both sides" in error
    path = _config(
        tmp_path,
        demo_setup,
        """\
  - name: wrong_key
    source: {connection: demo_src, table: customers}
    target: {connection: lake, table: shop.customers}
    key: [customer_no]
""",
    )
    document = validate(spark, load_validator_config(path, environ={}))
    assert "key columns ['customer_no'] do not exist" in document["comparisons"][0]["error"]
