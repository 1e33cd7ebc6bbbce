"""Issue 36, case 4b: a PostgreSQL partitioned table is captured once, through its root.

A glob matching the root and its partitions used to load the rows twice (the root and each
partition), then stop on a publication error whose suggested fix failed. Now the partitions
are left out (named on the terminal), the publication publishes via the root, and the lake
holds one table equal to the root's rows, through inserts into either partition, updates,
an update moving a row to the other partition and deletes; ``validate`` says in_sync. A
publication the user made without ``publish_via_partition_root`` is an error whose fix
works."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from cdc_core.lake.layout import LakeTable
from cdc_core.names import META_COLUMNS
from tests.cli_runs import catch_up, cdc_running, stop, validate, write_config
from tests.connectors.postgres.helpers import PgCase

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

SCHEMA = (
    "CREATE TABLE events (id int, region text, payload text, PRIMARY KEY (id, region))"
    " PARTITION BY LIST (region)",
    "CREATE TABLE events_eu PARTITION OF events FOR VALUES IN ('eu')",
    "CREATE TABLE events_us PARTITION OF events FOR VALUES IN ('us')",
    "CREATE TABLE plain (id int PRIMARY KEY, note text)",
    "INSERT INTO events VALUES (1, 'eu', 'a'), (2, 'us', 'b'), (3, 'eu', 'c')",
    "INSERT INTO plain VALUES (1, 'x')",
)
WORKLOAD = (
    "INSERT INTO events VALUES (4, 'us', 'd')",
    "INSERT INTO events_eu VALUES (5, 'eu', 'e')",  # into a partition directly
    "UPDATE events SET payload = 'a2' WHERE id = 1",
    "UPDATE events SET region = 'us' WHERE id = 3",  # moves the row to the other partition
    "UPDATE events_us SET payload = 'b2' WHERE id = 2",
    "DELETE FROM events WHERE id = 4",
    "UPDATE plain SET note = 'y'",
)


def _config(
    case: PgCase, work: Path, url_options: str = "", tables: Sequence[str] = ("public.*",)
) -> Path:
    url = case.server.url(case.database) + "?idle_s=0.2" + url_options
    return write_config(work, url, tables, compared=("public.events", "public.events"))


def _lake(work: Path, table: str) -> list[tuple[Any, ...]]:
    from deltalake import DeltaTable

    rows = DeltaTable(str(LakeTable(work / "lake", table).mirror)).to_pyarrow_table().to_pylist()
    return sorted(tuple(v for k, v in row.items() if k not in META_COLUMNS) for row in rows)


def _source(case: PgCase, table: str) -> list[tuple[Any, ...]]:
    return sorted(case.connection.execute(f"SELECT * FROM {table}").fetchall())


def test_a_partitioned_table_is_captured_once_through_its_root(
    case: PgCase, tmp_path: Path
) -> None:
    case.sql(*SCHEMA)
    config = _config(case, tmp_path)

    first = catch_up(config)
    assert (
        "tables public.events_eu, public.events_us are partitions, captured through their"
        " root public.events"
    ) in first.stderr
    assert sorted(p.name for p in (tmp_path / "lake" / "public").iterdir()) == ["events", "plain"]
    assert _lake(tmp_path, "public.events") == _source(case, "events")

    case.sql(*WORKLOAD)
    catch_up(config)

    assert sorted(p.name for p in (tmp_path / "lake" / "public").iterdir()) == ["events", "plain"]
    assert _lake(tmp_path, "public.events") == _source(case, "events")
    assert _lake(tmp_path, "public.events") == [
        (1, "eu", "a2"),
        (2, "us", "b2"),
        (3, "us", "c"),
        (5, "eu", "e"),
    ]
    assert _lake(tmp_path, "public.plain") == _source(case, "plain")
    # The validator waits for the lake to reach its snapshot: a pipeline follows meanwhile.
    with cdc_running(config, tmp_path / "following.log") as following:
        code, comparison = validate(config, tmp_path / "out")
        stop(following)
    assert (code, comparison["status"]) == (0, "in_sync"), comparison.get("differences")


def test_a_publication_without_publish_via_partition_root_names_a_fix_that_works(
    case: PgCase, tmp_path: Path
) -> None:
    case.sql(*SCHEMA, "CREATE PUBLICATION mine FOR TABLE events, plain")
    config = _config(case, tmp_path, "&publication=mine")

    refused = catch_up(config, expect=2)
    fix = "ALTER PUBLICATION mine SET (publish_via_partition_root = true)"
    assert (
        "publication 'mine' publishes the changes of the partitioned tables ['public.events']"
        f" as changes of their partitions, so the captured root would never follow; run {fix}"
    ) in refused.stderr

    case.sql(fix)
    catch_up(config)
    case.sql(*WORKLOAD)
    catch_up(config)
    assert _lake(tmp_path, "public.events") == _source(case, "events")


def test_a_partition_named_with_its_root_is_refused(case: PgCase, tmp_path: Path) -> None:
    case.sql(*SCHEMA)
    done = catch_up(_config(case, tmp_path, tables=["events", "events_us", "plain"]), expect=2)
    assert (
        "the pipeline's tables name partitions public.events_us (of public.events) and their"
        " root too, so their rows would be loaded twice, and the partitions' changes reach the"
        " log as the root's; remove public.events_us from the pipeline's tables: their rows"
        " are captured through their root"
    ) in done.stderr


@pytest.mark.parametrize(
    "ddl",
    [
        ("TRUNCATE events_eu",),
        ("ALTER TABLE events DETACH PARTITION events_us",),
        (
            "CREATE TABLE events_asia (id int NOT NULL, region text NOT NULL, payload text)",
            "INSERT INTO events_asia VALUES (7, 'asia', 'g'), (8, 'asia', 'h')",
            "ALTER TABLE events ATTACH PARTITION events_asia FOR VALUES IN ('asia')",
        ),
    ],
    ids=["truncate", "detach", "attach"],
)
def test_partition_ddl_without_row_events_reaches_the_lake(
    case: PgCase, tmp_path: Path, ddl: tuple[str, ...]
) -> None:
    """The log shows no row of a partition truncated (pgoutput skips a partition's
    truncate when it publishes via the root), detached or attached: the rows left or joined
    the root silently, and the lake kept or lacked them. The pipeline sees the root's
    partitions change in the catalog while the log is quiet and loads the root again."""
    case.sql(*SCHEMA)
    config = _config(case, tmp_path, tables=["public.events"])
    catch_up(config)
    case.sql(*ddl, "INSERT INTO events VALUES (6, 'us', 'f')" if "detach" not in ddl[0].lower()
             else "INSERT INTO events VALUES (6, 'eu', 'f')")  # fmt: skip
    catch_up(config)
    assert _lake(tmp_path, "public.events") == _source(case, "events")
