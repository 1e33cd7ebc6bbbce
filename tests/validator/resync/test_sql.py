"""Repair SQL checked against real target databases: values and names that need quoting.

The source is MariaDB; the target is PostgreSQL or MariaDB. Keys and values hold quotes,
backslashes, unicode, statement separators and NULLs, and the columns are called
``user``, ``order`` and ``select``. The dry-run file is run with the product's own client
(``psql``, ``mariadb``) and must leave the target equal to the source; applying does the
same through bound parameters.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.private_servers import MariaDBServer, PostgresServer
from tests.validator.resync.helpers import (
    result_for,
    run_sql_file_mariadb,
    run_sql_file_postgres,
    write_config,
)
from validator.config import load_validator_config
from validator.resync.audit import JSONL_NAME
from validator.resync.run import resync

pytestmark = [pytest.mark.integration, pytest.mark.mariadb, pytest.mark.postgres]

AT = dt.datetime(2025, 3, 1, 12, 0, 0, 123456)
SECRET = "s3cret'value"
INJECTION = "line1\nline2; DROP TABLE odd; --"
SOURCE_ROWS = [
    ("o'brien", 1, "it's a \\ 'quoted' \"text\"", decimal.Decimal("1.50"), AT, 1, b"\x00'\\"),
    ("zoë 😀", 2, "unicode ✓ 日本", decimal.Decimal("2.00"), AT, 0, b""),
    ("plain", 3, None, None, None, None, None),
    ("semi;colon -- x", 4, INJECTION, decimal.Decimal("-4.25"), AT, 1, b"\xff"),
    ("back\\slash", 5, SECRET, decimal.Decimal("5.00"), AT, 0, b"5"),
]
TARGET_ROWS = [
    ("zoë 😀", 2, "stale", decimal.Decimal("2.00"), AT, 1, b""),
    ("plain", 3, "was set", decimal.Decimal("3.00"), AT, 1, b"3"),
    ("back\\slash", 5, SECRET, decimal.Decimal("5.00"), AT, 0, b"5"),
    ("extra'one", 9, "gone", decimal.Decimal("9.00"), AT, 0, b"9"),
]
DIFFERENCES = [
    ("missing_in_target", ("o'brien", "1")),
    ("missing_in_target", ("semi;colon -- x", "4")),
    ("changed", ("zoë 😀", "2")),
    ("changed", ("plain", "3")),
    ("changed", ("back\\slash", "5")),  # stale: already equal when re-read
    ("extra_in_target", ("extra'one", "9")),
]
MARIADB_TABLE = (
    "CREATE TABLE odd (`user` VARCHAR(40) NOT NULL, `order` INT NOT NULL, `select` TEXT,"
    " amount DECIMAL(10,2), at DATETIME(6), flag TINYINT(1), raw VARBINARY(16),"
    " PRIMARY KEY (`user`, `order`))"
)
POSTGRES_TABLE = (
    'CREATE TABLE odd ("user" varchar(40), "order" int, "select" text, amount numeric(10,2),'
    ' at timestamp(6), flag boolean, raw bytea, PRIMARY KEY ("user", "order"))'
)


@dataclass(frozen=True, slots=True)
class Target:
    """A target database of the test: how to read it and how to run a SQL file on it."""

    url: str
    rows: Callable[[], list[tuple[Any, ...]]]
    run_file: Callable[[Path], None]
    # The same in a session that reads string literals the other way from the server's
    # default (backslashes as escapes, or not): the file must not depend on the setting.
    run_file_quoting_otherwise: Callable[[Path], None]


def _mariadb_rows(server: MariaDBServer, database: str) -> list[tuple[Any, ...]]:
    with contextlib.closing(server.connect(database)) as conn, conn.cursor() as cur:
        cur.execute("SELECT * FROM odd ORDER BY `order`")
        return [(*r[:5], None if r[5] is None else bool(r[5]), r[6]) for r in cur.fetchall()]


def _postgres_rows(server: PostgresServer, database: str) -> list[tuple[Any, ...]]:
    with contextlib.closing(server.connect(database)) as conn:
        rows = conn.execute('SELECT * FROM odd ORDER BY "order"').fetchall()
    return [(*r[:6], None if r[6] is None else bytes(r[6])) for r in rows]


def _expected() -> list[tuple[Any, ...]]:
    return [(*r[:5], None if r[5] is None else bool(r[5]), r[6]) for r in SOURCE_ROWS]


@pytest.fixture
def source(mariadb_full: MariaDBServer, mariadb_database: Callable[[MariaDBServer], str]) -> str:
    database = mariadb_database(mariadb_full)
    with contextlib.closing(mariadb_full.connect(database)) as conn, conn.cursor() as cur:
        cur.execute(MARIADB_TABLE)
        cur.executemany("INSERT INTO odd VALUES (%s, %s, %s, %s, %s, %s, %s)", SOURCE_ROWS)
    return mariadb_full.url(database)


@pytest.fixture(params=["postgres", "mariadb"])
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    if request.param == "postgres":
        server: PostgresServer = request.getfixturevalue("postgres")
        database = request.getfixturevalue("postgres_database")(server)
        with contextlib.closing(server.connect(database)) as conn:
            conn.execute(POSTGRES_TABLE)
            with conn.cursor() as cur:
                rows = [(*r[:5], bool(r[5]), r[6]) for r in TARGET_ROWS]
                cur.executemany("INSERT INTO odd VALUES (%s, %s, %s, %s, %s, %s, %s)", rows)
        yield Target(
            server.url(database),
            lambda: _postgres_rows(server, database),
            lambda path: run_sql_file_postgres(server, database, path),
            lambda path: run_sql_file_postgres(server, database, path, other_quoting=True),
        )
        return
    maria: MariaDBServer = request.getfixturevalue("mariadb_full")
    name = request.getfixturevalue("mariadb_database")(maria)
    with contextlib.closing(maria.connect(name)) as conn, conn.cursor() as cur:
        cur.execute(MARIADB_TABLE)
        cur.executemany("INSERT INTO odd VALUES (%s, %s, %s, %s, %s, %s, %s)", TARGET_ROWS)
    yield Target(
        maria.url(name),
        lambda: _mariadb_rows(maria, name),
        lambda path: run_sql_file_mariadb(maria, name, path),
        lambda path: run_sql_file_mariadb(maria, name, path, other_quoting=True),
    )


def _config(tmp_path: Path, source: str, target: Target, sensitive: bool = False) -> Any:
    columns = "{boolean: [flag], sensitive: [select]}" if sensitive else "{boolean: [flag]}"
    comparison = f"""\
  - name: odd
    source: {{connection: src, table: odd}}
    target: {{connection: tgt, table: odd}}
    columns: {columns}"""
    path = write_config(
        tmp_path / "replcheck.yaml",
        {"src": source, "tgt": target.url},
        comparison,
        "validation: {recheck_lag_s: 0}\nresync: {audit: file, batch_size: 2}",
    )
    return load_validator_config(path, environ={})


def test_the_dry_run_file_repairs_the_target_when_run_by_its_client(
    source: str, target: Target, tmp_path: Path
) -> None:
    config = _config(tmp_path, source, target)
    outcome = resync(
        config, result_for(config.comparison("odd"), DIFFERENCES), out_dir=tmp_path / "out"
    )

    (done,) = outcome.comparisons
    assert done.mode.value == "dry_run" and done.error is None
    assert done.action_counts == {"insert": 2, "update": 2, "delete": 1}
    assert done.unchanged == 1
    updates = {a.key: a.columns for a in done.actions if a.kind == "update"}
    assert updates == {
        ("zoë 😀", "2"): ("select", "flag"),
        ("plain", "3"): ("select", "amount", "at", "flag", "raw"),
    }
    assert target.rows() != _expected()  # a dry run changes nothing
    assert outcome.exit_code == 0
    # Issue 37, item 9: the file's literals hold quotes and backslashes; it sets how its
    # session reads them, so a client whose session reads them otherwise runs it the same.
    target.run_file_quoting_otherwise(Path(done.sql_file or ""))
    assert target.rows() == _expected()
    again = resync(
        config, result_for(config.comparison("odd"), DIFFERENCES), out_dir=tmp_path / "again"
    )
    assert again.comparisons[0].actions == () and again.comparisons[0].unchanged == 6


def test_apply_repairs_with_bound_parameters_and_revalidates(
    source: str, target: Target, tmp_path: Path
) -> None:
    config = _config(tmp_path, source, target)
    outcome = resync(
        config, result_for(config.comparison("odd"), DIFFERENCES), apply=True, out_dir=tmp_path
    )

    (done,) = outcome.comparisons
    assert done.mode.value == "applied" and done.error is None
    assert done.action_counts == {"insert": 2, "update": 2, "delete": 1}
    assert done.revalidation.value == "keys"
    assert (done.remaining_total, done.repaired, outcome.exit_code) == (0, True, 0)
    assert target.rows() == _expected()
    (record,) = [json.loads(line) for line in (tmp_path / JSONL_NAME).read_text().splitlines()]
    assert record["mode"] == "applied" and record["keys_count"] == 6
    assert record["actions"] == {"insert": 2, "update": 2, "delete": 1}


def test_sensitive_values_never_reach_the_file_the_outcome_or_the_audit(
    source: str, target: Target, tmp_path: Path
) -> None:
    config = _config(tmp_path, source, target, sensitive=True)
    differences = [("missing_in_target", ("back\\slash", "5")), *DIFFERENCES[:2]]
    with contextlib.suppress(Exception):
        _delete_key_5(target, tmp_path, source)
    outcome = resync(config, result_for(config.comparison("odd"), differences), out_dir=tmp_path)

    sql = Path(outcome.comparisons[0].sql_file or "").read_text(encoding="utf-8")
    assert "/* sensitive column select: bind its value */" in sql
    for secret in (SECRET, "quoted", "DROP TABLE"):
        assert secret not in sql
        assert secret not in json.dumps(outcome.to_dict())
        assert secret not in (tmp_path / JSONL_NAME).read_text(encoding="utf-8")
    applied = resync(
        config, result_for(config.comparison("odd"), differences), apply=True, out_dir=tmp_path
    )
    assert applied.comparisons[0].repaired
    assert {row[2] for row in target.rows()} >= {SECRET}


def _delete_key_5(target: Target, tmp_path: Path, source: str) -> None:
    """Make key 5 missing in the target, so its sensitive value must be inserted."""
    config = _config(tmp_path, source, target)
    statement = tmp_path / "delete.sql"
    quoted = "`" if target.url.startswith("mysql") else '"'
    statement.write_text(f"DELETE FROM odd WHERE {quoted}order{quoted} = 5;\n", encoding="utf-8")
    target.run_file(statement)
    assert config.comparisons[0].name == "odd"
