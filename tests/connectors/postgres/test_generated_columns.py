"""Stored generated columns (issue 36 item 2): pgoutput before PostgreSQL 18 leaves them out
of every row image, so the pipeline computes them from the image by the column's own
expression, on the source. The lake's mirror and a database target must equal the source
after the initial load and after inserts and updates in the stream; a column it cannot
compute exactly is refused by name before loading."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from cdc_core.capture.events import ABSENT
from cdc_core.lake.layout import LakeTable
from cdc_core.names import META_COLUMNS
from connectors.pipeline import open_pipeline
from tests.cli_runs import catch_up, cdc_running, stop, wait_for, write_config
from tests.connectors.postgres.helpers import PgCase, committed, read_until_end, shown
from tests.private_servers import PostgresServer

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

# total and label depend on several columns, one of them text (TOASTable): exact only with
# the whole old row in the log (REPLICA IDENTITY FULL), see test_mixed_inputs_need_...
TABLE = (
    "CREATE TABLE g (id int PRIMARY KEY, price numeric(8,2), qty int, name text,"
    " total numeric(12,2) GENERATED ALWAYS AS (price * qty) STORED,"
    " label text GENERATED ALWAYS AS (upper(name) || ':' || qty) STORED,"
    " twice int GENERATED ALWAYS AS (qty * 2) STORED)"
)
FULL = "ALTER TABLE g REPLICA IDENTITY FULL"
LOADED = "INSERT INTO g (id, price, qty, name) VALUES (1, 1.50, 2, 'a'), (2, 3.00, 1, 'b')"
STREAMED = (
    "INSERT INTO g (id, price, qty, name) VALUES (3, 2.25, 4, 'c'), (4, 1.00, NULL, 'd')",
    "UPDATE g SET qty = qty + 10 WHERE id = 1",
    "UPDATE g SET name = 'bee', price = 5.00 WHERE id = 2",
    "BEGIN; UPDATE g SET qty = 7 WHERE id = 3; UPDATE g SET id = 30 WHERE id = 3; COMMIT",
)


def _source_rows(case: PgCase, table: str = "g") -> dict[int, dict[str, Any]]:
    cursor = case.connection.execute(f"SELECT * FROM {table} ORDER BY id")
    names = [column.name for column in cursor.description or ()]
    return {row[0]: dict(zip(names, row, strict=True)) for row in cursor.fetchall()}


def _lake(work: Path, table: str = "public.g") -> dict[int, dict[str, Any]]:
    from deltalake import DeltaTable

    mirror = LakeTable(work / "lake", table).mirror
    rows = DeltaTable(str(mirror)).to_pyarrow_table().to_pylist()
    return {row["id"]: {k: v for k, v in row.items() if k not in META_COLUMNS} for row in rows}


def _config(case: PgCase, work: Path, table: str = "public.g") -> Path:
    return write_config(work, f"{case.server.url(case.database)}?idle_s=0.2", [table])


def test_cdc_run_fills_generated_columns_in_the_lake(case: PgCase, tmp_path: Path) -> None:
    case.sql(TABLE, FULL, LOADED)
    config = _config(case, tmp_path)
    catch_up(config)
    assert _lake(tmp_path) == _source_rows(case)
    case.sql(*STREAMED)
    catch_up(config)
    expected = _source_rows(case)
    assert expected[30]["label"] == "C:7" and expected[1]["total"] == Decimal("18.00")
    assert _lake(tmp_path) == expected


def test_stream_images_carry_generated_values(case: PgCase, tmp_path: Path) -> None:
    """The reader's images, and the rebuilt ones, with a TOASTed input an update leaves
    unchanged: a column of that input alone kept its value (``ABSENT``: the rebuild fills
    it), one that mixes it with changed columns reads it from the old tuple of REPLICA
    IDENTITY FULL. Before-images hold them ``ABSENT``: the rebuild has them."""
    case.sql(
        "CREATE TABLE t (id int PRIMARY KEY, body text, v int,"
        " size int GENERATED ALWAYS AS (length(body)) STORED,"
        " twice int GENERATED ALWAYS AS (v * 2) STORED)",
        "CREATE TABLE u (id int PRIMARY KEY, body text, v int,"
        " mix text GENERATED ALWAYS AS (left(body, 4) || v) STORED)",
        "ALTER TABLE t ALTER COLUMN body SET STORAGE EXTERNAL",  # out of line, uncompressed
        "ALTER TABLE u ALTER COLUMN body SET STORAGE EXTERNAL",
        "ALTER TABLE u REPLICA IDENTITY FULL",
    )
    reader = case.reader("public.t", "public.u")
    read_until_end(reader, None)  # creates the slot
    start = reader.end_position()
    body = "abcd" + "x" * 5000
    case.sql(
        f"INSERT INTO t (id, body, v) VALUES (1, '{body}', 1)",
        f"INSERT INTO u (id, body, v) VALUES (1, '{body}', 1)",
        "BEGIN; UPDATE t SET v = 2 WHERE id = 1; UPDATE u SET v = 2 WHERE id = 1;"
        " DELETE FROM u WHERE id = 1; COMMIT",
    )
    changes = read_until_end(reader, start)
    raw = {(c[0], c[2]): (c[4], c[5]) for c in shown(changes) if c[0] in ("c", "u", "d")}
    size_twice = {k: (v[0]["size"], v[0]["twice"]) for k, v in raw.items() if k[1] == "t"}
    assert size_twice == {("c", "t"): (5004, 2), ("u", "t"): (ABSENT, 4)}
    assert raw["c", "u"][0]["mix"] == "abcd1" and raw["u", "u"][0]["mix"] == "abcd2"
    assert raw["u", "u"][1]["mix"] is ABSENT and raw["d", "u"][1]["mix"] is ABSENT
    keys = {"public.t": ("id",), "public.u": ("id",)}
    rebuilt = [c for _, txn in committed(changes, tmp_path, keys) for c in txn]
    updated = [(table, after) for op, table, _, after, _ in rebuilt if op == "u"]
    assert [(t, a["size"], a["twice"]) for t, a in updated if t == "t"] == [("t", 5004, 4)]
    deleted = [before for op, _, _, _, before in rebuilt if op == "d"]
    assert deleted[0]["mix"] == "abcd2"


def test_a_generated_column_it_cannot_compute_is_refused_by_name(
    case: PgCase, tmp_path: Path
) -> None:
    """A column of a TOASTable input and another input, without the old row in the log (an
    update leaving the long value out could not be computed), and one of the row's table
    oid (no image has it), are refused before anything is loaded; a short numeric is never
    TOASTed. Once ignored, the rest replicates."""
    case.sql(
        "CREATE TABLE r (id int PRIMARY KEY, name text, qty int, price numeric(8,2),"
        " label text GENERATED ALWAYS AS (name || qty) STORED,"
        " owner bigint GENERATED ALWAYS AS (tableoid::bigint) STORED,"
        " twice int GENERATED ALWAYS AS (qty * 2) STORED,"
        " total numeric GENERATED ALWAYS AS (price * qty) STORED)",  # never TOASTed: carried
        "INSERT INTO r (id, name, qty) VALUES (1, 'a', 1)",
    )
    run = catch_up(_config(case, tmp_path, "public.r"), expect=2)
    error = run.stderr.strip().splitlines()[-1]
    assert "table public.r: column label (text): " in error, error
    assert "column owner (bigint): " in error, error
    assert "REPLICA IDENTITY FULL" in error, error
    assert "ignore_columns: {public.r: [label, owner]}" in error, error
    assert "replcheck bug" not in run.stderr
    assert not (tmp_path / "lake").exists() or not any((tmp_path / "lake").iterdir())
    ignored = "ignore_columns: {public.r: [label, owner]}"
    url = f"{case.server.url(case.database)}?idle_s=0.2"
    config = write_config(tmp_path, url, ["public.r"], options=ignored)
    catch_up(config)
    case.sql("UPDATE r SET qty = 3, price = 0.5 WHERE id = 1")
    catch_up(config)
    lake = _lake(tmp_path, "public.r")
    assert lake == {
        1: {
            "id": 1,
            "name": "a",
            "qty": 3,
            "price": Decimal("0.50"),
            "twice": 6,
            "total": Decimal("1.5"),
        }
    }


def test_generated_columns_reach_a_database_target(
    case: PgCase,
    tmp_path: Path,
    postgres: PostgresServer,
    postgres_database: Callable[[PostgresServer], str],
) -> None:
    """The target holds each generated column as a plain column with the source's value."""
    case.sql(TABLE, FULL, LOADED)
    target = postgres_database(postgres)
    source_url = f"{case.server.url(case.database)}?idle_s=0.2&slot=copy_{case.database}"
    config = tmp_path / "pipeline.yaml"
    config.write_text(
        "connections:\n"
        f"  src: {{url: {json.dumps(source_url)}}}\n"
        f"  dst: {{url: {json.dumps(postgres.url(target))}}}\n"
        "pipelines:\n"
        "  - {name: copy, source: src, target: dst, tables: [public.g], target_schema: public,"
        f" state_dir: {json.dumps(str(tmp_path / 'state'))}}}\n",
        encoding="utf-8",
    )
    with open_pipeline(config, "copy") as pipeline:
        pipeline.run_until_caught_up()
    assert _target_rows(postgres.url(target)) == _source_rows(case)
    case.sql(*STREAMED)
    with open_pipeline(config, "copy") as pipeline:
        pipeline.run_until_caught_up()
    assert _target_rows(postgres.url(target)) == _source_rows(case)
    with contextlib.closing(postgres.connect(target)) as connection:
        connection.execute("UPDATE g SET label = 'plain' WHERE id = 1")  # not generated there


