"""Data-quality expectations: GX suites on the target at the agreed position, in the run's
Spark session; failed expectations fail the comparison and the gate; sensitive values masked.

Each test builds a small DuckDB source and its lake copy (changelog layout) and validates
them with the session's Spark fixture; the faults are written into both sides where the
point is data quality (a faithful replica of bad data is in sync, yet fails its suite).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from typer.testing import CliRunner

from cdc_core.lake.layout import LakeTable, append_changelog, meta_fields
from cdc_core.names import COMMIT_POS, COMMIT_TS, OP, SEQ, TXID
from reports.json_schema import validate_result
from validator.cli import app
from validator.config import load_validator_config
from validator.job import validate

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
LAKE_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int32()),
        pa.field("sku", pa.string()),
        pa.field("price", pa.decimal128(10, 2)),
        pa.field("status", pa.string()),
        pa.field("email", pa.string()),
        *meta_fields(),
    ]
)
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
Row = dict[str, Any]

PASSING_SUITE = """\
      - {kind: key_not_null_unique}
      - {kind: not_null, column: sku}
      - {kind: unique, column: sku}
      - {kind: between, column: price, min: 0, max: 1000}
      - {kind: in_set, column: status, values: [new, paid, shipped]}
      - {kind: regex, column: email, pattern: '^user[0-9]+@example[.]com$'}
      - {kind: row_count, tolerance: 0}
"""


def items(count: int = 200) -> list[Row]:
    return [
        {
            "id": i,
            "sku": f"SKU-{i:05d}",
            "price": decimal.Decimal(i * 3) / 4,
            "status": ("new", "paid", "shipped")[i % 3],
            "email": f"user{i}@example.com",
        }
        for i in range(1, count + 1)
    ]


def events(rows: list[Row], op: str, position: int) -> pa.Table:
    meta = {OP: op, COMMIT_POS: position, TXID: str(position), COMMIT_TS: NOW}
    return pa.Table.from_pylist(
        [{**row, **meta, SEQ: seq} for seq, row in enumerate(rows)], LAKE_SCHEMA
    )


def build_shop(workdir: Path, rows: list[Row], suite: str) -> Path:
    """A DuckDB ``items`` table, its lake copy at position 1, and a config comparing them
    with ``suite`` as the comparison's expectations (email is a sensitive column)."""
    workdir.mkdir(parents=True, exist_ok=True)
    source = workdir / "shop.duckdb"
    with duckdb.connect(str(source)) as connection:
        connection.execute(
            "CREATE TABLE items (id INTEGER PRIMARY KEY, sku VARCHAR, price DECIMAL(10,2),"
            " status VARCHAR, email VARCHAR)"
        )
        connection.executemany(
            "INSERT INTO items VALUES (?, ?, ?, ?, ?)", [tuple(r.values()) for r in rows]
        )
    lake = workdir / "lake"
    append_changelog(LakeTable(lake, "shop.items"), events(rows, "r", 1), 1, "1", "test")
    config = workdir / "replcheck.yaml"
    config.write_text(
        f"""\
connections:
  src: {{url: "duckdb:///{source}"}}
  lake: {{lake: "{lake}"}}
comparisons:
  - name: items
    source: {{connection: src, table: items}}
    target: {{connection: lake, table: shop.items}}
    columns: {{sensitive: [email]}}
    expectations:
{suite}validation: {{recheck_lag_s: 0}}
""",
        encoding="utf-8",
    )
    return config


