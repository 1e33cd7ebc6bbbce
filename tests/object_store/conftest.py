"""Fixtures of the object-store lake tests: one moto S3 server per test process, a new
bucket per test, and the standard AWS environment pointing at it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.object_store.s3_server import MotoS3Server, S3Lake
from tests.private_servers import _start_on_free_port


@pytest.fixture(scope="session")
def s3_server() -> Iterator[MotoS3Server]:
    """moto's S3 server on a free loopback port, for the whole test process."""
    server = _start_on_free_port(MotoS3Server)
    assert isinstance(server, MotoS3Server)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_lake(s3_server: MotoS3Server, monkeypatch: pytest.MonkeyPatch) -> S3Lake:
    """A new bucket, with the AWS environment of this process (and of the commands it
    starts) pointing at the server."""
    for name, value in s3_server.environment().items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    return S3Lake(s3_server, s3_server.create_bucket())
