"""A private S3 endpoint for tests: moto's server mode (``moto[server]``, a dev extra) on a
free loopback port, started and stopped like the private databases (tests/private_servers.py).

moto answers the S3 REST API over real HTTP, so deltalake (delta-rs's object_store) and
pyarrow's S3 filesystem talk to it as to S3 itself, conditional writes (``If-None-Match``)
included. It accepts any credentials; tests still pass them through the standard AWS
environment, as users do.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import signal
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote

from tests.private_servers import LOOPBACK, ServerStartError, _PrivateServer, _start_on_free_port

if TYPE_CHECKING:
    import pyarrow.fs as pafs

ACCESS_KEY_ID = "replcheck-test-key"
SECRET_ACCESS_KEY = "replcheck-test-secret"  # moto accepts any: not a secret
REGION = "us-east-1"
_BUCKETS = itertools.count(1)
_GET = re.compile(r'"(?:\x1b\[[0-9;]*m)*GET (\S+) HTTP')  # werkzeug's request log, colours


class MotoS3Server(_PrivateServer):
    """moto's S3 server in its own process (``moto_server -H 127.0.0.1 -p PORT``)."""

    kind = "moto-s3"
    stop_signal = signal.SIGTERM

    def __init__(self) -> None:
        super().__init__(None)

    @property
    def endpoint(self) -> str:
        """The endpoint URL clients are given (``AWS_ENDPOINT_URL``)."""
        return f"http://{LOOPBACK}:{self.port}"

    def environment(self) -> dict[str, str]:
        """The standard AWS variables that reach this server."""
        return {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY_ID,
            "AWS_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY,
            "AWS_REGION": REGION,
            "AWS_ENDPOINT_URL": self.endpoint,
        }

    def create_bucket(self) -> str:
        """A new, empty bucket with a name unique in this run."""
        name = f"lake-{os.getpid()}-{next(_BUCKETS)}"
        self.filesystem().create_dir(name)
        return name

    def filesystem(self) -> pafs.S3FileSystem:
        """A pyarrow filesystem of the server, for tests to look at what is stored."""
        import pyarrow.fs as pafs

        variables = self.environment()
        return pafs.S3FileSystem(
            access_key=variables["AWS_ACCESS_KEY_ID"],
            secret_key=variables["AWS_SECRET_ACCESS_KEY"],
            region=REGION,
            endpoint_override=f"{LOOPBACK}:{self.port}",
            scheme="http",
            allow_bucket_creation=True,
        )

    @contextlib.contextmanager
    def fetched(self) -> Iterator[list[str]]:
        """The paths of the objects the server sends (GET) while the block runs, from its
        request log; filled when the block ends, once a marker request after them is
        logged."""
        start = self.log_path.stat().st_size
        paths: list[str] = []
        yield paths
        marker = f"/moto-api/?marker={next(_BUCKETS)}"
        with urllib.request.urlopen(f"{self.endpoint}{marker}", timeout=10):
            pass
        deadline = time.monotonic() + 30
        text = ""
        while marker not in text:  # the server logs a request once it has answered it
            if time.monotonic() > deadline:
                raise ServerStartError(f"{self.kind} did not log {marker}: {self.log_path}")
            time.sleep(0.05)
            with self.log_path.open("rb") as log:
                log.seek(start)
                text = log.read().decode("utf-8", "replace")
        paths += [unquote(p) for p in _GET.findall(text) if not p.startswith("/moto-api/")]

    def _initialize(self) -> None:
        if not _moto_server().exists():
            raise ServerStartError(
                f"{_moto_server()} is missing: run `make setup` (moto[server] is a dev extra)"
            )

    def _argv(self) -> list[str]:
        return [str(_moto_server()), "-H", LOOPBACK, "-p", str(self.port)]

    def _ping(self) -> str | None:
        try:
            with urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=2):
                return None
        except (urllib.error.URLError, OSError) as exc:
            return str(exc)

    def _after_start(self) -> None:
        return None


def _moto_server() -> Path:
    """The ``moto_server`` script of this virtualenv."""
    return Path(sys.executable).with_name("moto_server")


@dataclass(frozen=True, slots=True)
class S3Lake:
    """A test's lake on the private S3 server: ``url`` is ``s3://BUCKET/lake``."""

    server: MotoS3Server
    bucket: str

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/lake"

    def object_keys(self, below: str = "") -> list[str]:
        """The keys of every object below the lake (or its folder ``below``), relative to
        the lake."""
        import pyarrow.fs as pafs

        base = f"{self.bucket}/lake"
        selector = pafs.FileSelector(f"{base}/{below}".rstrip("/"), True, True)
        found = self.server.filesystem().get_file_info(selector)
        return sorted(i.path[len(base) + 1 :] for i in found if i.type == pafs.FileType.File)


@contextlib.contextmanager
def running_s3_lake() -> Iterator[str]:
    """For a bench or soak outside pytest: a private moto S3 server, the AWS environment of
    this process (and of the commands it starts) pointing at it, and the URL of a lake in
    a new bucket."""
    server = _start_on_free_port(MotoS3Server)
    assert isinstance(server, MotoS3Server)
    os.environ.update(server.environment())
    try:
        yield f"s3://{server.create_bucket()}/lake"
    finally:
        server.stop()


@contextlib.contextmanager
def lake_in(store: str | None) -> Iterator[str | None]:
    """A bench's ``--store``: ``s3`` gives a lake URL in a bucket of a private moto S3
    server (``running_s3_lake``); None gives None (a lake on local disk)."""
    if store is None:
        yield None
        return
    if store != "s3":
        raise ValueError(f"no private server for the store {store!r}")
    with running_s3_lake() as url:
        yield url
