"""The cross-database type matrix: no false differences, and every one-unit change found.

The cases of ``type_matrix.py`` are stored in one wide table per product —
MariaDB, PostgreSQL, DuckDB and a lake changelog written from Python — as the same logical
values in each product's native types. Each table has two halves holding the same values;
the targets' copy (``replica``) carries each case's one-unit change in its own row of the
second half. Six pairs are validated in one ``validate`` call, and for each pair and case
both sides store (``compared_cases``):

- the column is comparable (no schema difference) and its first half is reported equal;
- its second half differs from the first by exactly its change (key and column named);
- over the whole pair, exactly the changes are reported, nothing missing or extra, and
  every changed row names a column (a row whose hashes differ while the values read back
  agree means a reader hashed a value unlike the others: ``NO_COLUMN_NAMED``).

Known product problems are strict xfails on the single (pair, case) they affect, with the
cause; see ``KNOWN_FALSE_DIFFERENCES`` and ``KNOWN_MISSED_CHANGES``. Pairs have no
``timestamp_precision``: reconciliation compares DATETIME(6) with TIMESTAMP(3) at 3 digits,
rounding the finer side by the rule of the product that stored the coarser one
(PostgreSQL counts from 2000, DuckDB from 1970). MariaDB's TINYINT(1) is compared with
booleans through ``columns.boolean``. A control comparison (``CONTROL``) of MariaDB with
PostgreSQL configured with neither shows what each one prevents.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from cdc_core.lake.layout import LakeTable, append_changelog, meta_fields
from cdc_core.names import COMMIT_POS, COMMIT_TS, OP, SEQ, TXID
from merkle.canonical import reduce_micros
from merkle.options import TimeRounding
from tests.private_servers import MariaDBServer, PostgresServer, drop_postgres_database
from tests.validator.type_matrix.type_matrix import (
    CASES,
    POSTGRES_TYPES,
    ROWS,
    Case,
    change_rows,
    duckdb_millis,
    logical_rows,
    postgres_millis,
)
from validator.config import load_validator_config
from validator.job import validate

pytestmark = [pytest.mark.integration, pytest.mark.mariadb, pytest.mark.postgres, pytest.mark.spark]

PAIRS = (
    ("mariadb", "postgres"),
    ("mariadb", "duckdb"),
    ("postgres", "duckdb"),
    ("mariadb", "lake"),
    ("duckdb", "lake"),
    ("postgres", "lake"),
)
Pair = tuple[str, str]

# (source, target, column) -> why replcheck reports a difference the data does not have.
KNOWN_FALSE_DIFFERENCES: dict[tuple[str, str, str], str] = {}
# (source, target, column) -> why replcheck misses (or cannot see) a one-unit change.
KNOWN_MISSED_CHANGES: dict[tuple[str, str, str], str] = {}

# MariaDB vs PostgreSQL with the contract's old fixed rule (half up on the wall clock) and
# no boolean columns: exact half milliseconds before 2000 differ, TINYINT(1) is no boolean.
CONTROL = "mariadb_vs_postgres_control"
BOOLEAN_COLUMN = "c_tinyint1_bool"
HALF_COLUMN = "c_datetime6_vs_ms_half"

# The lake's commits claim a position beyond any source snapshot (its high-water mark),
# while every event sits at a small position, so the whole lake is compared.
LAKE_HIGH_WATER_MARK = 1 << 62
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


# --- filling each product -----------------------------------------------------------------


def _mariadb_value(value: Any) -> Any:
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)  # the session runs in UTC
    return value


def cases_in(*products: str) -> list[Case]:
    """The cases every one of ``products`` stores."""
    return [c for c in CASES if all(c.stored_in(product) for product in products)]


def fill_mariadb(server: MariaDBServer, database: str) -> None:
    cases = cases_in("mariadb")
    columns = ", ".join(f"`{c.name}` {c.mariadb}" for c in cases)
    rows = [(row["id"], *[_mariadb_value(row[c.name]) for c in cases]) for row in logical_rows()]
    marks = ", ".join(["%s"] * (len(cases) + 1))
    with contextlib.closing(server.connect(database)) as conn, conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
        cur.execute(
            f"CREATE TABLE matrix (id INT PRIMARY KEY, {columns}) DEFAULT CHARSET=utf8mb4"
            " COLLATE=utf8mb4_bin"
        )
        cur.executemany(f"INSERT INTO matrix VALUES ({marks})", rows)


def fill_postgres(server: PostgresServer, database: str) -> None:
    cases = cases_in("postgres")
    columns = ", ".join(f'"{c.name}" {c.postgres}' for c in cases)
    marks = ", ".join(["%s", *[f"%s::{c.postgres}" for c in cases]])
    with contextlib.closing(server.connect(database)) as conn:
        for statement in POSTGRES_TYPES:
            conn.execute(statement)
        for table, replica in (("matrix", False), ("replica", True)):
            conn.execute(f"CREATE TABLE {table} (id integer PRIMARY KEY, {columns})")
            rows = [(r["id"], *[r[c.name] for c in cases]) for r in logical_rows(replica)]
            with conn.cursor() as cur:
                cur.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)


def fill_duckdb(path: Path) -> None:
    cases = cases_in("duckdb")
    columns = ", ".join(f'"{c.name}" {c.duckdb}' for c in cases)
    marks = ", ".join(["?", *[f"CAST(? AS {c.duckdb})" for c in cases]])
    with duckdb.connect(str(path)) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        for table, replica in (("matrix", False), ("replica", True)):
            conn.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, {columns})")
            rows = [[r["id"], *[r[c.name] for c in cases]] for r in logical_rows(replica)]
            conn.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)


LAKE_CASES = cases_in("lake")
LAKE_SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        *[pa.field(c.name, c.arrow) for c in LAKE_CASES],
        *meta_fields(),
    ]
)


def _lake_events(rows: list[dict[str, Any]], op: str, position: int) -> pa.Table:
    events = [
        {
            "id": row["id"],
            **{c.name: None if row[c.name] is None else c.to_lake(row[c.name]) for c in LAKE_CASES},
            OP: op,
            COMMIT_POS: position,
            SEQ: seq,
            TXID: str(position),
            COMMIT_TS: NOW,
        }
        for seq, row in enumerate(rows)
    ]
    return pa.Table.from_pylist(events, LAKE_SCHEMA)


def fill_lake(lake: Path) -> None:
    """``shop.replica``: every row inserted, then, in a later commit, an update of each
    changed row (the newest event of a key wins)."""
    table = LakeTable(lake, "shop.replica")
    rows = logical_rows()
    append_changelog(table, _lake_events(rows, "c", 1), LAKE_HIGH_WATER_MARK, "1", "matrix")
    stored = {case.name for case in LAKE_CASES}
    changed = {row for name, row in change_rows().items() if name in stored}
    updates = [r for r in logical_rows(replica=True) if r["id"] - ROWS in changed]
    assert len(updates) == len(LAKE_CASES)
    append_changelog(table, _lake_events(updates, "u", 2), LAKE_HIGH_WATER_MARK + 1, "2", "matrix")


@contextlib.contextmanager
def matrix_database(mariadb: MariaDBServer, postgres: PostgresServer) -> Iterator[str]:
    """A database of one fresh name on both servers, dropped afterwards."""
    database = f"t_{uuid.uuid4().hex[:12]}"
    with contextlib.closing(mariadb.connect(None)) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{database}`")
    with contextlib.closing(postgres.connect("postgres")) as conn:
        conn.execute(f'CREATE DATABASE "{database}"')
    try:
        yield database
    finally:
        with contextlib.closing(mariadb.connect(None)) as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{database}`")
        drop_postgres_database(postgres, database)


# --- one validate call for every pair -----------------------------------------------------


# The same lake pairs in the local engine (source digests in SQL, the lake's in DuckDB),
# without the cases the source's digest SQL refuses (``Case.not_in_sql``: JSON).
LOCAL_PAIRS = (("mariadb", "lake"), ("postgres", "lake"))
NOT_IN_SQL = tuple(c.name for c in CASES if c.not_in_sql)


def comparison_name(pair: Pair) -> str:
    return f"{pair[0]}_vs_{pair[1]}"


def local_name(pair: Pair) -> str:
    return f"{comparison_name(pair)}_local"


def compared_cases(pair: Pair, sql: bool = False) -> list[Case]:
    """The cases a comparison of ``pair`` compares: those both sides store, but (with
    ``sql``) not those the digest SQL refuses."""
    return [case for case in cases_in(*pair) if not (sql and case.not_in_sql)]


def not_in_pair(pair: Pair, sql: bool = False) -> list[str]:
    """The cases a comparison of ``pair`` excludes (``compared_cases``)."""
    kept = {c.name for c in compared_cases(pair, sql)}
    return [c.name for c in CASES if c.name not in kept]


def columns_section(pair: Pair, sql: bool = False, boolean: bool = True) -> str:
    """A comparison's ``columns:`` line for ``pair``."""
    parts = [f"boolean: [{BOOLEAN_COLUMN}]"] if boolean else []
    excluded = not_in_pair(pair, sql)
    parts += [f"exclude: [{', '.join(excluded)}]"] if excluded else []
    return f"    columns: {{{', '.join(parts)}}}"


