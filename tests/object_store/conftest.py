"""Fixtures of the object-store lake tests: one moto S3 server, one s3rver and one Azurite
server per test process (each started by the first test that needs it), a new bucket or
container per test, and the store's standard environment pointing at it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.object_store.azurite_server import AZURE_VARIABLES, AzureLake, AzuriteServer
from tests.object_store.s3_server import MotoS3Server, S3Lake
from tests.object_store.s3rver_server import S3rverServer
from tests.private_servers import served


@pytest.fixture(scope="session")
def s3_server() -> Iterator[MotoS3Server]:
    """moto's S3 server on a free loopback port, for the whole test process."""
    with served(MotoS3Server) as server:
        yield server


@pytest.fixture
def s3_lake(s3_server: MotoS3Server, monkeypatch: pytest.MonkeyPatch) -> S3Lake:
    """A new bucket, with the AWS environment of this process (and of the commands it
    starts) pointing at the server."""
    return _bucket_of(s3_server, monkeypatch)


@pytest.fixture(scope="session")
def s3rver_server() -> Iterator[S3rverServer]:
    """s3rver on a free loopback port, for the whole test process."""
    with served(S3rverServer) as server:
        yield server


@pytest.fixture
def s3rver_lake(s3rver_server: S3rverServer, monkeypatch: pytest.MonkeyPatch) -> S3Lake:
    """A new bucket on s3rver, the AWS environment pointing at it (as ``s3_lake``)."""
    return _bucket_of(s3rver_server, monkeypatch)


def _bucket_of(server: MotoS3Server, monkeypatch: pytest.MonkeyPatch) -> S3Lake:
    for name, value in server.environment().items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    return S3Lake(server, server.create_bucket())


@pytest.fixture(scope="session")
def azurite_server() -> Iterator[AzuriteServer]:
    """Azurite's blob service on a free loopback port, for the whole test process."""
    with served(AzuriteServer) as server:
        yield server


@pytest.fixture
def azure_lake(azurite_server: AzuriteServer, monkeypatch: pytest.MonkeyPatch) -> AzureLake:
    """A new container, with the Azure environment of this process (and of the commands it
    starts) pointing at the server and nothing else of the machine's Azure environment."""
    for name in AZURE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in azurite_server.environment().items():
        monkeypatch.setenv(name, value)
    return AzureLake(azurite_server, azurite_server.create_container())
