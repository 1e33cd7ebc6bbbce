"""A table without a key: its rows are located by all their columns, and equal rows are
kept apart by their copy number (``cdc_core.rebuild.copies``)."""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from cdc_core.capture.filters import TableFilter
from cdc_core.capture.position import Position
from cdc_core.lake.layout import LakeTable, RefreshMarks
from cdc_core.names import COPY, META_COLUMNS
from cdc_core.pipeline.loop import Pipeline, PipelineConfig
from cdc_core.rebuild.full_width import EqualKeysError
from connectors.mariadb.position import to_position
from connectors.registry import log_source_for
from tests.connectors.mariadb.pipeline_helpers import changelog, execute, mariadb_pipeline
from tests.generative.sql.judge import normalize
from tests.private_servers import MariaDBServer


def _source(server: MariaDBServer, database: str) -> Counter[tuple[object, ...]]:
    with contextlib.closing(server.connect(database)) as conn, conn.cursor() as cur:
        cur.execute("SELECT a, b FROM k")
        return Counter(tuple(row) for row in cur.fetchall())


def _mirror(lake: Path, table: str) -> list[dict[str, object]]:
    from deltalake import DeltaTable

    rows = DeltaTable(str(LakeTable(lake, table).mirror)).to_pyarrow_table().to_pylist()
    return [{c: v for c, v in row.items() if c not in META_COLUMNS} for row in rows]


def _values(rows: list[dict[str, object]]) -> Counter[tuple[object, ...]]:
    return Counter(tuple(v for c, v in row.items() if c != COPY) for row in rows)


def _copies(rows: list[dict[str, object]]) -> dict[tuple[object, ...], list[object]]:
    """Per value, its copy numbers: 0 to n - 1 for n equal rows."""
    found: dict[tuple[object, ...], list[object]] = {}
    for row in rows:
        found.setdefault(tuple(v for c, v in row.items() if c != COPY), []).append(row[COPY])
    return {value: sorted(numbers, key=str) for value, numbers in found.items()}


def _assert_mirror_equals_source(
    server: MariaDBServer, database: str, lake: Path, rows: int
) -> list[dict[str, object]]:
    """The mirror of ``k`` holds the source's ``rows`` rows, as a multiset; returns it."""
    with contextlib.closing(server.connect(database)) as conn, conn.cursor() as cur:
        cur.execute("SELECT * FROM k")
        names = [d[0] for d in cur.description]
        source = Counter(tuple(map(normalize, row)) for row in cur.fetchall())
    mirror = _mirror(lake, f"{database}.k")
    assert Counter(tuple(normalize(row.get(n)) for n in names) for row in mirror) == source
    assert sum(source.values()) == rows
    return mirror


@pytest.mark.integration
@pytest.mark.mariadb
def test_equal_rows_of_a_keyless_table_stay_apart(
    mariadb_full: MariaDBServer, mariadb_database: Callable[[MariaDBServer], str], tmp_path: Path
) -> None:
    database = mariadb_database(mariadb_full)
    execute(
        mariadb_full,
        database,
        "CREATE TABLE k (a INT, b VARCHAR(5))",
        "INSERT INTO k VALUES (1, 'x'), (1, 'x'), (2, 'y'), (3, NULL), (3, NULL)",
    )
    with mariadb_pipeline(mariadb_full, database, ["k"], tmp_path) as (pipeline, _):
        pipeline.run_until_caught_up()
        execute(
            mariadb_full,
            database,
            "INSERT INTO k VALUES (2, 'y')",
            "DELETE FROM k WHERE a = 1 LIMIT 1",
            "UPDATE k SET b = 'z' WHERE a = 2 LIMIT 1",
            "UPDATE k SET a = 4 WHERE a = 3 LIMIT 1",  # a NULL in the row's key: it matches
        )
        pipeline.run_until_caught_up()
    source = _source(mariadb_full, database)
    expected = {(1, "x"): 1, (2, "y"): 1, (2, "z"): 1, (3, None): 1, (4, None): 1}
    assert source == Counter(expected)
    mirror = _mirror(tmp_path / "lake", f"{database}.k")
    assert _values(mirror) == source
    assert all(numbers == list(range(len(numbers))) for numbers in _copies(mirror).values())
    events = changelog(tmp_path / "lake", f"{database}.k")
    # The update moved copy 1 of (2, 'y') to copy 0 of (2, 'z'): a key change, whose
    # old key a consumer sees go (cdc_core.lake.key_moves).
    gone = [e for e in events if e["_op"] == "d" and (e["a"], e["b"], e[COPY]) == (2, "y", 1)]
    assert gone, "the old copy of the updated row is deleted in the changelog"


