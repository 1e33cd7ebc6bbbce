"""A pipeline into a database: MariaDB -> PostgreSQL and PostgreSQL -> MariaDB on the real
servers, initial load and stream (key changes, delete and re-insert, truncate, a column
added), then the product's own validator finds source and target in sync, and the target's
progress table holds the position the pipeline reached."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from cdc_core.errors import TerminalError
from connectors.pipeline import open_pipeline
from tests.connectors.database_target.conftest import Databases
from tests.private_servers import MariaDBServer, PostgresServer
from validator.config import load_validator_config
from validator.job import validate

pytestmark = [pytest.mark.integration, pytest.mark.mariadb, pytest.mark.postgres, pytest.mark.spark]

MARIADB_TABLES = (
    "CREATE TABLE `order-lines` (`id` BIGINT PRIMARY KEY, `qty` INT, `price` DECIMAL(12,3),"
    " `note` TEXT, `placed` DATETIME(6), `day` DATE, `at` TIME(6), `raw` VARBINARY(64),"
    " `ratio` DOUBLE, `two words` VARCHAR(30))",
    "CREATE TABLE `pairs` (`a` INT, `b` VARCHAR(20), `v` INT, PRIMARY KEY (`a`, `b`))",
)
POSTGRES_TABLES = (
    'CREATE TABLE "order-lines" ("id" bigint PRIMARY KEY, "qty" integer, "price" numeric(12,3),'
    ' "note" text, "placed" timestamp(6), "day" date, "at" time(6), "raw" bytea,'
    ' "ratio" double precision, "two words" varchar(30), "stamp" timestamptz, "doc" jsonb,'
    ' "ok" boolean)',
    'CREATE TABLE "pairs" ("a" integer, "b" varchar(20), "v" integer, PRIMARY KEY ("a", "b"))',
)


def _load(placeholder: str) -> list[tuple[str, list[tuple[Any, ...]]]]:
    lines = [
        (i, i * 3, f"{i}.125", f"note {i} 😀 'q'", f"2024-0{1 + i % 9}-1{i % 10} 10:11:12.{i:06d}",
         f"2020-02-{1 + i % 28:02d}", f"0{i % 10}:30:00.5", bytes([i, 0, 255]), i / 7, f"w {i}")
        for i in range(1, 41)
    ]  # fmt: skip
    pairs = [(i % 5, f"b{i}", i) for i in range(20)]
    marks = ", ".join([placeholder] * 10)
    return [
        (f'INSERT INTO {{q}}order-lines{{q}} (id, qty, price, note, placed, day, {{q}}at{{q}},'
         f' raw, ratio, {{q}}two words{{q}}) VALUES ({marks})', lines),
        (f"INSERT INTO pairs VALUES ({placeholder}, {placeholder}, {placeholder})", pairs),
    ]  # fmt: skip


WORKLOAD = (  # {q} quotes an identifier
    "UPDATE {q}order-lines{q} SET qty = qty + 1 WHERE id <= 10",
    "UPDATE {q}order-lines{q} SET id = id + 1000 WHERE id IN (3, 4)",  # key changes
    "DELETE FROM {q}order-lines{q} WHERE id = 5",
    "INSERT INTO {q}order-lines{q} (id, qty) VALUES (5, 55)",  # delete and re-insert
    "UPDATE pairs SET b = CONCAT(b, 'x') WHERE a = 1",  # a key part changes
    "DELETE FROM pairs WHERE a = 2",
    "UPDATE {q}order-lines{q} SET note = NULL, raw = NULL WHERE id = 6",
)


def _write_configs(tmp_path: Path, source_url: str, target_url: str, table_glob: str) -> Path:
    config = tmp_path / "pipeline.yaml"
    config.write_text(
        "connections:\n"
        f"  src: {{url: {json.dumps(source_url)}}}\n"
        f"  dst: {{url: {json.dumps(target_url)}}}\n"
        "pipelines:\n"
        "  - name: copy\n"
        "    source: src\n"
        "    target: dst\n"
        f"    tables: [{json.dumps(table_glob)}]\n"
        f"    state_dir: {json.dumps(str(tmp_path / 'state'))}\n"
        "    batch: {max_events: 25, max_seconds: 0.3}\n",
        encoding="utf-8",
    )
    return config


def _catch_up(config: Path) -> None:
    with open_pipeline(config, "copy") as pipeline:
        pipeline.run_until_caught_up()


def _in_sync(spark: Any, config: Path) -> dict[str, Any]:
    document = validate(spark, load_validator_config(config, environ={}))
    return {
        c["name"]: (c["status"], c.get("error"), c["source_rows"], c["target_rows"])
        for c in document["comparisons"]
    }


def _progress(url: str, schema: str | None = None) -> dict[str, Any]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(sa.text("SELECT * FROM replcheck_progress")).mappings()
            return {row["table_name"]: dict(row) for row in rows}
    finally:
        engine.dispose()


def test_mariadb_into_postgres(
    spark: Any,
    tmp_path: Path,
    mariadb_to_postgres: Databases,
) -> None:
    mariadb_full, postgres = mariadb_to_postgres.mariadb, mariadb_to_postgres.postgres
    source, target = mariadb_to_postgres.source, mariadb_to_postgres.target
    with contextlib.closing(mariadb_full.connect(source)) as conn, conn.cursor() as cur:
        for ddl in MARIADB_TABLES:
            cur.execute(ddl)
        for sql, rows in _load("%s"):
            cur.executemany(sql.format(q="`"), rows)
        conn.commit()
    source_url = mariadb_full.url(source)
    config = _write_configs(
        tmp_path,
        f"{source_url}?server_id=7741&heartbeat_s=0.2",
        postgres.url(target),
        f"{source}.*",
    )
    _catch_up(config)  # the initial load creates the target tables
    with contextlib.closing(mariadb_full.connect(source)) as conn, conn.cursor() as cur:
        for sql in WORKLOAD:
            cur.execute(sql.format(q="`"))
        cur.execute("ALTER TABLE `order-lines` ADD COLUMN `extra` INT")
        cur.execute("UPDATE `order-lines` SET `extra` = id WHERE id > 30")
        cur.execute("ALTER TABLE `order-lines` DROP COLUMN `ratio`")
        cur.execute("TRUNCATE TABLE pairs")
        cur.execute("INSERT INTO pairs VALUES (9, 'z', 1)")
        conn.commit()
    _catch_up(config)

    checked = _validator_config(tmp_path, source_url, postgres.url(target), source)
    statuses = _in_sync(spark, checked)
    assert statuses == {"lines": ("in_sync", None, 40, 40), "pairs": ("in_sync", None, 1, 1)}
    with contextlib.closing(postgres.connect(target)) as conn:
        rows = conn.execute(f'SELECT id, qty, extra FROM "{source}"."order-lines" ORDER BY id')
        found = {row[0]: row[1:] for row in rows.fetchall()}
    assert 3 not in found and found[1003] == (10, 1003) and found[5] == (55, None)
    assert found[31] == (93, 31)
    assert "ratio" not in _columns(postgres.url(target), source, "order-lines")  # dropped too
    progress = _progress(postgres.url(target))
    assert progress[""]["pipeline"] == "copy" and progress[""]["position"] > 0
    assert json.loads(progress[""]["detail"])["conflicts"] == 0


def test_postgres_into_mariadb(
    spark: Any,
    tmp_path: Path,
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    postgres: PostgresServer,
    postgres_database: Callable[[PostgresServer], str],
) -> None:
    source, target = postgres_database(postgres), mariadb_database(mariadb_full)
    with contextlib.closing(postgres.connect(source)) as conn:
        for ddl in POSTGRES_TABLES:
            conn.execute(ddl)
        with conn.cursor() as cur:
            for sql, rows in _load("%s"):
                cur.executemany(sql.format(q='"'), rows)
            cur.execute(
                "UPDATE \"order-lines\" SET stamp = placed AT TIME ZONE 'Europe/Berlin',"
                """ doc = jsonb_build_object('id', id, 'n', note), ok = id % 2 = 0"""
            )
        conn.commit()
    source_url = postgres.url(source)
    pipeline_url = f"{source_url}?idle_s=0.2&slot=copy_{source}"
    config = _write_configs(tmp_path, pipeline_url, mariadb_full.url(target), "public.*")
    _catch_up(config)
    with contextlib.closing(postgres.connect(source)) as conn:
        for sql in WORKLOAD:
            conn.execute(sql.format(q='"'))
        conn.execute('ALTER TABLE "order-lines" ADD COLUMN "extra" integer')
        conn.execute('UPDATE "order-lines" SET "extra" = id WHERE id > 30')
        conn.execute('ALTER TABLE "order-lines" DROP COLUMN "ratio"')
        conn.execute("TRUNCATE TABLE pairs")
        conn.execute("INSERT INTO pairs VALUES (9, 'z', 1)")
        conn.commit()
    _catch_up(config)

    # The pipeline wrote public.* into a MariaDB database named public (target_schema unset).
    target_url = mariadb_full.url(target).rsplit("/", 1)[0] + "/public"
    # MariaDB keeps PostgreSQL's BOOLEAN as TINYINT(1), and a TIMESTAMPTZ as a DATETIME in
    # UTC, which the validator cannot compare with an instant yet: a schema difference,
    # unless excluded by name (issue 36).
    rules = "    columns: {boolean: [ok], exclude: [stamp]}\n"
    checked = _validator_config(tmp_path, source_url, target_url, "public", rules)
    statuses = _in_sync(spark, checked)
    assert statuses == {"lines": ("in_sync", None, 40, 40), "pairs": ("in_sync", None, 1, 1)}
    assert "ratio" not in _columns(target_url, None, "order-lines")


def _columns(url: str, schema: str | None, table: str) -> list[str]:
    engine = sa.create_engine(url)
    try:
        return [c["name"] for c in sa.inspect(engine).get_columns(table, schema=schema)]
    finally:
        engine.dispose()


def _validator_config(
    tmp_path: Path, source_url: str, target_url: str, schema: str, columns: str = ""
) -> Path:
    """``columns``: the lines comparison's column rules, as a YAML line."""
    path = tmp_path / "validate.yaml"
    path.write_text(
        "connections:\n"
        f"  src: {{url: {json.dumps(source_url)}}}\n"
        f"  dst: {{url: {json.dumps(target_url)}}}\n"
        "comparisons:\n"
        "  - name: lines\n"
        f"    source: {{connection: src, table: {json.dumps(schema + '.order-lines')}}}\n"
        f"    target: {{connection: dst, table: {json.dumps(schema + '.order-lines')}}}\n"
        f"{columns}"
        "  - name: pairs\n"
        f"    source: {{connection: src, table: {json.dumps(schema + '.pairs')}}}\n"
        f"    target: {{connection: dst, table: {json.dumps(schema + '.pairs')}}}\n"
        "validation: {recheck_lag_s: 0.5}\n",
        encoding="utf-8",
    )
    return path