def write_config(path: Path, urls: dict[str, str], lake: Path) -> Path:
    lines = ["connections:"]
    lines += [f'  {name}: {{url: "{url}"}}' for name, url in urls.items()]
    lines += [f'  lake: {{lake: "{lake}"}}', "comparisons:"]
    for source, target in PAIRS:
        lines += [
            f"  - name: {comparison_name((source, target))}",
            f"    source: {{connection: {source}, table: matrix}}",
            f"    target: {{connection: {target}, table: "
            + ("shop.replica" if target == "lake" else "replica")
            + "}",
            columns_section((source, target)),
            "    options: {trim_char: true}",
        ]
    for source, target in LOCAL_PAIRS:  # the local engine: DuckDB on the lake (no JSON: the
        # source databases' digest SQL hashes none)
        lines += [
            f"  - name: {local_name((source, target))}",
            f"    source: {{connection: {source}, table: matrix}}",
            "    target: {connection: lake, table: shop.replica}",
            columns_section((source, target), sql=True),
            "    options: {trim_char: true}",
            "    engine: local",
        ]
    lines += [
        f"  - name: {CONTROL}",
        "    source: {connection: mariadb, table: matrix}",
        "    target: {connection: postgres, table: replica}",
        columns_section(("mariadb", "postgres"), boolean=False),
        "    options: {trim_char: true, timestamp_rounding: round}",
    ]
    # The tables are written before the validation and never change: no re-check wait.
    lines.append("validation: {lake_wait_timeout_s: 5, recheck_lag_s: 0}")
    path.write_text("\n".join(lines) + "\n")
    return path