def _target_rows(url: str) -> dict[int, dict[str, Any]]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            table = sa.Table("g", sa.MetaData(), schema="public", autoload_with=connection)
            rows = connection.execute(sa.select(table)).mappings().all()
            return {row["id"]: dict(row) for row in rows}
    finally:
        engine.dispose()


def test_a_streamed_transaction_gets_generated_values_in_order(case: PgCase) -> None:
    """A transaction larger than logical_decoding_work_mem is streamed while in progress,
    interleaved with a table without generated columns; batches keep the stream's order."""
    case.sql(
        "CREATE TABLE s (id int PRIMARY KEY, v int, w int GENERATED ALWAYS AS (v * 3) STORED)",
        "CREATE TABLE p (id int PRIMARY KEY)",
    )
    reader = case.reader("public.s", "public.p", decoding_work_mem="64kB")
    read_until_end(reader, None)
    start = reader.end_position()
    case.sql(
        "BEGIN; INSERT INTO s (id, v) SELECT n, n FROM generate_series(1, 6000) n;"
        " INSERT INTO p VALUES (1); UPDATE s SET v = v + 1 WHERE id <= 3; COMMIT"
    )
    rows = [c for c in shown(read_until_end(reader, start)) if c[0] in ("c", "u")]
    assert len(rows) == 6004
    assert [(r[2], r[3]) for r in rows[5999:]] == [
        ("s", (6000,)), ("p", (1,)), ("s", (1,)), ("s", (2,)), ("s", (3,))
    ]  # fmt: skip
    computed = [r[4]["w"] == r[4]["v"] * 3 for r in rows if r[2] == "s"]
    assert all(computed) and len(computed) == 6003