def run(spark: Any, config: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run's document (checked against the result schema) and its one comparison."""
    document = validate(spark, load_validator_config(config, environ={}))
    validate_result(json.loads(json.dumps(document)))
    return document, document["comparisons"][0]


def outcomes(comparison: dict[str, Any]) -> list[tuple[str, bool]]:
    return [(e["description"], e["success"]) for e in comparison["expectations"]]


def test_a_passing_suite_keeps_an_in_sync_comparison_in_sync(spark: Any, tmp_path: Path) -> None:
    document, items_result = run(spark, build_shop(tmp_path, items(), PASSING_SUITE))
    assert document["status"] == "in_sync" and items_result["differences_total"] == 0
    assert outcomes(items_result) == [
        ("key column id not null", True),
        ("key (id) unique", True),
        ("sku not null", True),
        ("sku unique", True),
        ("price between 0 and 1000", True),
        ("status in {new, paid, shipped}", True),
        ("email matches ^user[0-9]+@example[.]com$", True),
        ("row count 200..200 (source 200 rows, tolerance 0 rows)", True),
    ]
    assert [e["expectation"] for e in items_result["expectations"]] == [
        "expect_column_values_to_not_be_null",
        "expect_column_values_to_be_unique",
        "expect_column_values_to_not_be_null",
        "expect_column_values_to_be_unique",
        "expect_column_values_to_be_between",
        "expect_column_values_to_be_in_set",
        "expect_column_values_to_match_regex",
        "expect_table_row_count_to_be_between",
    ]
    assert items_result["expectations"][-1]["observed_value"] == "200"
    assert items_result["expectations"][2]["element_count"] == 200
    assert "expectations" in items_result["timings"]


def bad_quality(rows: list[Row]) -> list[Row]:
    """Faults a faithful replica copies too: a duplicate SKU, a price out of range, two
    malformed (sensitive) emails, an unknown status."""
    rows[6]["sku"] = rows[2]["sku"]
    rows[8]["price"] = decimal.Decimal("5000.00")
    rows[10]["email"] = "<b>not-an-email</b>"
    rows[11]["email"] = "not-an-email-either"
    rows[12]["status"] = "lost"
    return rows


def test_failed_expectations_fail_an_in_sync_comparison_and_the_gate(
    spark: Any, tmp_path: Path
) -> None:
    config = build_shop(tmp_path, bad_quality(items()), PASSING_SUITE)
    document, items_result = run(spark, config)
    assert items_result["differences_total"] == 0  # the replica is faithful...
    assert items_result["status"] == document["status"] == "differences"  # ...but fails
    failed = {e["description"]: e for e in items_result["expectations"] if not e["success"]}
    assert sorted(failed) == [
        "email matches ^user[0-9]+@example[.]com$",
        "price between 0 and 1000",
        "sku unique",
        "status in {new, paid, shipped}",
    ]
    assert failed["sku unique"]["unexpected_count"] == 2
    assert failed["sku unique"]["unexpected_sample"] == ["SKU-00003"]
    assert failed["price between 0 and 1000"]["unexpected_sample"] == ["5000.00"]
    assert failed["status in {new, paid, shipped}"]["unexpected_sample"] == ["lost"]
    bad_emails = failed["email matches ^user[0-9]+@example[.]com$"]
    assert bad_emails["unexpected_count"] == 2 and bad_emails["unexpected_sample"] == ["***"]
    assert "not-an-email" not in json.dumps(document)  # the sensitive value never leaves
    gate = CliRunner().invoke(
        app,
        ["gate", "--config", str(config), "--max-differences", "100", "--out", str(tmp_path)],
    )
    assert gate.exit_code == 1, gate.output
    assert "gate FAILED: 0 difference(s), 100 allowed; 4 expectation(s) failed" in gate.output
    assert "not-an-email" not in (tmp_path / "report.html").read_text(encoding="utf-8")


def test_row_count_tolerance_absolute_and_percent(spark: Any, tmp_path: Path) -> None:
    suite = """\
      - {kind: row_count, tolerance: 3}
      - {kind: row_count, tolerance: 2}
      - {kind: row_count, tolerance: 1.5%}
      - {kind: row_count, tolerance: 1%}
"""
    rows = items()
    config = build_shop(tmp_path, rows, suite)
    lake = LakeTable(tmp_path / "lake", "shop.items")
    append_changelog(lake, events(rows[:3], "d", 2), 2, "2", "test")  # 197 of 200 rows left
    _, items_result = run(spark, config)
    assert outcomes(items_result) == [
        ("row count 197..203 (source 200 rows, tolerance 3 rows)", True),
        ("row count 198..202 (source 200 rows, tolerance 2 rows)", False),
        ("row count 197..203 (source 200 rows, tolerance 1.5%)", True),
        ("row count 198..202 (source 200 rows, tolerance 1%)", False),
    ]
    assert {e["observed_value"] for e in items_result["expectations"]} == {"197"}


COPY_COMPARISON = """\
  - name: copy
    source: {connection: src, table: items}
    target: {connection: src, table: copy}
    expectations:
      - {kind: key_not_null_unique}
validation:"""


def test_a_null_key_in_the_lake_and_a_duplicate_key_in_a_live_target_fail(
    spark: Any, tmp_path: Path
) -> None:
    rows = items(50)
    config = build_shop(tmp_path, rows, "      - {kind: key_not_null_unique}\n")
    nameless = {**rows[0], "id": None, "sku": "SKU-NULL"}
    lake = LakeTable(tmp_path / "lake", "shop.items")
    append_changelog(lake, events([nameless], "c", 2), 2, "2", "test")
    with duckdb.connect(str(tmp_path / "shop.duckdb")) as connection:
        # A live copy without a primary key, so it can hold what a replica must not.
        connection.execute("CREATE TABLE copy AS SELECT * FROM items")
        connection.execute("INSERT INTO copy SELECT * FROM items WHERE id = 7")
    config.write_text(config.read_text().replace("validation:", COPY_COMPARISON))
    document = validate(spark, load_validator_config(config, environ={}))
    validate_result(json.loads(json.dumps(document)))
    lake_result, copy_result = document["comparisons"]
    assert outcomes(lake_result) == [("key column id not null", False), ("key (id) unique", True)]
    assert lake_result["expectations"][0]["unexpected_count"] == 1
    assert lake_result["expectations"][0]["element_count"] == 51
    assert outcomes(copy_result) == [("key column id not null", True), ("key (id) unique", False)]
    assert copy_result["expectations"][1]["unexpected_sample"] == ["7"]
    assert copy_result["expectations"][1]["unexpected_count"] == 2


def test_an_unknown_column_is_a_clear_error_naming_the_line(spark: Any, tmp_path: Path) -> None:
    suite = "      - {kind: not_null, column: sku}\n      - {kind: unique, column: skew}\n"
    document, items_result = run(spark, build_shop(tmp_path, items(20), suite))
    assert document["status"] == items_result["status"] == "error"
    message = items_result["error"]
    assert "line 11, key comparisons[0].expectations[1]" in message
    assert "column 'skew' does not exist in the target lake:shop.items" in message
    assert "its columns are: id, sku, price, status, email" in message


NO_SUITE_RUN = """\
import sys
from pathlib import Path
from validator.config import load_validator_config
from validator.job import validate
from validator.engines.sides.spark.session import build_spark_session

spark = build_spark_session(app_name="replcheck-no-gx")
document = validate(spark, load_validator_config(Path(sys.argv[1]), environ={}))
checked = len(document["comparisons"][0]["expectations"])
print(document["status"], checked, "great_expectations" in sys.modules)
from validator.expectations import evaluate_expectations  # the only importer of GX
print("great_expectations" in sys.modules)
import great_expectations
print("great_expectations" in sys.modules)
"""


def test_a_validation_without_suites_never_imports_great_expectations(tmp_path: Path) -> None:
    """In a fresh interpreter: no suite, no GX import, not even by importing the module that
    runs suites; then importing GX shows (so the check itself can see an import). That a
    suite imports and runs GX, the other tests show."""
    plain = build_shop(tmp_path / "plain", items(20), "")
    plain.write_text(plain.read_text().replace("    expectations:\n", ""))
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(NO_SUITE_RUN))
    finished = subprocess.run(
        [sys.executable, str(script), str(plain)],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert finished.stdout.splitlines() == ["in_sync 0 False", "False", "True"]