# About 140 s, once per run: every product's table of every matrix case, the lake the real
# pipeline writes from them, and one validation holding every pair's comparisons (one
# Spark session, one job per engine), which all the module's tests then read.
@pytest.fixture(scope="module")
def results(
    spark: Any,
    mariadb_full: MariaDBServer,
    postgres: PostgresServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, dict[str, Any]]]:
    """Every pair's comparison result, by comparison name (one ``validate`` call).

    Over 60 s (90 s in a clean CI run), on purpose: one validate of the six pairs and the
    two local ones, over the 107 type cases (a column per case and product) and their rows,
    through Spark (this worker's JVM starts here, as the file runs first). Every test of the
    file reads it; split per pair it would cost more, not less."""
    workdir = tmp_path_factory.mktemp("type_matrix")
    with matrix_database(mariadb_full, postgres) as database:
        fill_mariadb(mariadb_full, database)
        fill_postgres(postgres, database)
        fill_duckdb(workdir / "matrix.duckdb")
        fill_lake(workdir / "lake")
        urls = {
            "mariadb": mariadb_full.url(database),
            "postgres": postgres.url(database),
            "duckdb": f"duckdb:///{workdir / 'matrix.duckdb'}",
        }
        config = write_config(workdir / "replcheck.yaml", urls, workdir / "lake")
        document = validate(spark, load_validator_config(config, environ={}))
        yield {c["name"]: c for c in document["comparisons"]}