def test_a_keyless_table_with_generated_columns_under_full_identity(
    case: PgCase, tmp_path: Path
) -> None:
    """Rows of a table without a key are located by all their columns, the generated ones
    too, and the old tuple of REPLICA IDENTITY FULL lacks those: the run stopped on the
    first update or delete (found by the tester's table kinds). Equal rows included."""
    case.sql(
        "CREATE TABLE k (n int, s text, d int GENERATED ALWAYS AS (n * 2) STORED)",
        "ALTER TABLE k REPLICA IDENTITY FULL",
        "INSERT INTO k (n, s) VALUES (1, 'a'), (2, 'b'), (2, 'b')",
    )
    config = _config(case, tmp_path, "public.k")
    catch_up(config)
    case.sql(
        "INSERT INTO k (n, s) VALUES (3, 'c')",
        "UPDATE k SET n = 5 WHERE n = 1",
        "UPDATE k SET s = 'bb' WHERE ctid = (SELECT min(ctid) FROM k WHERE n = 2)",
        "DELETE FROM k WHERE n = 3",
    )
    catch_up(config)
    rows = case.connection.execute("SELECT n, s, d FROM k").fetchall()
    assert sorted(rows) == [(2, "b", 4), (2, "bb", 4), (5, "a", 10)]
    assert sorted(_lake_rows(tmp_path, "public.k")) == sorted(rows)


