"""A private Azure Blob endpoint for tests: Azurite's blob service (from npm, installed into
``.tools`` by scripts/install-npm-tools.sh) on a free loopback port, started and stopped like
moto's S3 server (s3_server.py).

Azurite answers the Blob REST API over real HTTP, so deltalake (delta-rs's object_store) and
pyarrow's Azure filesystem talk to it as to Azure itself, conditional creates
(``If-None-Match: *``) included. Its data lives in memory only. Tests reach it through the
standard Azure environment, as users do, with the emulator's well-known account and key.
"""

from __future__ import annotations

import itertools
import os
import signal
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tests.private_servers import LOOPBACK, ServerStartError, _PrivateServer

# Azurite's one built-in account and its published key (the emulator's, in Azure's docs):
# not a secret.
ACCOUNT_NAME = "devstoreaccount1"
ACCOUNT_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
_CONTAINERS = itertools.count(1)
_AZURITE = Path(__file__).resolve().parents[2] / ".tools" / "node_modules" / ".bin" / "azurite-blob"
# The standard variables a test owns while it runs (the others are cleared: conftest.py).
AZURE_VARIABLES = (
    "AZURE_STORAGE_ACCOUNT_NAME",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_STORAGE_ENDPOINT",
    "AZURE_CLIENT_ID",
    "AZURE_CLIENT_SECRET",
    "AZURE_TENANT_ID",
    "AZURE_STORAGE_CONNECTION_STRING",
)


class AzuriteServer(_PrivateServer):
    """Azurite's blob service in its own process, in memory, on ``127.0.0.1:PORT``."""

    kind = "azurite"
    stop_signal = signal.SIGTERM

    def __init__(self) -> None:
        super().__init__(None)

    @property
    def endpoint(self) -> str:
        """The account's blob endpoint, path style as for any emulator."""
        return f"http://{LOOPBACK}:{self.port}/{ACCOUNT_NAME}"

    def environment(self) -> dict[str, str]:
        """The standard Azure variables that reach this server."""
        return {
            "AZURE_STORAGE_ACCOUNT_NAME": ACCOUNT_NAME,
            "AZURE_STORAGE_ACCOUNT_KEY": ACCOUNT_KEY,
            "AZURE_STORAGE_ENDPOINT": self.endpoint,
        }

    def create_container(self) -> str:
        """A new, empty container with a name unique in this run."""
        import pyarrow.fs as pafs

        name = f"lake-{os.getpid()}-{next(_CONTAINERS)}"
        authority = f"{LOOPBACK}:{self.port}"
        pafs.AzureFileSystem(
            ACCOUNT_NAME,
            account_key=ACCOUNT_KEY,
            blob_storage_authority=authority,
            dfs_storage_authority=authority,
            blob_storage_scheme="http",
            dfs_storage_scheme="http",
        ).create_dir(name)
        return name

    def _initialize(self) -> None:
        if not _AZURITE.exists():
            raise ServerStartError(
                f"{_AZURITE} is missing: run `bash scripts/install-npm-tools.sh`"
            )

    def _argv(self) -> list[str]:
        return [
            str(_AZURITE),
            "--blobHost",
            LOOPBACK,
            "--blobPort",
            str(self.port),
            "--inMemoryPersistence",
            "--extentMemoryLimit",
            "256",  # MB: the tests' lakes are small; the default is half the machine's memory
            "--skipApiVersionCheck",  # delta-rs and pyarrow may speak a newer API version
            "--loose",  # ignore headers Azurite does not implement rather than fail on them
            "--disableTelemetry",
            "--silent",
        ]

    def _ping(self) -> str | None:
        """None once Azurite answers (an unsigned request: 403, from Azurite itself)."""
        try:
            with urllib.request.urlopen(f"{self.endpoint}?comp=list", timeout=2) as answer:
                server = answer.headers.get("Server", "")
        except urllib.error.HTTPError as exc:
            server = exc.headers.get("Server", "")
        except (urllib.error.URLError, OSError) as exc:
            return str(exc)
        return None if server.startswith("Azurite-Blob") else f"answered by {server!r}"

    def _after_start(self) -> None:
        return None


@dataclass(frozen=True, slots=True)
class AzureLake:
    """A test's lake on the private Azurite server: ``url`` is ``az://CONTAINER/lake``."""

    server: AzuriteServer
    container: str

    @property
    def url(self) -> str:
        return f"az://{self.container}/lake"