# --- expectations, with the known problems as strict xfails -------------------------------


def _pair_id(pair: Pair) -> str:
    return f"{pair[0]}-{pair[1]}"


def _pair_params(known: list[dict[tuple[str, str, str], str]]) -> list[Any]:
    params = []
    for pair in PAIRS:
        reasons = sorted({r for table in known for (s, t, _), r in table.items() if (s, t) == pair})
        marks = [pytest.mark.xfail(strict=True, reason=" | ".join(reasons))] if reasons else []
        params.append(pytest.param(pair, marks=marks, id=_pair_id(pair)))
    return params


def _case_params(known: dict[tuple[str, str, str], str]) -> list[Any]:
    params = []
    for pair in PAIRS:
        for case in compared_cases(pair):
            reason = known.get((*pair, case.name))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            params.append(
                pytest.param(pair, case.name, marks=marks, id=f"{_pair_id(pair)}-{case.name}")
            )
    return params


def really_different(pair: Pair, column: str) -> set[int]:
    """Rows whose stored values really differ although both sides got the same logical
    value: PostgreSQL and DuckDB round an exact half before 2000 differently (see
    ``postgres_millis`` / ``duckdb_millis``). Reporting them is right."""
    if pair != ("postgres", "duckdb") or column != "c_datetime6_vs_ms_half":
        return set()
    source, target = logical_rows(), logical_rows(replica=True)
    return {
        s["id"]
        for s, t in zip(source, target, strict=True)
        if s[column] is not None and postgres_millis(s[column]) != duckdb_millis(t[column])
    }


def expected_cells(pair: Pair) -> set[tuple[str, str]]:
    """(key, column) of every difference a pair must report: each case's change in the
    second half, and the values that really differ."""
    compared = {case.name for case in compared_cases(pair)}
    cells = {(str(ROWS + row), column) for column, row in change_rows().items()}
    cells = {cell for cell in cells if cell[1] in compared}
    for case in compared_cases(pair):
        cells |= {(str(row), case.name) for row in really_different(pair, case.name)}
    return cells


# The column of a changed row that names none: its row hashes differ but the values read
# back to name the column agree, so a reader hashed a value unlike the others.
NO_COLUMN_NAMED = "<no column named>"


def changed_cells(comparison: dict[str, Any]) -> set[tuple[str, str]]:
    """(key, column) of every changed value a comparison reports (``NO_COLUMN_NAMED``
    for a changed row that names no column, so that it fails every expectation)."""
    return {
        (difference["key"][0], column)
        for difference in comparison["differences"]
        if difference["kind"] == "changed"
        for column in [c["column"] for c in difference["columns"]] or [NO_COLUMN_NAMED]
    }


def _keys_in(cells: set[tuple[str, str]], column: str, second_half: bool) -> set[str]:
    return {key for key, name in cells if name == column and (int(key) > ROWS) == second_half}


def _ran(results: dict[str, dict[str, Any]], pair: Pair) -> dict[str, Any]:
    comparison = results[comparison_name(pair)]
    assert comparison["error"] is None, comparison["error"]
    return comparison


# --- the tests ------------------------------------------------------------------------------


def test_the_matrix_is_wide_and_every_case_has_its_own_changed_row() -> None:
    assert len(CASES) >= 25
    rows = change_rows()
    assert sorted(rows) == sorted(c.name for c in CASES)
    assert len(set(rows.values())) == len(CASES) <= ROWS