def _lake_rows(work: Path, table: str, text: str = "s") -> list[tuple[Any, ...]]:
    from deltalake import DeltaTable

    mirror = LakeTable(work / "lake", table).mirror
    found = DeltaTable(str(mirror)).to_pyarrow_table().to_pylist()
    return [(row["n"], row.get(text), row["d"]) for row in found]


def test_a_partitioned_keyless_table_with_generated_columns_under_full_identity(
    case: PgCase, tmp_path: Path
) -> None:
    """The same through a partitioned table's root (postgres-default catalog seed 412)."""
    case.sql(
        "CREATE TABLE k (n int, s text, d int GENERATED ALWAYS AS (n * 2) STORED)"
        " PARTITION BY RANGE (n)",
        "CREATE TABLE k_p0 PARTITION OF k FOR VALUES FROM (MINVALUE) TO (3)",
        "CREATE TABLE k_p1 PARTITION OF k FOR VALUES FROM (3) TO (MAXVALUE)",
        *(f"ALTER TABLE {t} REPLICA IDENTITY FULL" for t in ("k", "k_p0", "k_p1")),
        "INSERT INTO k (n, s) VALUES (1, 'a'), (2, 'b'), (2, 'b')",
    )
    config = _config(case, tmp_path, "public.k")
    catch_up(config)
    case.sql(
        "INSERT INTO k (n, s) VALUES (3, 'c')",
        "UPDATE k SET s = 'aa' WHERE n = 1",
        "UPDATE k SET n = 5 WHERE n = 1",  # into the other partition
        "UPDATE k_p0 SET s = 'bb' WHERE ctid = (SELECT min(ctid) FROM k_p0 WHERE n = 2)",
        "DELETE FROM k WHERE n = 3",
    )
    catch_up(config)
    rows = case.connection.execute("SELECT n, s, d FROM k").fetchall()
    assert sorted(rows) == [(2, "b", 4), (2, "bb", 4), (5, "aa", 10)]
    assert sorted(_lake_rows(tmp_path, "public.k")) == sorted(rows)


@pytest.mark.parametrize("partitioned", [False, True])
def test_a_column_renamed_after_a_change_the_pipeline_has_not_read(
    case: PgCase, tmp_path: Path, partitioned: bool
) -> None:
    """A table without a key, its generated columns in its locator: the change's Relation
    message shows a column's old name and no generated column, and the locator made from
    it lacked them ("no row image for table ... locator": found by the generative tester,
    postgres-default catalog seed 412)."""
    case.sql(
        "CREATE TABLE k (n int, d int GENERATED ALWAYS AS (n * 2) STORED, s text,"
        " e text GENERATED ALWAYS AS ('k' || n::text) STORED)"
        + (" PARTITION BY RANGE (n)" if partitioned else ""),
        *(
            [
                "CREATE TABLE k_p0 PARTITION OF k FOR VALUES FROM (MINVALUE) TO (3)",
                "CREATE TABLE k_p1 PARTITION OF k FOR VALUES FROM (3) TO (MAXVALUE)",
                "ALTER TABLE k_p0 REPLICA IDENTITY FULL",
                "ALTER TABLE k_p1 REPLICA IDENTITY FULL",
            ]
            if partitioned
            else []
        ),
        "ALTER TABLE k REPLICA IDENTITY FULL",
        "INSERT INTO k (n, s) VALUES (1, 'a'), (2, 'b'), (4, 'c')",
    )
    config, log = _config(case, tmp_path, "public.k"), tmp_path / "cdc.log"
    lake = LakeTable(tmp_path / "lake", "public.k")
    with cdc_running(config, log) as process:
        wait_for(lambda: (lake.mirror / "_delta_log").is_dir(), process, log)
        case.sql("UPDATE k SET n = -n WHERE n > 1", "ALTER TABLE k RENAME COLUMN s TO t")
        case.sql("INSERT INTO k (n, t) VALUES (9, 'z')")
        wait_for(lambda: len(_rows_now(tmp_path)) == 4, process, log)
        stop(process)
    rows = case.connection.execute("SELECT n, t, d FROM k").fetchall()
    assert sorted(rows) == [(-4, "c", -8), (-2, "b", -4), (1, "a", 2), (9, "z", 18)]
    assert sorted(_lake_rows(tmp_path, "public.k", "t")) == sorted(rows)


