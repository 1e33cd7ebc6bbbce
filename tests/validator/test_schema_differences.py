"""A schema difference is a difference: a column on one side only, or of types that cannot
be compared, makes a comparison differ and fails the gate, unless the config excludes it."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from merkle import types as lt
from merkle.options import ComparisonOptions
from tests.private_servers import PostgresServer
from validator import cli
from validator.reconcile import reconcile
from validator.result import ComparisonResult, SchemaDifference, Status, with_schema_differences

ROWS = 50
# Each table: its DDL and the values of row i (PostgreSQL's generate_series fills it).
KEYED = "id int PRIMARY KEY, amount numeric(10,2)"
SOURCE = (f"CREATE TABLE orders ({KEYED}, note text)", "i, i + 0.25, 'note ' || i")
LACKING = (f"CREATE TABLE orders ({KEYED})", "i, i + 0.25")
EXTRA = (
    f"CREATE TABLE orders ({KEYED}, note text, loaded_at timestamp)",
    "i, i + 0.25, 'note ' || i, now()",
)


def test_reconcile_gives_each_schema_difference_its_kind() -> None:
    found = reconcile(
        {"id": lt.IntegerType(), "gone": lt.DateType(), "b": lt.BytesType(), "odd": None},
        {"id": lt.IntegerType(), "b": lt.DateType(), "odd": lt.StringType(), "new": lt.DateType()},
        ["id"],
        {},
        [],
        [],
        ComparisonOptions(),
    )
    assert {(d.column, d.kind) for d in found.schema_differences} == {
        ("gone", "missing_in_target"),
        ("new", "extra_in_target"),
        ("b", "changed"),
        ("odd", "changed"),
    }


def test_an_excluded_column_is_no_difference_on_either_side() -> None:
    found = reconcile(
        {"id": lt.IntegerType(), "gone": lt.DateType()},
        {"id": lt.IntegerType(), "new": lt.DateType()},
        ["id"],
        {},
        ["gone", "new"],
        [],
        ComparisonOptions(),
    )
    assert found.schema_differences == ()
    assert found.layout.names == ("id",)


def test_a_schema_difference_of_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="kind"):
        SchemaDifference("note", "missing in target", "missing_column")


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (Status.IN_SYNC, Status.DIFFERENCES),
        (Status.DIFFERENCES, Status.DIFFERENCES),
        (Status.ERROR, Status.ERROR),
    ],
)
def test_a_schema_difference_makes_an_in_sync_comparison_differ(
    status: Status, expected: Status
) -> None:
    result = ComparisonResult("orders", status, "src.orders", "dst.orders")
    gone = SchemaDifference("note", "missing in target", "missing_in_target")
    marked = with_schema_differences(result, (gone,))
    assert (marked.status, marked.schema_differences) == (expected, (gone,))
    assert with_schema_differences(result, ()).status is status


def gate_document(schema_differences: list[dict[str, str]], rows: int = 0) -> dict[str, Any]:
    comparison = {"differences_total": rows, "schema_differences": schema_differences}
    return {"status": "differences", "comparisons": [comparison]}


def test_the_gate_counts_a_schema_difference_and_never_tolerates_it() -> None:
    gone = {"column": "note", "problem": "missing in target", "kind": "missing_in_target"}
    code, verdict = cli.gate_verdict(gate_document([gone], rows=2), 5)
    assert code == cli.EXIT_DIFFERENCES
    assert verdict == (
        "gate FAILED: 3 difference(s), 5 allowed; 1 of them schema difference(s), never allowed"
    )
    old = {"column": "note", "problem": "extra in target"}  # written before kinds existed
    assert cli.gate_verdict(gate_document([old]), 0)[0] == cli.EXIT_DIFFERENCES
    assert cli.gate_verdict(gate_document([], rows=2), 5)[0] == cli.EXIT_OK


# --- real servers: a PostgreSQL source table and a target database table ---------------


def _databases(
    postgres: PostgresServer, create: Callable[[PostgresServer], str], target: tuple[str, str]
) -> tuple[str, str]:
    """Source and target URLs: the source table and ``target`` in two new databases."""
    source_db, target_db = create(postgres), create(postgres)
    for database, (ddl, values) in ((source_db, SOURCE), (target_db, target)):
        with contextlib.closing(postgres.connect(database)) as conn:
            conn.execute(ddl)
            conn.execute(f"INSERT INTO orders SELECT {values} FROM generate_series(1, {ROWS}) i")
    return postgres.url(source_db), postgres.url(target_db)


def _config(tmp_path: Path, urls: tuple[str, str], columns: str) -> str:
    path = tmp_path / "replcheck.yaml"
    path.write_text(
        f"connections:\n  src: {{url: '{urls[0]}'}}\n  dst: {{url: '{urls[1]}'}}\n"
        "comparisons:\n  - name: orders\n    source: {connection: src, table: orders}\n"
        f"    target: {{connection: dst, table: orders}}\n    engine: database\n{columns}"
    )
    return str(path)


def _validate_and_gate(tmp_path: Path, config: str) -> tuple[int, int, dict[str, Any]]:
    """``validate``'s exit code, ``gate --max-differences 5``'s, and the comparison."""
    validated = cli.run(["validate", "-c", config, "--out", str(tmp_path / "validate")])
    gated = cli.run(
        ["gate", "-c", config, "--max-differences", "5", "--out", str(tmp_path / "gate")]
    )
    result = json.loads((tmp_path / "validate" / "result.json").read_text())
    return validated, gated, result["comparisons"][0]


@pytest.mark.integration
@pytest.mark.postgres
@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (LACKING, {"column": "note", "problem": "missing in target", "kind": "missing_in_target"}),
        (EXTRA, {"column": "loaded_at", "problem": "extra in target", "kind": "extra_in_target"}),
    ],
    ids=["lacking_a_column", "extra_column"],
)
def test_a_column_on_one_side_only_fails_validate_and_gate(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    postgres: PostgresServer,
    postgres_database: Callable[[PostgresServer], str],
    target: tuple[str, str],
    expected: dict[str, str],
) -> None:
    urls = _databases(postgres, postgres_database, target)
    validated, gated, comparison = _validate_and_gate(tmp_path, _config(tmp_path, urls, ""))
    assert (validated, gated) == (cli.EXIT_DIFFERENCES, cli.EXIT_DIFFERENCES)
    terminal = capsys.readouterr().out
    assert f" column {expected['kind']}: 1" in terminal  # the summary line, by kind
    assert "gate FAILED: 1 difference(s), 5 allowed;" in terminal
    assert comparison["error"] is None
    assert comparison["status"] == "differences"
    assert comparison["schema_differences"] == [expected]
    assert comparison["differences_total"] == 0  # every compared row is equal


@pytest.mark.integration
@pytest.mark.postgres
@pytest.mark.parametrize(
    ("target", "excluded"),
    [(LACKING, "note"), (EXTRA, "loaded_at")],
    ids=["lacking_a_column", "extra_column"],
)
def test_a_column_excluded_by_name_is_no_difference(
    tmp_path: Path,
    postgres: PostgresServer,
    postgres_database: Callable[[PostgresServer], str],
    target: tuple[str, str],
    excluded: str,
) -> None:
    urls = _databases(postgres, postgres_database, target)
    config = _config(tmp_path, urls, f"    columns: {{exclude: [{excluded}]}}\n")
    validated, gated, comparison = _validate_and_gate(tmp_path, config)
    assert (validated, gated) == (cli.EXIT_OK, cli.EXIT_OK)
    assert comparison["status"] == "in_sync"
    assert comparison["schema_differences"] == []
    assert comparison["source_rows"] == comparison["target_rows"] == ROWS
