"""An object read while another process replaces it is read whole, old or new: pyarrow
reads an S3 object as a HEAD (its size), then a GET of that many bytes, so a replacement
between the two gave a prefix of the new object (a torn progress file: mariadb-full S3
soak seed 942, "the state file ... is corrupt or truncated"). moto on loopback."""

from __future__ import annotations

import json
import threading
import time

import pytest

from cdc_core.lake_location import LakeLocation
from tests.object_store.s3_server import S3Lake

pytestmark = [pytest.mark.object_store]

READS = 400  # about 50 reads of the code before came back torn


def _document(number: int) -> bytes:
    """A document longer than every one before it (no two of one size)."""
    return json.dumps({"n": number, "pad": "x" * number}).encode()


def test_an_object_replaced_while_it_is_read_is_read_whole(s3_lake: S3Lake) -> None:
    progress = LakeLocation.from_config(s3_lake.url, {}).join("_replcheck", "progress", "p.json")
    progress.write_bytes(_document(0))
    done = threading.Event()

    def rewrite() -> None:  # faster than a pipeline writes its progress (once a batch)
        number = 0
        while not done.is_set():
            number += 1
            progress.write_bytes(_document(number))
            time.sleep(0.01)

    writer = threading.Thread(target=rewrite)
    writer.start()
    try:
        read = [progress.read_bytes() for _ in range(READS)]
    finally:
        done.set()
        writer.join()
    torn = [data for data in read if not _whole(data)]
    assert torn == []


def _whole(data: bytes | None) -> bool:
    """Whether ``data`` is one of the documents written, whole."""
    try:
        return data is not None and data == _document(json.loads(data)["n"])
    except ValueError:
        return False