def _rows_now(work: Path) -> list[tuple[Any, ...]]:
    """The mirror's rows, or none while the pipeline moves its tables aside (a reload)."""
    from deltalake.exceptions import DeltaError

    try:
        return _lake_rows(work, "public.k", "t")
    except (OSError, KeyError, DeltaError):  # also a log file moved away while read
        return []


@pytest.mark.parametrize(
    "ddl",
    [
        "ALTER TABLE k ADD COLUMN c7 int NOT NULL DEFAULT 0",
        "ALTER TABLE k ADD COLUMN c7 int",
        "ALTER TABLE k DROP COLUMN s CASCADE",
        "ALTER TABLE k RENAME COLUMN s TO t",
    ],
    ids=["add-default", "add-null", "drop", "rename"],
)
@pytest.mark.parametrize("generated", [True, False], ids=["generated", "plain"])
def test_changes_before_a_ddl_read_by_a_later_run(
    case: PgCase, tmp_path: Path, ddl: str, generated: bool
) -> None:
    """A table without a key, its generated columns in its locator: a run starts after
    changes and a DDL it has not read, so its description (the catalog now) has columns
    the changes' Relation message lacks or another name. The run stopped with "no row
    image for table ... locator" (the tester's seeds 420, 435, 471, ... of postgres-default)
    or on a generated column's input the stream did not carry (seeds 445, 512). Without
    generated columns too (the reader locates the changes by their message's columns)."""
    d, e = (
        ("d int GENERATED ALWAYS AS (n * 2) STORED", "e text GENERATED ALWAYS AS ('k' || s) STORED")
        if generated
        else ("d int DEFAULT 7", "e text DEFAULT 'e'")
    )
    case.sql(
        f"CREATE TABLE k (n int, {d}, s text, {e})",
        "ALTER TABLE k REPLICA IDENTITY FULL",
        "INSERT INTO k (n, s) VALUES (1, 'a'), (2, 'b'), (2, 'b'), (4, 'c')",
    )
    config = _config(case, tmp_path, "public.k")
    catch_up(config)
    case.sql(
        "DELETE FROM k WHERE n = 1",
        "UPDATE k SET n = 3 WHERE ctid = (SELECT min(ctid) FROM k WHERE n = 2)",
        "INSERT INTO k (n, s) VALUES (5, 'e')",
        ddl,
        "UPDATE k SET n = 6 WHERE n = 5",
    )
    catch_up(config)
    cursor = case.connection.execute("SELECT * FROM k")
    names = [column.name for column in cursor.description or ()]
    rows = sorted(tuple(map(str, row)) for row in cursor.fetchall())
    from deltalake import DeltaTable

    mirror = DeltaTable(str(LakeTable(tmp_path / "lake", "public.k").mirror))
    found = mirror.to_pyarrow_table().to_pylist()
    assert sorted(tuple(str(row[c]) for c in names) for row in found) == rows