@pytest.mark.integration
@pytest.mark.mariadb
@pytest.mark.parametrize("when", ["loaded", "streamed", "moved", "restarted"])
def test_equal_rows_arrive_as_copies_from_snapshot_and_log(
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    tmp_path: Path,
    when: str,
) -> None:
    """Equal rows, whether the snapshot or the log brings them, or an update makes a row
    equal to another, or the pipeline restarts between them, are all in the mirror."""
    database = mariadb_database(mariadb_full)
    first = ["INSERT INTO k VALUES (1, 'same')"] * (3 if when == "loaded" else 1)
    later = {
        "loaded": ["DELETE FROM k LIMIT 1"],
        "streamed": ["INSERT INTO k VALUES (1, 'same')", "INSERT INTO k VALUES (1, 'same')"],
        "moved": ["INSERT INTO k VALUES (2, 'same')", "UPDATE k SET a = 1 WHERE a = 2"],
        "restarted": ["INSERT INTO k VALUES (1, 'same'), (2, 'other')"],
    }[when]
    execute(mariadb_full, database, "CREATE TABLE k (a INT, b VARCHAR(9))", *first)
    with mariadb_pipeline(mariadb_full, database, ["k"], tmp_path) as (running, _):
        running.run_until_caught_up()
        execute(mariadb_full, database, *later)
        running.run_until_caught_up()
    if when == "restarted":
        execute(mariadb_full, database, "DELETE FROM k WHERE a = 1 LIMIT 1")
        with mariadb_pipeline(mariadb_full, database, ["k"], tmp_path) as (running, _):
            running.run_until_caught_up()
    mirror = _mirror(tmp_path / "lake", f"{database}.k")
    assert _values(mirror) == _source(mariadb_full, database)
    assert sum(_source(mariadb_full, database).values()) >= 1
    assert all(numbers == list(range(len(numbers))) for numbers in _copies(mirror).values())


@pytest.mark.integration
@pytest.mark.mariadb
def test_a_configured_key_the_source_does_not_keep_unique_stops_the_pipeline(
    mariadb_full: MariaDBServer, mariadb_database: Callable[[MariaDBServer], str], tmp_path: Path
) -> None:
    """Two rows on a configured key may differ, so which one a change means cannot be told:
    the pipeline stops with the fix, naming the table, never the rows' values."""
    database = mariadb_database(mariadb_full)
    execute(
        mariadb_full,
        database,
        "CREATE TABLE k (a INT, b VARCHAR(9))",
        "INSERT INTO k VALUES (1, 'secret')",
    )
    pipeline = mariadb_pipeline(mariadb_full, database, ["k"], tmp_path, key_url="key.k=a")
    with pipeline as (running, _), pytest.raises(EqualKeysError) as raised:
        running.run_until_caught_up()
        execute(mariadb_full, database, "INSERT INTO k VALUES (1, 'secret2')")
        running.run_until_caught_up()
    assert raised.value.context["table"] == f"{database}.k"
    assert "primary key" in raised.value.message and "secret" not in str(raised.value)


@pytest.mark.integration
@pytest.mark.mariadb
@pytest.mark.parametrize(
    "ddl",
    [
        "ALTER TABLE k DROP COLUMN c",
        "ALTER TABLE k ADD COLUMN d VARCHAR(5) DEFAULT 'dflt'",
        "ALTER TABLE k MODIFY b VARCHAR(20)",
        "ALTER TABLE k ADD COLUMN d INT",  # no value for old rows, yet every locator moves
    ],
)
def test_a_keyless_table_stays_equal_after_ddl_changing_its_columns(
    mariadb_minimal: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    tmp_path: Path,
    ddl: str,
) -> None:
    """Its rows are located by all their columns, so DDL changing the columns changes every
    row's locator: rows changed after it must still find theirs (found by the generative
    tester, seeds 5 and 11)."""
    database = mariadb_database(mariadb_minimal)
    execute(
        mariadb_minimal,
        database,
        "CREATE TABLE k (a INT, b VARCHAR(5), c TIME)",
        "INSERT INTO k VALUES (1, 'x', '10:00'), (1, 'x', '10:00'), (2, 'y', NULL), (3, 'z', NULL)",
    )
    with mariadb_pipeline(mariadb_minimal, database, ["k"], tmp_path) as (pipeline, _):
        pipeline.run_until_caught_up()
        execute(
            mariadb_minimal,
            database,
            ddl,
            "DELETE FROM k WHERE a = 1 LIMIT 1",
            "UPDATE k SET a = 20 WHERE a = 2",
            "DELETE FROM k WHERE a = 3",
            "INSERT INTO k (a, b) VALUES (4, 'w'), (4, 'w')",
            "INSERT INTO k SELECT * FROM k WHERE a = 1",  # a copy of a row older than the DDL
        )
        pipeline.run_until_caught_up()
    _assert_mirror_equals_source(mariadb_minimal, database, tmp_path / "lake", rows=5)


