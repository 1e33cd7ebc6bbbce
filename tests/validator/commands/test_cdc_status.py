"""Issue 38, item 7: operating a pipeline. ``replcheck cdc status`` on real MariaDB and
PostgreSQL servers (healthy once caught up, attention once a stopped pipeline's slot keeps
WAL with changes waiting, cannot tell without its state), the slot and publication
announced when ``cdc run`` creates them, the warning a stopped pipeline leaves, and the
words of a database target."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli_runs import catch_up, replcheck, write_config
from tests.connectors.mariadb.pipeline_helpers import execute
from tests.private_servers import MariaDBServer, PostgresServer

pytestmark = [pytest.mark.integration]

LSN = r"[0-9A-F]+/[0-9A-F]+"


def _pg_sql(server: PostgresServer, database: str, *statements: str) -> None:
    with contextlib.closing(server.connect(database)) as connection:
        for statement in statements:
            connection.execute(statement)
        connection.commit()


def _status(config: Path) -> tuple[int, str]:
    done = replcheck("cdc", "status", "--config", str(config), "--pipeline", "p")
    return done.returncode, done.stdout + done.stderr


def _line(output: str, topic: str) -> str:
    found = [line for line in output.splitlines() if line.startswith(f"{topic}: ")]
    assert len(found) == 1, output
    return found[0]


@pytest.fixture
def pg_items(
    postgres: PostgresServer, postgres_database: Callable[[PostgresServer], str], tmp_path: Path
) -> Path:
    """A PostgreSQL pipeline of ``public.items`` (one row), its first ``cdc run`` not run."""
    database = postgres_database(postgres)
    _pg_sql(postgres, database, "CREATE TABLE items (id int PRIMARY KEY, v text)")
    _pg_sql(postgres, database, "INSERT INTO items VALUES (1, 'a')")
    return write_config(tmp_path, postgres.url(database) + "?idle_s=0.2", ["public.items"])


def _database(config: Path) -> str:
    found = re.search(r"/(t_[0-9a-f]+)", config.read_text())
    assert found is not None
    return found[1]


@pytest.mark.postgres
def test_postgres_status_after_catching_up_is_healthy_with_lag_0(
    postgres: PostgresServer, pg_items: Path
) -> None:
    first = catch_up(pg_items)
    assert re.search(r"WARNING .*created replication slot replcheck .*permanent", first.stderr)
    assert "pg_drop_replication_slot('replcheck')" in first.stderr, first.stderr
    assert re.search(r"WARNING .*created publication replcheck .*DROP PUBLICATION", first.stderr)
    # A stopped pipeline's slot keeps WAL: cdc run says so when it stops.
    assert "keeps the WAL of" in first.stderr and "while the pipeline is stopped" in first.stderr

    _pg_sql(postgres, _database(pg_items), "UPDATE items SET v = 'b' WHERE id = 1")
    catch_up(pg_items)
    code, output = _status(pg_items)
    assert code == 0, output
    assert _line(output, "lag").startswith("lag: 0 ("), output
    assert re.fullmatch(rf"position: the lake holds everything up to position {LSN}",
                        _line(output, "position")), output  # fmt: skip
    assert "wal_status reserved" in _line(output, "retention"), output
    assert "committed at the source" in _line(output, "last commit"), output
    assert _line(output, "running") == "running: no (no process holds the state directory)"
    assert output.strip().endswith("pipeline p: healthy"), output


@pytest.mark.postgres
def test_postgres_status_of_a_stopped_pipeline_with_retained_wal_needs_attention(
    postgres: PostgresServer, pg_items: Path
) -> None:
    catch_up(pg_items)
    database = _database(pg_items)
    for batch in range(5):
        _pg_sql(postgres, database, f"INSERT INTO items SELECT g, 'x' FROM"
                f" generate_series({batch * 1000 + 2}, {batch * 1000 + 1001}) g")  # fmt: skip

    code, output = _status(pg_items)
    assert code == 1, output
    retained = re.search(r"wal_status \w+, ([\d,]+) bytes of WAL retained", output)
    assert retained is not None and int(retained[1].replace(",", "")) > 0, output
    lag = _line(output, "lag")
    assert re.match(r"lag: [\d,]+ bytes of log to", lag) and "pipeline is stopped" in lag, output
    assert "a change of public.items commits at" in lag, output
    assert "keeps the WAL" in _line(output, "while stopped"), output
    assert output.strip().endswith("pipeline p: attention needed (lag)"), output


@pytest.mark.mariadb
def test_mariadb_status_after_catching_up_is_healthy(
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    tmp_path: Path,
) -> None:
    database = mariadb_database(mariadb_full)
    execute(mariadb_full, database, "CREATE TABLE items (id INT PRIMARY KEY, v VARCHAR(20))")
    execute(mariadb_full, database, "INSERT INTO items VALUES (1, 'a')")
    config = write_config(tmp_path, mariadb_full.url(database), ["items"])
    catch_up(config)
    execute(mariadb_full, database, "INSERT INTO items VALUES (2, 'b')")
    catch_up(config)

    code, output = _status(config)
    assert code == 0, output
    assert _line(output, "lag").startswith("lag: 0 ("), output
    assert re.fullmatch(r"position: the lake holds everything up to position [\w.-]+\.\d{6}:\d+",
                        _line(output, "position")), output  # fmt: skip
    assert "the pipeline resumes in" in _line(output, "retention"), output


def test_status_without_its_state_directory_cannot_tell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STATUS_TEST_PW", "s3cret-pw")  # the subprocess inherits it
    config = write_config(tmp_path, "postgresql+psycopg://repl@127.0.0.1:9/shop", ["public.t"])
    text = config.read_text().replace("127.0.0.1:9/shop\"}", "127.0.0.1:9/shop\", password:"
                                      " {env: STATUS_TEST_PW}}")  # fmt: skip
    assert "{env: STATUS_TEST_PW}" in text
    config.write_text(text)
    code, output = _status(config)
    assert code == 2, output
    assert f"state directory: {tmp_path / 'state'} does not exist" in output, output
    assert "s3cret-pw" not in output and "repl@127.0.0.1:9/shop" in output, output
    assert output.strip().endswith("pipeline p: cannot tell (state directory)"), output


def test_status_with_a_corrupt_checkpoint_cannot_tell(tmp_path: Path) -> None:
    config = write_config(tmp_path, "postgresql+psycopg://repl@127.0.0.1:9/shop", ["public.t"])
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "checkpoint").write_bytes(b'{"format": "replcheck.checkpoint"')
    code, output = _status(config)
    assert code == 2, output
    found = _line(output, "state directory")
    assert f"the checkpoint {tmp_path / 'state' / 'checkpoint'} is corrupt" in found, output


@pytest.mark.postgres
def test_a_database_target_is_named_as_the_target(
    postgres: PostgresServer, postgres_database: Callable[[PostgresServer], str], tmp_path: Path
) -> None:
    source, target = postgres_database(postgres), postgres_database(postgres)
    _pg_sql(postgres, source, "CREATE TABLE items (id int PRIMARY KEY, v text)")
    _pg_sql(postgres, source, "INSERT INTO items VALUES (1, 'a')")
    config = tmp_path / "replcheck.yaml"
    config.write_text(
        "connections:\n"
        f"  src: {{url: {json.dumps(postgres.url(source) + '?idle_s=0.2')}}}\n"
        f"  dst: {{url: {json.dumps(postgres.url(target))}}}\n"
        "pipelines:\n"
        "  - {name: p, source: src, target: dst, tables: [public.items], target_schema: public,"
        f" state_dir: {json.dumps(str(tmp_path / 'state'))}}}\n",
        encoding="utf-8",
    )
    done = catch_up(config)
    assert "the lake" not in done.stdout + done.stderr, done.stdout + done.stderr
    said = re.fullmatch(
        rf"pipeline p: the target postgresql\S+/{target} holds everything up to position {LSN}",
        done.stdout.strip(),
    )
    assert said is not None, done.stdout
    code, output = _status(config)
    assert code == 0, output
    assert re.fullmatch(rf"position: the target postgresql\S+/{target} holds everything up to"
                        rf" position {LSN}", _line(output, "position")), output  # fmt: skip