def test_a_running_pipeline_reads_changes_made_before_a_column_drop(
    case: PgCase, tmp_path: Path
) -> None:
    """A table located by all its columns (its UNIQUE constraint is no replica identity),
    generated columns after the one dropped: the reader built the locator of a change made
    before the DROP from today's catalog (without the dropped column) while the pipeline
    still held the table's description from its load (with it), and the run stopped with
    "two of its rows share the columns that locate them" (postgres-full seed 590)."""
    from cdc_core.capture.filters import TableFilter
    from cdc_core.pipeline.loop import Pipeline, PipelineConfig
    from connectors.registry import log_source_for

    case.sql(
        "CREATE TABLE k (n bigint NOT NULL, p polygon, s text, f float8,"
        " g bigint GENERATED ALWAYS AS (n * 2 + 1) STORED, CONSTRAINT k_uk UNIQUE (n))",
        "ALTER TABLE k REPLICA IDENTITY FULL",
        "INSERT INTO k (n, p, s, f) VALUES (1, NULL, 'a', 0.5),"
        " (2, '((0,0),(1,1),(1,0))', NULL, 0.1)",
    )
    source = log_source_for(f"{case.server.url(case.database)}?idle_s=0.2", None, ["public.k"])
    config = PipelineConfig(
        "running", tmp_path / "lake", tmp_path / "state", TableFilter.of_tables(["public.k"])
    )
    pipeline = Pipeline(config, source.reader, source.snapshots)
    with contextlib.closing(source.reader):
        pipeline.run_until_caught_up()
        case.sql(
            "UPDATE k SET p = NULL WHERE n = 2",
            "UPDATE k SET s = 'b' WHERE n = 1",
            "ALTER TABLE k DROP COLUMN f",
            "INSERT INTO k (n, s) VALUES (3, 'c')",
        )
        pipeline.run_until_caught_up()
    rows = case.connection.execute("SELECT n, p::text AS p, s, g FROM k").fetchall()
    found = [(r["n"], r["p"], r["s"], r["g"]) for r in _mirror(tmp_path, "public.k")]
    assert sorted(map(str, found)) == sorted(map(str, rows))


class _DdlInsideTheSnapshot:
    """The pipeline's snapshot reader, with statements run once its snapshot is taken,
    before the tables are described and read (a DDL the load's catalog sees, its changes
    not: the tester's seed 420 of postgres-default)."""

    def __init__(self, inner: Any, case: PgCase, statements: tuple[str, ...]) -> None:
        self.inner, self.case, self.statements = inner, case, statements

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @contextlib.contextmanager
    def snapshot(self, tables: Any) -> Any:
        with self.inner.snapshot(tables) as taken:
            self.case.sql(*self.statements)
            yield taken


def test_a_ddl_between_the_snapshot_and_the_load_of_a_keyless_table(
    case: PgCase, tmp_path: Path
) -> None:
    """The load reads the rows as the snapshot had them with the columns the catalog has
    now (an added column's default filled in); the stream then sends the changes before
    the DDL in the old shape, and the run stopped with "no row image for table ...
    locator" (seed 420)."""
    from cdc_core.capture.filters import TableFilter
    from cdc_core.pipeline.loop import Pipeline, PipelineConfig
    from connectors.registry import log_source_for

    case.sql(
        "CREATE TABLE k (n int, d int GENERATED ALWAYS AS (n * 2) STORED, s text)",
        "ALTER TABLE k REPLICA IDENTITY FULL",
        "INSERT INTO k (n, s) VALUES (1, 'a'), (2, 'b'), (2, 'b'), (4, 'c')",
    )
    source = log_source_for(f"{case.server.url(case.database)}?idle_s=0.2", None, ["public.k"])
    config = PipelineConfig(
        "keyless", tmp_path / "lake", tmp_path / "state", TableFilter.of_tables(["public.k"])
    )
    pipeline = Pipeline(config, source.reader, source.snapshots)
    during = ("DELETE FROM k WHERE n = 1", "ALTER TABLE k ADD COLUMN c7 int NOT NULL DEFAULT 0")
    pipeline.snapshots = _DdlInsideTheSnapshot(pipeline.snapshots, case, during)
    with contextlib.closing(source.reader):
        pipeline.run_until_caught_up()
        case.sql("UPDATE k SET n = 3 WHERE ctid = (SELECT min(ctid) FROM k WHERE n = 2)")
        pipeline.run_until_caught_up()
    rows = case.connection.execute("SELECT n, s, d, c7 FROM k").fetchall()
    found = [(r["n"], r["s"], r["d"], r["c7"]) for r in _mirror(tmp_path, "public.k")]
    assert sorted(map(str, found)) == sorted(map(str, rows))


def _mirror(work: Path, table: str) -> list[dict[str, Any]]:
    from deltalake import DeltaTable

    return DeltaTable(str(LakeTable(work / "lake", table).mirror)).to_pyarrow_table().to_pylist()