def test_a_conflict_stops_naming_table_and_key(
    tmp_path: Path,
    mariadb_to_postgres: Databases,
) -> None:
    """A row deleted behind the pipeline's back, then updated at the source: the update
    has no row to change (``conflicts: stop``)."""
    mariadb_full, postgres = mariadb_to_postgres.mariadb, mariadb_to_postgres.postgres
    source, target = mariadb_to_postgres.source, mariadb_to_postgres.target
    with contextlib.closing(mariadb_full.connect(source)) as conn, conn.cursor() as cur:
        cur.execute(MARIADB_TABLES[1])
        cur.execute("INSERT INTO pairs VALUES (1, 'a', 1), (2, 'b', 2)")
        conn.commit()
    source_url = f"{mariadb_full.url(source)}?server_id=7742&heartbeat_s=0.2"
    config = _write_configs(tmp_path, source_url, postgres.url(target), f"{source}.pairs")
    _catch_up(config)
    with contextlib.closing(postgres.connect(target)) as conn:
        conn.execute(f'DELETE FROM "{source}".pairs WHERE a = 2')
        conn.commit()
    with contextlib.closing(mariadb_full.connect(source)) as conn, conn.cursor() as cur:
        cur.execute("UPDATE pairs SET v = 20 WHERE a = 2")
        conn.commit()

    with pytest.raises(TerminalError, match=r"table \S+pairs: the row with key a=2, b=b is absent"):
        _catch_up(config)


