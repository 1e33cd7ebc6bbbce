"""An S3 lake's credentials never leak, and a store that cannot be reached is one clear line.

The secret access key is given as ``storage_options: {secret_access_key: {env: ...}}`` with
a canary value (moto accepts any); ``cdc run`` and ``validate`` run against the store, then
against a missing bucket and a wrong endpoint, and everything they print or write (the
lake's objects included) is searched for the canary, as tests/test_canaries.py does for
database passwords.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from cdc_core.config import ConnectionConfig, load_root, read_connections
from cdc_core.errors import ConfigError
from cdc_core.lake_location import DELTA_RETRIES, LakeLocation, plain
from tests.cli_runs import PIPELINE, replcheck, write_config
from tests.object_store.s3_server import S3Lake
from tests.private_servers import MariaDBServer, _free_port

pytestmark = [pytest.mark.object_store, pytest.mark.integration, pytest.mark.mariadb]

CANARY = "CanaryS3Secret-9d41c"


def _config(
    work: Path, url: str, table: str, lake: str, secret: str = "secret_access_key", **options: str
) -> Path:
    """A pipeline and a comparison of ``table`` into ``lake``, its ``secret`` storage option
    from the environment variable STORE_CANARY, ``options`` more storage options."""
    config = write_config(work, url, [table], compared=(table, table))
    local = f"  lake: {{lake: {json.dumps(str(work / 'lake'))}}}"
    given = {secret: {"env": "STORE_CANARY"}, **options}
    stored = f"  lake: {{lake: {json.dumps(lake)}, storage_options: {json.dumps(given)}}}"
    config.write_text(config.read_text(encoding="utf-8").replace(local, stored), "utf-8")
    return config


def _commands(config: Path, out: Path) -> list[tuple[int, str]]:
    """``cdc run`` caught up and ``validate``: their exit codes and everything printed."""
    runs = [
        replcheck(
            "cdc", "run", "--config", str(config), "--pipeline", PIPELINE, "--until-caught-up"
        ),
        replcheck("validate", "--config", str(config), "--out", str(out)),
    ]
    return [(run.returncode, run.stdout + run.stderr) for run in runs]


def _lines(printed: str, start: str) -> list[str]:
    return [line for line in printed.splitlines() if line.startswith(start)]


def test_no_credential_in_output_files_or_lake_and_unreachable_stores_are_named(
    tmp_path: Path,
    s3_lake: S3Lake,
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STORE_CANARY", CANARY)
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    database = mariadb_database(mariadb_full)
    with contextlib.closing(mariadb_full.connect(database)) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20))")
        cur.execute("INSERT INTO items VALUES (1, 'a'), (2, 'b')")
        conn.commit()
    url, table = mariadb_full.url(database), f"{database}.items"

    good = _commands(_config(tmp_path / "good", url, table, s3_lake.url), tmp_path / "out")
    assert [code for code, _ in good] == [0, 0], good

    missing = f"s3://no-such-{s3_lake.bucket}/lake"
    gone = _commands(_config(tmp_path / "gone", url, table, missing), tmp_path / "out-gone")
    elsewhere = f"http://127.0.0.1:{_free_port()}"
    config = _config(tmp_path / "away", url, table, s3_lake.url, endpoint_url=elsewhere)
    away = _commands(config, tmp_path / "out-away")

    for code, printed in gone:
        assert code == 2, printed
        assert any(
            f"lake {missing}: the S3 bucket 'no-such-{s3_lake.bucket}' does not exist at"
            f" {s3_lake.server.endpoint}; create it, or correct the bucket in 'lake:'" in line
            for line in printed.splitlines()
        ), printed
    for code, printed in away:
        assert code == 2, printed
        assert any(
            f"lake {s3_lake.url}: cannot reach S3 at {elsewhere} (nothing answers there);"
            " check AWS_ENDPOINT_URL or storage_options.endpoint_url" in line
            for line in printed.splitlines()
        ), printed

    everything = "\n".join(printed for _, printed in good + gone + away)
    everything += "\n".join(
        path.read_text(errors="replace") for path in tmp_path.rglob("*") if path.is_file()
    )
    everything += _lake_objects(s3_lake)
    assert CANARY not in everything


def test_the_config_takes_storage_options_from_the_environment_or_a_file_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("S3_CANARY", CANARY)
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    secret_file = tmp_path / "token"
    secret_file.write_text(CANARY + "-token\n")
    secret_file.chmod(0o600)
    options = (
        "{secret_access_key: {env: S3_CANARY}, session_token: {file: "
        f"'{secret_file}'}}, endpoint_url: 'http://127.0.0.1:9'}}"
    )
    connections = _connections(tmp_path, f"{{lake: 's3://bkt/wh/', storage_options: {options}}}")
    location = connections["lake"].lake
    assert isinstance(location, LakeLocation)
    assert (location.url, location.bucket) == ("s3://bkt/wh", "bkt")
    settings = location.delta_options({"AWS_REGION": "eu-west-1", "AWS_ACCESS_KEY_ID": "id"})
    assert settings == {
        "aws_access_key_id": "id",
        "aws_secret_access_key": CANARY,
        "aws_session_token": CANARY + "-token",
        "aws_endpoint_url": "http://127.0.0.1:9",
        "aws_region": "eu-west-1",
        "aws_allow_http": "true",
        "conditional_put": "etag",
        **DELTA_RETRIES,  # bounded: not delta-rs's 10 retries over 3 minutes
    }
    timed = _connections(tmp_path, "{lake: 's3://b/w', storage_options: {request_timeout: 500ms}}")
    assert timed["lake"].lake.delta_options({})["timeout"] == "500ms"  # type: ignore[union-attr]
    shown = f"{connections['lake']!r} {connections['lake'].display()} {location!r} {location}"
    assert CANARY not in shown and "s3://bkt/wh" in shown

    for lake, message in [
        ("{lake: 's3://bkt/wh', storage_options: {secret_access_key: inline}}", "never inline"),
        ("{lake: 's3://id:key@bkt/wh'}", "must not hold credentials"),
        ("{lake: 's3://bkt/wh', storage_options: {bucket_acl: x}}", "unknown key"),
        ("{lake: 'gs://bkt/wh'}", "not a local path nor a store in ['s3://', 'az://'"),
        ("{lake: '/data/wh', storage_options: {region: x}}", "apply to object stores only"),
        ("{lake: 'file://data/wh'}", "a file URL takes an absolute path"),
        (
            "{lake: 's3://bkt/wh', storage_options: {request_timeout: 2 seconds}}",
            "request_timeout: '2 seconds' is not a duration such as 30s or 500ms",
        ),
    ]:
        with pytest.raises(ConfigError, match=re.escape(message)) as raised:
            _connections(tmp_path, lake)
        assert "key@" not in raised.value.message


def test_local_lakes_are_read_as_before(tmp_path: Path) -> None:
    connections = _connections(tmp_path, "{lake: 'file:///data/wh'}")
    assert connections["lake"].lake == Path("/data/wh")
    assert _connections(tmp_path, "{lake: 'rel/wh'}")["lake"].lake == Path("rel/wh")


def _connections(work: Path, lake: str) -> dict[str, ConnectionConfig]:
    path = work / "c.yaml"
    path.write_text(f"connections:\n  lake: {lake}\n", encoding="utf-8")
    root = load_root(path, None, os.environ, ("connections",), ("connections",))
    return read_connections(root, os.environ)


def _lake_objects(s3_lake: S3Lake) -> str:
    """Every object in the test's bucket, as text."""
    return store_objects(s3_lake.url, "secret_access_key", CANARY)


def store_objects(url: str, secret: str, value: str) -> str:
    """Every object under the bucket or container of the lake ``url``, as text, read with
    the storage option ``secret`` set to ``value``."""
    import pyarrow.fs as pafs

    lake = LakeLocation.from_config(url, {secret: plain(value)})
    filesystem, _ = lake.filesystem()
    found = filesystem.get_file_info(pafs.FileSelector(lake.bucket, recursive=True))
    texts = []
    for info in found:
        if info.type == pafs.FileType.File:
            with filesystem.open_input_stream(info.path) as stream:
                texts.append(stream.read().decode("utf-8", errors="replace"))
    return "\n".join(texts)
