"""Issue 37, item 8: a result naming keys that neither side has (crafted, or of other
tables) made ``resync --apply`` exit 0 with "every difference is gone". Now those keys are
counted as found on neither side, nothing is written for them, and the run is no success:
exit 2 when the result names nothing that is there, 1 when some of it is.

A PostgreSQL table against its PostgreSQL copy, and a SQLite table (no log: the lake is
read as of its own mark) against a lake the sink wrote."""

from __future__ import annotations

import contextlib
import datetime as dt
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

from cdc_core.capture.position import Position
from cdc_core.capture.source import TableDescription
from cdc_core.lake.sink import LakeSink
from cdc_core.lake.target import LakeEvent, TableBatch
from tests.private_servers import PostgresServer
from tests.validator.resync.helpers import result_for, write_config
from validator.commands.resync import summary_lines
from validator.config import ValidatorConfig, load_validator_config
from validator.resync.run import resync

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

ROWS = [(1, "a"), (2, "b"), (3, "c")]
CRAFTED = [("missing_in_target", ("777",)), ("changed", ("888",))]  # "the source has them"


def _table(server: PostgresServer, database: str, rows: list[tuple[int, str]]) -> None:
    with contextlib.closing(server.connect(database)) as conn:
        conn.execute("CREATE TABLE t (id bigint PRIMARY KEY, v text)")
        conn.cursor().executemany("INSERT INTO t VALUES (%s, %s)", rows)
        conn.commit()


def _config(tmp_path: Path, source: str, target: str, table: str) -> ValidatorConfig:
    comparison = (
        "  - name: t\n"
        f"    source: {{connection: src, table: {table}}}\n"
        f"    target: {{connection: tgt, table: {table}}}\n"
    )
    path = write_config(
        tmp_path / "c.yaml",
        {"src": source, "tgt": target},
        comparison,
        "validation: {recheck_lag_s: 0}",
    )
    return load_validator_config(path, environ={})


def _sqlite_and_lake(work: Path) -> str:
    """A SQLite source of the three rows, and a lake of them the sink wrote; the URL."""
    with contextlib.closing(sqlite3.connect(work / "src.db")) as conn:
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
        conn.executemany("INSERT INTO t VALUES (?, ?)", ROWS)
        conn.commit()
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    at = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    events = [LakeEvent("c", {"id": k, "v": v}, 5, k, "x", at) for k, v in ROWS]
    batch = TableBatch(TableDescription("t", schema, ("id",)), events)
    LakeSink(work / "lake", "p").write([batch], Position.of(5), ["t"])
    return f"sqlite:///{work / 'src.db'}"


@pytest.fixture(params=["database", "lake"])
def config(
    request: pytest.FixtureRequest,
    postgres: PostgresServer,
    postgres_database: Callable[[PostgresServer], str],
    tmp_path: Path,
) -> ValidatorConfig:
    if request.param == "lake":
        source_url = _sqlite_and_lake(tmp_path)
        return _config(tmp_path, source_url, f"lake:{tmp_path / 'lake'}", "t")
    source = postgres_database(postgres)
    _table(postgres, source, ROWS)
    target = postgres_database(postgres)
    _table(postgres, target, [*ROWS[:2], (3, "drifted")])
    return _config(tmp_path, postgres.url(source), postgres.url(target), "public.t")


def test_keys_on_neither_side_are_named_and_never_a_success(
    config: ValidatorConfig, tmp_path: Path
) -> None:
    crafted = resync(
        config, result_for(config.comparison("t"), CRAFTED), apply=True, out_dir=tmp_path / "a"
    )

    (done,) = crafted.comparisons
    assert done.error is None, done.error
    assert (done.not_found, done.actions, crafted.exit_code) == (2, (), 2)
    (line,) = summary_lines(crafted)
    assert "2 of 2 key(s) of the result found on neither side" in line
    assert "every difference is gone" not in line


def test_a_result_partly_of_other_rows_repairs_the_rest_and_says_so(
    config: ValidatorConfig, tmp_path: Path
) -> None:
    mixed = [("changed", ("3",)), *CRAFTED[:1]]
    outcome = resync(
        config, result_for(config.comparison("t"), mixed), apply=True, out_dir=tmp_path / "b"
    )

    (done,) = outcome.comparisons
    assert done.not_found == 1 and outcome.exit_code == 1
    assert "1 of 2 key(s)" in summary_lines(outcome)[0]