def test_conflicts_overwrite_applies_and_counts(
    tmp_path: Path,
    mariadb_to_postgres: Databases,
) -> None:
    mariadb_full, postgres = mariadb_to_postgres.mariadb, mariadb_to_postgres.postgres
    source, target = mariadb_to_postgres.source, mariadb_to_postgres.target
    with contextlib.closing(mariadb_full.connect(source)) as conn, conn.cursor() as cur:
        cur.execute(MARIADB_TABLES[1])
        cur.execute("INSERT INTO pairs VALUES (1, 'a', 1), (2, 'b', 2)")
        conn.commit()
    source_url = f"{mariadb_full.url(source)}?server_id=7743&heartbeat_s=0.2"
    config = _write_configs(tmp_path, source_url, postgres.url(target), f"{source}.pairs")
    config.write_text(config.read_text() + "    conflicts: overwrite\n", encoding="utf-8")
    _catch_up(config)
    with contextlib.closing(postgres.connect(target)) as conn:
        conn.execute(f'DELETE FROM "{source}".pairs WHERE a = 2')
        conn.execute(f"INSERT INTO \"{source}\".pairs VALUES (3, 'c', 0)")
        conn.commit()
    with contextlib.closing(mariadb_full.connect(source)) as conn, conn.cursor() as cur:
        cur.execute("UPDATE pairs SET v = 20 WHERE a = 2")  # absent in the target
        cur.execute("INSERT INTO pairs VALUES (3, 'c', 30)")  # present in the target
        conn.commit()
    _catch_up(config)

    with contextlib.closing(postgres.connect(target)) as conn:
        rows = conn.execute(f'SELECT a, b, v FROM "{source}".pairs ORDER BY a').fetchall()
    assert rows == [(1, "a", 1), (2, "b", 20), (3, "c", 30)]
    assert json.loads(_progress(postgres.url(target))[""]["detail"])["conflicts"] == 2


def test_a_target_loaded_with_no_change_since_records_the_pipelines_position(
    tmp_path: Path, mariadb_to_postgres: Databases
) -> None:
    """A validator confirms a live target at the position its pipeline row names: a pipeline
    that only loaded (the source wrote nothing since) must record that row too, else
    ``replication: replcheck`` finds no pipeline feeding the target (bench_vs_reladiff)."""
    mariadb_full, postgres = mariadb_to_postgres.mariadb, mariadb_to_postgres.postgres
    source, target = mariadb_to_postgres.source, mariadb_to_postgres.target
    with contextlib.closing(mariadb_full.connect(source)) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
        cur.execute("INSERT INTO t VALUES (1, 10), (2, 20)")
        conn.commit()
    source_url = f"{mariadb_full.url(source)}?server_id=7743&heartbeat_s=0.2"
    config = _write_configs(tmp_path, source_url, postgres.url(target), "t")
    _catch_up(config)
    progress = _progress(postgres.url(target))
    assert json.loads(progress[""]["detail"])["tables"] == [f"{source}.t"]
    assert progress[""]["position"] == progress[f"{source}.t"]["position"]
