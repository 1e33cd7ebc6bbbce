"""A second S3 implementation for tests: s3rver (npm, installed into ``.tools`` by
scripts/install-npm-tools.sh) on a free loopback port, so the lake's S3 paths are not tuned
to moto's answers alone. It checks each request's signature against its fixed key pair
(``S3RVER``). It ignores ``If-None-Match``, so racing writers lose commits on it
(docs/object-storage.md, "The commit mechanism"): tests run one writer at a time there.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

from tests.object_store.s3_server import REGION, MotoS3Server
from tests.private_servers import LOOPBACK, ServerStartError

KEY = "S3RVER"  # s3rver's own well-known key pair: not a secret
_S3RVER = Path(__file__).resolve().parents[2] / ".tools" / "node_modules" / ".bin" / "s3rver"


class S3rverServer(MotoS3Server):
    """s3rver in its own process, its objects in its own directory."""

    kind = "s3rver"

    def environment(self) -> dict[str, str]:
        """The standard AWS variables that reach this server."""
        return {
            "AWS_ACCESS_KEY_ID": KEY,
            "AWS_SECRET_ACCESS_KEY": KEY,
            "AWS_REGION": REGION,
            "AWS_ENDPOINT_URL": self.endpoint,
        }

    def _initialize(self) -> None:
        if not _S3RVER.exists():
            missing = f"{_S3RVER} is missing: run `bash scripts/install-npm-tools.sh`"
            raise ServerStartError(missing)
        (self.root / "objects").mkdir()

    def _argv(self) -> list[str]:
        directory = str(self.root / "objects")
        return [str(_S3RVER), "-d", directory, "-a", LOOPBACK, "-p", str(self.port), "--silent"]

    def _ping(self) -> str | None:
        try:
            with urllib.request.urlopen(self.endpoint, timeout=2):
                return None
        except urllib.error.HTTPError:
            return None  # it answers (an unsigned request is refused)
        except (urllib.error.URLError, OSError) as exc:
            return str(exc)
