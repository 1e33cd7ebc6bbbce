"""MariaDB ``UUID`` columns are carried as the text a snapshot reads, from the binlog too.

A table map shows a UUID column as ``BINARY(16)`` and a row event holds its 16 bytes; the
log reader used to write those bytes into the lake's text column, and the run stopped
mid-stream with "a replcheck bug" (found by the catalog tester, seeds 41 of
``bench/soak_differential.py --vocabulary catalog``). On the real server, MINIMAL and FULL
row images, a UUID as key and as column, of every version and variant: the binlog's byte
order is measured here, not assumed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli_runs import catch_up, write_config
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