@pytest.mark.integration
@pytest.mark.mariadb
@pytest.mark.parametrize(
    "ddl",
    [
        "ALTER TABLE k ADD COLUMN d VARCHAR(9) DEFAULT 'dflt'",
        "ALTER TABLE k RENAME COLUMN b TO b2",
        "ALTER TABLE k DROP COLUMN c",
    ],
)
def test_changes_logged_before_ddl_a_stopped_pipeline_reads_after_it(
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    tmp_path: Path,
    ddl: str,
) -> None:
    """The pipeline, started again after the DDL, describes the table as it is now, while
    the changes logged before the DDL carry the columns of then: their whole-row key lacks
    a column of the description (found by the generative tester, mariadb-full seed 12)."""
    database = mariadb_database(mariadb_full)
    execute(
        mariadb_full,
        database,
        "CREATE TABLE k (a INT, b VARCHAR(5), c TIME)",
        "INSERT INTO k VALUES (1, 'x', '10:00'), (1, 'x', '10:00'), (2, 'y', NULL), (3, 'z', NULL)",
    )
    with mariadb_pipeline(mariadb_full, database, ["k"], tmp_path) as (pipeline, _):
        pipeline.run_until_caught_up()
    execute(
        mariadb_full,
        database,
        "DELETE FROM k WHERE a = 1 LIMIT 1",
        "UPDATE k SET a = 20 WHERE a = 2",
        "INSERT INTO k VALUES (3, 'z', NULL)",
        ddl,
        "DELETE FROM k WHERE a = 3 LIMIT 1",
        "INSERT INTO k (a) VALUES (4), (4)",
    )
    with mariadb_pipeline(mariadb_full, database, ["k"], tmp_path) as (pipeline, _):
        pipeline.run_until_caught_up()
    mirror = _assert_mirror_equals_source(mariadb_full, database, tmp_path / "lake", rows=5)
    assert all(numbers == list(range(len(numbers))) for numbers in _copies(mirror).values())


