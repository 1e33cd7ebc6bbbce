"""Delta tables opened for reading once per version (``cdc_core.lake.delta_reads``), on moto:
a second read of a version fetches none of its commit files again, and a table created again
at the same place (a reload) is never served the old table's snapshot of the same number."""

from __future__ import annotations

import pyarrow as pa
import pytest

from cdc_core.lake.delta_reads import read_delta
from cdc_core.lake_location import LakeLocation
from tests.object_store.s3_server import S3Lake

pytestmark = [pytest.mark.object_store]


def _appends(table: LakeLocation, first: int, count: int) -> None:
    """``count`` commits of one row each, ``first`` the first row's id."""
    for number in range(first, first + count):
        table.write_delta(pa.table({"id": [number]}), mode="append")


def test_a_version_is_read_once_and_a_table_created_again_is_read_anew(s3_lake: S3Lake) -> None:
    table = LakeLocation.from_config(s3_lake.url, {}).join("t")
    _appends(table, 0, 4)
    first = read_delta(table)
    assert first.version() == 3
    with s3_lake.server.fetched() as fetched:
        again = read_delta(table)
    assert again is first
    commits = sorted(p.rsplit("/", 1)[1] for p in fetched if p.endswith(".json"))
    assert commits == [f"{0:020d}.json"]  # the table's id; versions 1-3 not read again

    table.delete_tree()  # a reload: the same place, the same version numbers, another table
    _appends(table, 100, 4)
    created = read_delta(table)
    assert created is not first
    assert sorted(created.to_pyarrow_table().column("id").to_pylist()) == [100, 101, 102, 103]
    assert read_delta(table, 1).to_pyarrow_table().num_rows == 2
