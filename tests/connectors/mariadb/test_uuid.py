"""MariaDB ``UUID`` columns are carried as the text a snapshot reads, from the binlog too.

A table map shows a UUID column as ``BINARY(16)`` and a row event holds its 16 bytes; the
log reader used to write those bytes into the lake's text column, and the run stopped
mid-stream with "a replcheck bug" (found by the catalog tester, seeds 41 of
``bench/soak_differential.py --vocabulary catalog``). On the real server, MINIMAL and FULL
row images, a UUID as key and as column, of every version and variant: the binlog's byte
order is measured here, not assumed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from cdc_core.capture.events import RowChange
from tests.cli_runs import catch_up, write_config
from tests.connectors.mariadb.binlog_helpers import BinlogCase, read_until_end
from tests.connectors.mariadb.pipeline_helpers import execute, lake_rows, source_rows, validated
from tests.private_servers import MariaDBServer

pytestmark = [pytest.mark.integration, pytest.mark.mariadb]

# Versions 0-7 and the NCS, RFC 4122, Microsoft and future variants: MariaDB's index
# order swaps the segments of some of them in storage (https://mariadb.com/kb/en/uuid-data-type/).
UUIDS = (
    "123e4567-e89b-12d3-a456-426614174000",  # version 1, RFC variant
    "00000000-0000-0000-0000-000000000000",
    "ffffffff-ffff-ffff-ffff-ffffffffffff",
    "01234567-89ab-7def-8123-456789abcdef",
    "01234567-89ab-6def-c123-456789abcdef",
    "01234567-89ab-4def-0123-456789abcdef",
    "01234567-89ab-1def-e123-456789abcdef",
    "01234567-89ab-0def-8123-456789abcdef",
)


@pytest.fixture(params=["mariadb_minimal", "mariadb_full"])
def server(request: pytest.FixtureRequest) -> MariaDBServer:
    found: MariaDBServer = request.getfixturevalue(request.param)
    return found


def test_uuid_columns_and_keys_stream_as_their_text(
    server: MariaDBServer, mariadb_database: Callable[[MariaDBServer], str], tmp_path: Path
) -> None:
    database = mariadb_database(server)
    execute(
        server,
        database,
        "CREATE TABLE t (id UUID PRIMARY KEY, other UUID, n INT)",
        f"INSERT INTO t VALUES ('{UUIDS[0]}', '{UUIDS[1]}', 0)",  # the snapshot's row
    )
    url = f"{server.url(database)}?heartbeat_s=0.2&server_id=4344"
    config = write_config(tmp_path, url, [f"{database}.t"])
    catch_up(config)
    inserts = ", ".join(f"('{key}', '{UUIDS[-1 - i]}', {i})" for i, key in enumerate(UUIDS[1:]))
    execute(
        server,
        database,
        f"INSERT INTO t VALUES {inserts}",
        f"UPDATE t SET other = '{UUIDS[3]}' WHERE n = 2",  # a column changes
        f"UPDATE t SET id = UUID() WHERE id = '{UUIDS[4]}'",  # a key moves
        f"DELETE FROM t WHERE id = '{UUIDS[5]}'",
        "UPDATE t SET other = NULL WHERE n = 6",
    )
    run = catch_up(config)
    assert "replcheck bug" not in run.stderr
    expected = source_rows(server, database, "t", ["id"])
    assert len(expected) == len(UUIDS) - 1
    assert lake_rows(tmp_path / "lake", f"{database}.t", ["id"]) == expected
    assert validated(config, tmp_path, f"{database}.t")["status"] == "in_sync"


@pytest.mark.parametrize("key", ["PRIMARY KEY", ""], ids=["keyed", "keyless"])
def test_a_uuid_column_dropped_before_its_changes_are_read(
    server: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    tmp_path: Path,
    key: str,
) -> None:
    """The catalog no longer shows the column as a UUID when the reader reaches the changes
    made before the DROP (the pipeline was stopped): the run stopped with "a replcheck bug"
    (catalog tester, mariadb seed 613)."""
    database = mariadb_database(server)
    execute(
        server,
        database,
        f"CREATE TABLE t (id BIGINT NOT NULL {key}, n INT, c1 UUID)",
        f"INSERT INTO t VALUES (1, 0, '{UUIDS[0]}')",
    )
    url = f"{server.url(database)}?heartbeat_s=0.2&server_id=4345"
    config = write_config(tmp_path, url, [f"{database}.t"])
    catch_up(config)
    execute(
        server,
        database,
        f"INSERT INTO t VALUES (2, 1, '{UUIDS[2]}')",
        f"UPDATE t SET n = 5, c1 = '{UUIDS[3]}' WHERE id = 1",
        "ALTER TABLE t DROP COLUMN c1",
        "INSERT INTO t VALUES (3, 2)",
    )
    run = catch_up(config)
    assert "replcheck bug" not in run.stderr
    result = validated(config, tmp_path, f"{database}.t", exclude=["c1"])  # kept, NULL now
    assert result["status"] == "in_sync", json.dumps(result["comparisons"], indent=1)[:3000]


def test_a_reader_that_described_a_uuid_column_reads_it_after_its_drop(
    full_case: BinlogCase,
) -> None:
    """A running pipeline described the table while ``c1`` was a UUID; its reader reaches
    the table map of changes made before the DROP only after it: the catalog no longer has
    the column, and the 16 bytes reached the lake's text column (mariadb seed 613: "a
    replcheck bug")."""
    case = full_case
    case.sql("CREATE TABLE t (id BIGINT NOT NULL, c1 UUID)")
    reader = case.reader("t")
    reader.describe(case.table("t"))
    start = reader.end_position()
    case.sql(f"INSERT INTO t VALUES (1, '{UUIDS[3]}')", "ALTER TABLE t DROP COLUMN c1")
    rows = [change for change in read_until_end(reader, start) if isinstance(change, RowChange)]
    assert [(row.op, row.after) for row in rows] == [("c", {"id": 1, "c1": UUIDS[3]})]