@pytest.mark.parametrize("pair", _pair_params([KNOWN_FALSE_DIFFERENCES, KNOWN_MISSED_CHANGES]))
def test_exactly_the_changed_values_are_reported(
    results: dict[str, dict[str, Any]], pair: Pair
) -> None:
    comparison = _ran(results, pair)
    assert comparison["source_rows"] == comparison["target_rows"] == 2 * ROWS
    assert comparison["schema_differences"] == []
    assert {d["kind"] for d in comparison["differences"]} == {"changed"}
    assert changed_cells(comparison) == expected_cells(pair)


@pytest.mark.parametrize(("pair", "column"), _case_params(KNOWN_FALSE_DIFFERENCES))
def test_no_false_difference_in_a_column(
    results: dict[str, dict[str, Any]], pair: Pair, column: str
) -> None:
    comparison = _ran(results, pair)
    assert column not in {d["column"] for d in comparison["schema_differences"]}
    reported = _keys_in(changed_cells(comparison), column, second_half=False)
    assert reported == {str(row) for row in really_different(pair, column) if row <= ROWS}


@pytest.mark.parametrize(("pair", "column"), _case_params(KNOWN_MISSED_CHANGES))
def test_a_one_unit_change_is_found_in_its_column(
    results: dict[str, dict[str, Any]], pair: Pair, column: str
) -> None:
    """The second half differs from the first by exactly the change (a false difference
    of the first half, tested above, repeats in the second)."""
    comparison = _ran(results, pair)
    cells = changed_cells(comparison)
    first = {str(int(key) + ROWS) for key in _keys_in(cells, column, second_half=False)}
    changed = str(ROWS + change_rows()[column])
    assert _keys_in(cells, column, second_half=True) == first | {changed}


@pytest.mark.parametrize("pair", LOCAL_PAIRS, ids=_pair_id)
def test_the_local_engine_reports_exactly_what_the_spark_engine_reports(
    results: dict[str, dict[str, Any]], pair: Pair
) -> None:
    local = results[local_name(pair)]
    assert local["error"] is None, local["error"]
    assert local["engine"] == "local" and _ran(results, pair)["engine"] == "spark"
    assert local["source_rows"] == local["target_rows"] == 2 * ROWS
    expected = {cell for cell in expected_cells(pair) if cell[1] not in NOT_IN_SQL}
    assert changed_cells(local) == expected
    in_spark = {cell for cell in changed_cells(_ran(results, pair)) if cell[1] not in NOT_IN_SQL}
    assert changed_cells(local) == in_spark


def test_without_the_product_rule_and_boolean_columns_the_control_differs(
    results: dict[str, dict[str, Any]],
) -> None:
    """The xfails this matrix used to carry come back with the old fixed rule, exactly on
    the exact halves PostgreSQL rounds otherwise, and TINYINT(1) stays an integer."""
    comparison = results[CONTROL]
    assert comparison["error"] is None, comparison["error"]
    problems = {d["column"]: d["problem"] for d in comparison["schema_differences"]}
    assert problems.keys() == {BOOLEAN_COLUMN}
    assert f"columns: {{boolean: [{BOOLEAN_COLUMN}]}}" in problems[BOOLEAN_COLUMN]
    rows = [r for r in logical_rows() if r[HALF_COLUMN] is not None and r["id"] <= ROWS]
    disagree = {
        str(r["id"])
        for r in rows
        if postgres_millis(r[HALF_COLUMN]) != _half_up_millis(r[HALF_COLUMN])
    }
    assert disagree  # else the control could not show anything
    assert _keys_in(changed_cells(comparison), HALF_COLUMN, second_half=False) == disagree


def _half_up_millis(value: dt.datetime) -> dt.datetime:
    micros = (value - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1)
    rounded = reduce_micros(micros, 3, TimeRounding.ROUND)
    return dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=rounded)
