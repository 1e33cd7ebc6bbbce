"""Issue 38, item 2: a source position reads the same in every command, as its product
spells it (``connectors/<product>/position.py``): PostgreSQL LSNs as ``0/241EEC8``, MariaDB
binlog positions as ``file:offset`` — in ``cdc run``'s last line, ``cdc status``, and the
positions ``validate`` writes into result.json."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from cdc_core.names import format_table
from connectors.mariadb.position import describe_position as binlog_text
from connectors.mariadb.position import position_of as binlog_position
from connectors.postgres.log_reader import position_of as stream_position
from connectors.postgres.position import describe_position as lsn_text
from tests.cli_runs import catch_up, replcheck, write_config
from tests.connectors.mariadb.pipeline_helpers import execute
from tests.private_servers import MariaDBServer, PostgresServer

LSN = r"[0-9A-F]+/[0-9A-F]+"
BINLOG = r"[\w.-]+\.\d{6}:\d+"


def test_each_product_has_one_spelling() -> None:
    assert lsn_text(0x241EEC8) == "0/241EEC8" == stream_position(0x241EEC8).text
    assert lsn_text(0x241EEC9) == "0/241EEC8+1" == stream_position(0x241EEC9).text
    position = binlog_position("mariadb-bin.000003", 4567)
    assert binlog_text(position.value, "mariadb-bin") == "mariadb-bin.000003:4567" == position.text


def _spellings(config: Path, out: Path) -> list[str]:
    """Every position the commands print: cdc run's, cdc status's, and result.json's."""
    ran = catch_up(config).stdout.strip()
    status = replcheck("cdc", "status", "--config", str(config), "--pipeline", "p").stdout
    done = replcheck("validate", "--config", str(config), "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    (comparison,) = json.loads((out / "result.json").read_text())["comparisons"]
    said = [ran.rsplit(" ", 1)[-1]]
    said += re.findall(r"^position: .* up to position (\S+)$", status, re.MULTILINE)
    return [*said, comparison["source_position"], comparison["target_position"]]


@pytest.mark.integration
@pytest.mark.postgres
def test_postgres_positions_read_as_lsns_everywhere(
    postgres: PostgresServer, postgres_database: Callable[[PostgresServer], str], tmp_path: Path
) -> None:
    database = postgres_database(postgres)
    with contextlib.closing(postgres.connect(database)) as connection:
        connection.execute("CREATE TABLE items (id int PRIMARY KEY, v text)")
        connection.execute("INSERT INTO items VALUES (1, 'a')")
        connection.commit()
    url = postgres.url(database) + "?idle_s=0.2"
    config = write_config(tmp_path, url, ["public.items"], compared=("public.items",) * 2)
    said = _spellings(config, tmp_path / "out")
    assert len(said) == 4 and all(re.fullmatch(LSN, text) for text in said), said


@pytest.mark.integration
@pytest.mark.mariadb
def test_mariadb_positions_read_as_binlog_file_and_offset_everywhere(
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    tmp_path: Path,
) -> None:
    database = mariadb_database(mariadb_full)
    execute(mariadb_full, database, "CREATE TABLE items (id INT PRIMARY KEY, v VARCHAR(20))")
    execute(mariadb_full, database, "INSERT INTO items VALUES (1, 'a')")
    lake_table = format_table(database, "items")
    config = write_config(
        tmp_path, mariadb_full.url(database), ["items"], compared=("items", lake_table)
    )
    said = _spellings(config, tmp_path / "out")
    assert len(said) == 4 and all(re.fullmatch(BINLOG, text) for text in said), said
