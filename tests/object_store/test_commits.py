"""Delta commits into an S3 lake (moto on loopback): the put-if-absent they rely on, and the
lake's own files (changelog commits with their positions, progress files) on the store."""

from __future__ import annotations

import threading

import pyarrow as pa
import pytest

from cdc_core.capture.position import Position
from cdc_core.lake.layout import (
    LakeTable,
    RefreshMarks,
    append_changelog,
    high_water_mark,
    read_marks,
    read_progress,
    write_progress,
)
from cdc_core.lake_location import LakeLocation
from tests.object_store.s3_server import S3Lake

pytestmark = pytest.mark.object_store


def test_the_server_refuses_to_overwrite_an_object_put_if_absent(s3_lake: S3Lake) -> None:
    """The mechanism delta-rs's commits rely on (``conditional_put: etag``): a PUT with
    ``If-None-Match: *`` of an existing key fails, so one of two racing commits loses."""
    import boto3
    from botocore.exceptions import ClientError

    client = boto3.client("s3", endpoint_url=s3_lake.server.endpoint)
    client.put_object(Bucket=s3_lake.bucket, Key="k", Body=b"first", IfNoneMatch="*")
    with pytest.raises(ClientError, match="PreconditionFailed"):
        client.put_object(Bucket=s3_lake.bucket, Key="k", Body=b"second", IfNoneMatch="*")
    assert client.get_object(Bucket=s3_lake.bucket, Key="k")["Body"].read() == b"first"


def test_racing_writers_each_commit_once(s3_lake: S3Lake) -> None:
    """Eight writers appending to one table at once: every commit lands exactly once, in
    versions 0..8, none lost."""
    table = race_eight_writers(LakeLocation.from_config(s3_lake.url, {}))
    assert high_water_mark(table) == 8


def race_eight_writers(lake: LakeLocation) -> LakeTable:
    """A first commit, then eight writers appending to one table at once; every commit
    must land exactly once, in versions 0..8."""
    table = LakeTable(lake, "shop.items")
    append_changelog(table, _events(0), 0, "0", "writer-0")
    threads = [
        threading.Thread(target=append_changelog, args=(table, _events(i), i, str(i), f"w-{i}"))
        for i in range(1, 9)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    delta = table.changelog_at.open_delta()
    assert delta.version() == 8
    assert sorted(delta.to_pyarrow_table()["_commit_pos"].to_pylist()) == list(range(9))
    return table


def test_progress_and_marks_live_in_the_store(s3_lake: S3Lake) -> None:
    lake = LakeLocation.from_config(s3_lake.url, {})
    table = LakeTable(lake, "shop.items")
    assert high_water_mark(table) is None and read_progress(lake) == {}
    marks = RefreshMarks({"shop.items": 5}, {})
    write_progress(lake, "p", Position(9, "9"), ["shop.items"], marks)
    assert read_progress(lake) == {"p": (Position(9, "9"), frozenset({"shop.items"}))}
    assert read_marks(lake) == marks
    assert high_water_mark(table) == 4  # under refresh since 5
    names = lake.join("_replcheck", "progress").list_names(".json")
    assert names == ["p.json"]


def _events(position: int) -> pa.Table:
    from cdc_core.lake.layout import meta_fields

    schema = pa.schema([pa.field("id", pa.int64()), *meta_fields()])
    return pa.table(
        {
            "id": [position],
            "_op": ["c"],
            "_commit_pos": [position],
            "_seq": [0],
            "_txid": [None],
            "_commit_ts": [None],
        },
        schema=schema,
    )