@pytest.mark.integration
@pytest.mark.mariadb
def test_a_table_whose_changes_a_ddl_made_unwritable_is_never_shown_exact_before_its_reload(
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The changes logged before the DDL are dropped and the table is loaded again. The
    batch written before that reload records the pipeline's progress: it must already mark
    the table as being refreshed, or a validator waiting for that position reads the lake
    without the dropped changes (a window the soak's validators could fall into)."""
    import cdc_core.lake.sink as sink

    database = mariadb_database(mariadb_full)
    execute(
        mariadb_full,
        database,
        "CREATE TABLE k (a INT, b VARCHAR(5))",
        "INSERT INTO k VALUES (1, 'x')",
    )
    with mariadb_pipeline(mariadb_full, database, ["k"], tmp_path) as (pipeline, _):
        pipeline.run_until_caught_up()
    execute(mariadb_full, database, "DELETE FROM k WHERE a = 1")
    dropped_at = _end_of_log(mariadb_full)
    execute(mariadb_full, database, "ALTER TABLE k ADD COLUMN d VARCHAR(9) DEFAULT 'dflt'")
    written: list[tuple[int, RefreshMarks]] = []
    write = sink.write_progress

    def recorded(
        lake: Path,
        name: str,
        position: Position,
        tables: Any,
        marks: Any = None,
        source: Any = None,
    ) -> None:
        written.append((position.value, marks or RefreshMarks()))
        write(lake, name, position, tables, marks, source)

    monkeypatch.setattr(sink, "write_progress", recorded)
    with mariadb_pipeline(mariadb_full, database, ["k"], tmp_path) as (pipeline, _):
        pipeline.run_until_caught_up()
    table = f"{database}.k"
    shown = [
        (position, marks)
        for position, marks in written
        if position >= dropped_at
        and table not in marks.refreshing
        and marks.window_at(table, dropped_at) is None
    ]
    assert any(position >= dropped_at for position, _ in written)
    assert shown == []  # every progress at or past the drop marks it refreshing or inexact
    _assert_mirror_equals_source(mariadb_full, database, tmp_path / "lake", rows=0)


def _end_of_log(server: MariaDBServer) -> int:
    with contextlib.closing(server.connect(None)) as connection, connection.cursor() as cursor:
        cursor.execute("SHOW MASTER STATUS")
        log_file, offset = cursor.fetchone()[:2]
    return to_position(log_file, int(offset))


@pytest.mark.integration
@pytest.mark.mariadb
def test_a_keyless_table_created_and_altered_while_the_pipeline_lags_behind(
    mariadb_full: MariaDBServer, mariadb_database: Callable[[MariaDBServer], str], tmp_path: Path
) -> None:
    """A table created and altered while the pipeline lags is refreshed by chunks read at
    the log's end, after changes the stream has yet to reach: rows those changes moved in
    one transaction (a key moved twice) must not stay in the mirror (catalog vocabulary,
    mariadb-full seed 30)."""
    database = mariadb_database(mariadb_full)
    execute(mariadb_full, database, "CREATE TABLE other (a INT PRIMARY KEY)")
    with _glob_pipeline(mariadb_full, database, tmp_path) as pipeline:
        pipeline.run_until_caught_up()
        execute(
            mariadb_full,
            database,
            "CREATE TABLE k (a BIGINT NOT NULL, b VARCHAR(9), t INT, l INT,"
            " CONSTRAINT k_uk UNIQUE (a))",
            "INSERT INTO k (a, b) VALUES (1000, '')",
            "UPDATE k SET a = 2000 WHERE a = 1000",
            "ALTER TABLE k ADD COLUMN c VARCHAR(40) DEFAULT 'dflt'",
            "START TRANSACTION",
            "INSERT INTO k VALUES (3000, 'y', NULL, 1, NULL), (4000, 'x,z', 7, NULL, 'w')",
            "UPDATE k SET a = a + 1 ORDER BY a DESC",
            "UPDATE k SET a = a + 1 ORDER BY a DESC",
            "INSERT INTO k VALUES (5000, 'x', NULL, 2, '')",
            "COMMIT",
        )
        pipeline.run_until_caught_up()  # the log holds it all: every chunk is read at its end
    with contextlib.closing(mariadb_full.connect(database)) as conn, conn.cursor() as cur:
        cur.execute("SELECT a FROM k")
        source = Counter(row[0] for row in cur.fetchall())
    mirror = _mirror(tmp_path / "lake", f"{database}.k")
    assert Counter(row["a"] for row in mirror) == source


@contextlib.contextmanager
def _glob_pipeline(server: MariaDBServer, database: str, work: Path) -> Iterator[Pipeline]:
    """A pipeline of every table of ``database`` (``*``), as ``cdc run`` builds it."""
    source = log_source_for(server.url(database) + "?heartbeat_s=0.2", None, ["*"])
    config = PipelineConfig(
        "keyless",
        work / "lake",
        work / "state",
        TableFilter.of_tables([f"{database}.*"]),
        memory_budget_bytes=50_000,  # as the generative tester's: transactions spill
        batch_max_events=200,
        refresh_chunk_rows=50,
    )
    config = replace(config, fetch_missing=source.fetch_missing)
    try:
        yield Pipeline(config, source.reader, source.snapshots, tables=source.tables())
    finally:
        source.reader.close()


@pytest.mark.integration
@pytest.mark.mariadb
@pytest.mark.parametrize(
    ("table", "ddl"),
    [
        ("CREATE TABLE k (a BIGINT NOT NULL, b VARCHAR(9))", "CREATE UNIQUE INDEX u ON k (a)"),
        ("CREATE TABLE k (a BIGINT NOT NULL, b VARCHAR(9))", "ALTER TABLE k ADD UNIQUE (a)"),
        ("CREATE TABLE k (a BIGINT NOT NULL, b VARCHAR(9), UNIQUE KEY u (a))", "DROP INDEX u ON k"),
        (
            "CREATE TABLE k (a BIGINT NOT NULL, b VARCHAR(9), UNIQUE KEY u (a))",
            "ALTER TABLE k MODIFY a BIGINT NULL",
        ),
    ],
)
def test_a_unique_key_the_server_promotes_to_primary_key_locates_rows_as_the_log_does(
    mariadb_minimal: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    tmp_path: Path,
    table: str,
    ddl: str,
) -> None:
    """MariaDB locates the rows of a table without a primary key by its first UNIQUE key of
    NOT NULL columns, and its binlog says so; DDL that makes or unmakes such a key changes
    the key the log's images carry (MINIMAL: only that key), and the lake follows."""
    database = mariadb_database(mariadb_minimal)
    execute(mariadb_minimal, database, table, "INSERT INTO k VALUES (1, 'x'), (2, 'y'), (3, 'z')")
    with _glob_pipeline(mariadb_minimal, database, tmp_path) as pipeline:
        pipeline.run_until_caught_up()
        execute(
            mariadb_minimal,
            database,
            "UPDATE k SET b = 'w' WHERE a = 1",
            ddl,
            "UPDATE k SET a = a + 10 ORDER BY a DESC",
            "UPDATE k SET b = 'v' WHERE a = 12",
            "DELETE FROM k WHERE a = 13",
            "INSERT INTO k VALUES (4, 'u')",
        )
        pipeline.run_until_caught_up()
    with contextlib.closing(mariadb_minimal.connect(database)) as conn, conn.cursor() as cur:
        cur.execute("SELECT a, b FROM k")
        source = Counter(tuple(row) for row in cur.fetchall())
    mirror = _mirror(tmp_path / "lake", f"{database}.k")
    assert Counter((row["a"], row["b"]) for row in mirror) == source
