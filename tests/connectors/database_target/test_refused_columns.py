"""A database target refuses by name, before anything is written, a column it has no exact
type for (issue 36); ``ignore_columns`` lets the pipeline carry the rest. An ``interval`` is
carried exactly into either target as its ISO 8601 text, months and days kept apart."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa

from cdc_core.capture.source import RefusedColumnsError
from connectors.pipeline import open_pipeline
from tests.private_servers import MariaDBServer, PostgresServer

pytestmark = [pytest.mark.integration, pytest.mark.mariadb, pytest.mark.postgres]

TABLES = (
    "CREATE TABLE a (id int PRIMARY KEY, v text)",
    "CREATE TABLE b (id int PRIMARY KEY, span interval, tz timetz, v text)",
    "INSERT INTO a VALUES (1, 'x')",
    "INSERT INTO b VALUES (1, '1 day 02:03:04.5', '12:00+02', 'y')",
)


def _config(work: Path, source: str, target: str, schema: str, extra: str = "") -> Path:
    config = work / "pipeline.yaml"
    config.write_text(
        "connections:\n"
        f"  src: {{url: {json.dumps(source)}}}\n"
        f"  dst: {{url: {json.dumps(target)}}}\n"
        "pipelines:\n"
        "  - name: copy\n"
        "    source: src\n"
        "    target: dst\n"
        "    tables: [public.a, public.b]\n"
        f"    target_schema: {schema}\n"
        f"    state_dir: {json.dumps(str(work / 'state'))}\n" + extra,
        encoding="utf-8",
    )
    return config


def _source(postgres: PostgresServer, database: str) -> str:
    """The pipeline URL of ``database`` on ``postgres``, once it holds ``TABLES``."""
    with contextlib.closing(postgres.connect(database)) as connection:
        for statement in TABLES:
            connection.execute(statement)
    return f"{postgres.url(database)}?idle_s=0.2&slot=copy_{database}"


def _catch_up(config: Path) -> None:
    with open_pipeline(config, "copy") as pipeline:
        pipeline.run_until_caught_up()


def _rows(url: str, schema: str | None, table: str) -> list[tuple[object, ...]]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            found = sa.Table(table, sa.MetaData(), schema=schema, autoload_with=connection)
            return [tuple(row) for row in connection.execute(sa.select(found).order_by("id"))]
    finally:
        engine.dispose()


def _tables(url: str) -> set[str]:
    engine = sa.create_engine(url)
    try:
        return set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_a_mariadb_target_refuses_a_timetz_before_writing_and_holds_an_interval(
    tmp_path: Path,
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    postgres: PostgresServer,
    postgres_database: Callable[[PostgresServer], str],
) -> None:
    url = _source(postgres, postgres_database(postgres))
    target = mariadb_database(mariadb_full)
    target_url = mariadb_full.url(target)
    with (
        pytest.raises(RefusedColumnsError) as refused,
        open_pipeline(_config(tmp_path, url, target_url, target), "copy") as pipeline,
    ):
        pipeline.run_until_caught_up()
    message = refused.value.message
    assert message.startswith(
        "table public.b: column tz (time with time zone): no type in a"
        " mariadb target that holds its values exactly"
    ), message
    assert "ignore_columns: {public.b: [tz]}" in message, message
    assert _tables(target_url) <= {"replcheck_progress"}  # public.a is not loaded either

    ignored = "    ignore_columns: {public.b: [tz]}\n"
    _catch_up(_config(tmp_path, url, target_url, target, ignored))
    assert _rows(target_url, None, "a") == [(1, "x")]
    assert _rows(target_url, None, "b") == [(1, "P1DT2H3M4.5S", "y")]


def test_a_postgres_target_holds_an_interval_exactly(
    tmp_path: Path,
    postgres: PostgresServer,
    postgres_database: Callable[[PostgresServer], str],
) -> None:
    source, target = postgres_database(postgres), postgres_database(postgres)
    target_url = postgres.url(target)
    ignored = "    ignore_columns: {public.b: [tz]}\n"  # a PostgreSQL target has no timetz
    config = _config(tmp_path, _source(postgres, source), target_url, "public", ignored)
    _catch_up(config)
    with contextlib.closing(postgres.connect(source)) as connection:
        connection.execute("UPDATE b SET span = span * 2 + interval '1 mon' WHERE id = 1")
    _catch_up(config)
    assert _rows(target_url, "public", "b") == [(1, "P1M2DT4H6M9S", "y")]
