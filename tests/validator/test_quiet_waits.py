"""Waits nobody explains (issue 38, item 3): a comparison of two databases re-checks only
what differs, so one with no differences sleeps not at all; a wait for the lake says
nothing unless it lasts."""

from __future__ import annotations

import contextlib
import logging
import types
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.private_servers import MariaDBServer, PostgresServer
from validator import positions
from validator.config import load_validator_config
from validator.job import validate

ROWS = [(i, f"name {i}") for i in range(1, 51)]


@pytest.fixture
def equal_tables(
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    postgres: PostgresServer,
    postgres_database: Callable[[PostgresServer], str],
) -> tuple[str, str]:
    """The same rows in a MariaDB table and in a PostgreSQL table nothing feeds."""
    source_db, target_db = mariadb_database(mariadb_full), postgres_database(postgres)
    with contextlib.closing(mariadb_full.connect(source_db)) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(20))")
        cur.executemany("INSERT INTO t VALUES (%s, %s)", ROWS)
    with contextlib.closing(postgres.connect(target_db)) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, name varchar(20))")
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO t VALUES (%s, %s)", ROWS)
    return mariadb_full.url(source_db), postgres.url(target_db)


@pytest.mark.integration
@pytest.mark.mariadb
@pytest.mark.postgres
def test_a_comparison_with_no_differences_involves_no_sleep(
    equal_tables: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source_url, target_url = equal_tables
    path = tmp_path / "replcheck.yaml"
    path.write_text(f"""\
connections:
  src: {{url: "{source_url}"}}
  dst: {{url: "{target_url}"}}
comparisons:
  - {{name: t, source: {{connection: src, table: t}}, target: {{connection: dst, table: t}}}}
""")  # replication: unknown and recheck_lag_s: 5, the defaults
    slept: list[float] = []
    monkeypatch.setattr("time.sleep", slept.append)
    monkeypatch.setattr("validator.recheck.confirm.__defaults__", (slept.append,))
    document = validate(None, load_validator_config(path, environ={}))
    assert document["comparisons"][0]["status"] == "in_sync", document["comparisons"][0]
    assert slept == []


class FakeClock:
    """A monotonic clock that moves only when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def _wait(
    clock: FakeClock, reached_at: float, monkeypatch: pytest.MonkeyPatch
) -> Callable[[], int]:
    """A lake whose high-water mark reaches 10 once ``reached_at`` seconds have passed."""
    monkeypatch.setattr(positions, "time", types.SimpleNamespace(monotonic=clock.monotonic))
    start = clock.now
    return lambda: 10 if clock.now - start >= reached_at else 5


@pytest.mark.parametrize("reached_at", [0.0, 1.0])
def test_a_wait_that_ends_at_once_says_nothing(
    reached_at: float, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    mark = _wait(clock, reached_at, monkeypatch)
    with caplog.at_level(logging.INFO, logger=positions.__name__):
        assert positions.wait_for_lake(mark, 10, 300, "shop.t", sleep=clock.sleep) == 10
    assert [r.getMessage() for r in caplog.records if "waiting" in r.getMessage()] == []


def test_a_wait_that_lasts_says_what_it_waits_for_and_the_time_left(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    clock = FakeClock()
    mark = _wait(clock, 12.0, monkeypatch)
    with caplog.at_level(logging.INFO, logger=positions.__name__):
        positions.wait_for_lake(mark, 10, 300, "shop.t", sleep=clock.sleep)
    said = [r.getMessage() for r in caplog.records if "waiting" in r.getMessage()]
    assert len(said) == 2  # after 2 s, then 5 s later; the mark arrives at 12 s
    assert all("lake table shop.t" in line and "its high-water mark is 5" in line for line in said)
    assert [line.rsplit("; ", 1)[1] for line in said] == ["298 s left", "293 s left"]
