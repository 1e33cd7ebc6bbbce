"""An S3 lake reached with credentials the store refuses: one line, exit 2, the fix named.

moto's server checks signatures and IAM policies once told to (``/moto-api/reset-auth``),
so this test runs its own server: two IAM users, one allowed everything on S3 and one only
to read objects, and a third set of credentials with a wrong secret. ``cdc run`` and
``validate`` work with the first, and are refused with the others, naming the store, the
URL and the settings to check, and never printing the secret. (An expired session token
and a bucket in another region cannot be made on moto:
``test_an_expired_token_is_named_as_such`` and
``test_a_bucket_in_another_region_is_named_as_such`` check the stores' words for them.)
"""

from __future__ import annotations

import contextlib
import json
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cdc_core.lake_location import LakeLocation, StoreError
from tests.cli_runs import PIPELINE, replcheck, write_config
from tests.object_store.s3_server import ACCESS_KEY_ID, REGION, SECRET_ACCESS_KEY, MotoS3Server
from tests.private_servers import MariaDBServer, _start_on_free_port

WRONG_SECRET = "CanaryWrongSecret-51f0"
Keys = tuple[str, str]


def _policy(actions: str | list[str]) -> str:
    statement = {"Effect": "Allow", "Action": actions, "Resource": "*"}
    return json.dumps({"Version": "2012-10-17", "Statement": [statement]})


@pytest.fixture
def signing_s3() -> Iterator[tuple[MotoS3Server, str, dict[str, Keys]]]:
    """A moto server that checks every request, a bucket, and each user's keys."""
    import boto3

    server = _start_on_free_port(MotoS3Server)
    assert isinstance(server, MotoS3Server)
    try:
        bucket = server.create_bucket()
        iam = boto3.client(
            "iam",
            endpoint_url=server.endpoint,
            region_name=REGION,
            aws_access_key_id=ACCESS_KEY_ID,
            aws_secret_access_key=SECRET_ACCESS_KEY,
        )
        keys = {}
        for user, actions in (("writer", "s3:*"), ("reader", ["s3:GetObject"])):
            iam.create_user(UserName=user)
            iam.put_user_policy(UserName=user, PolicyName="lake", PolicyDocument=_policy(actions))
            created = iam.create_access_key(UserName=user)["AccessKey"]
            keys[user] = (created["AccessKeyId"], created["SecretAccessKey"])
        keys["wrong secret"] = (keys["writer"][0], WRONG_SECRET)
        # From now on every request is checked (a plain body: moto reads the count from it).
        request = urllib.request.Request(
            f"{server.endpoint}/moto-api/reset-auth",
            data=b"0",
            method="POST",
            headers={"Content-Type": "text/plain"},
        )
        with urllib.request.urlopen(request, timeout=10):
            pass
        yield server, bucket, keys
    finally:
        server.stop()


@pytest.mark.object_store
@pytest.mark.integration
@pytest.mark.mariadb
def test_refused_credentials_are_named_and_the_secret_never_printed(
    tmp_path: Path,
    signing_s3: tuple[MotoS3Server, str, dict[str, Keys]],
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, bucket, keys = signing_s3
    for name, value in server.environment().items():
        monkeypatch.setenv(name, value)
    database = mariadb_database(mariadb_full)
    with contextlib.closing(mariadb_full.connect(database)) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20))")
        cur.execute("INSERT INTO items VALUES (1, 'a'), (2, 'b')")
        conn.commit()
    table, lake = f"{database}.items", f"s3://{bucket}/lake"
    config = write_config(tmp_path, mariadb_full.url(database), [table], compared=(table, table))
    local = f"  lake: {{lake: {json.dumps(str(tmp_path / 'lake'))}}}"
    text = config.read_text(encoding="utf-8")
    config.write_text(text.replace(local, f"  lake: {{lake: {json.dumps(lake)}}}"), "utf-8")

    def commands(user: str) -> list[tuple[int, str]]:
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", keys[user][0])
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", keys[user][1])
        cdc = ("cdc", "run", "--config", str(config), "--pipeline", PIPELINE, "--until-caught-up")
        validate = ("validate", "--config", str(config), "--out", str(tmp_path / f"out-{user}"))
        runs = [replcheck(*cdc), replcheck(*validate)]
        return [(run.returncode, run.stdout + run.stderr) for run in runs]

    assert [code for code, _ in commands("writer")] == [0, 0]
    refused = (
        f"lake {lake}: S3 at {server.endpoint} refused access (wrong credentials or no"
        " permission); check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN (or"
        f" their storage_options), and that they may read, write and list the bucket '{bucket}'"
    )
    for user in ("wrong secret", "reader"):
        for code, printed in commands(user):
            assert code == 2, printed
            assert any(refused in line for line in printed.splitlines()), printed
            assert WRONG_SECRET not in printed and keys["reader"][1] not in printed


@pytest.mark.parametrize(
    "error",
    [
        # delta-rs (object_store): the store's XML error under its own words
        'Kernel error -> Generic S3 error\n ↳ 400 Bad Request\n ↳ <?xml version="1.0"?>'
        "<Error><Code>ExpiredToken</Code><Message>The provided token has expired.</Message>"
        "</Error>",
        # pyarrow (the AWS SDK for C++): its error name for the code
        "When reading information for key 'lake/x' in bucket 'b': AWS Error EXPIRED_TOKEN"
        " during HeadObject operation: The provided token has expired.",
    ],
)
def test_an_expired_token_is_named_as_such(error: str) -> None:
    location = LakeLocation.from_config("s3://b/lake", {})
    message = str(StoreError.of(location, OSError(error), {}))
    assert "refused access (the credentials have expired); check AWS_ACCESS_KEY_ID" in message


@pytest.mark.parametrize(
    ("error", "named"),
    [
        # S3's answer to a request signed for another region, under delta-rs's words
        (
            "Generic S3 error\n ↳ 400 Bad Request\n ↳ <Error><Code>AuthorizationHeaderMalformed"
            "</Code><Message>The authorization header is malformed; the region 'us-east-1' is"
            " wrong; expecting 'eu-west-1'</Message><Region>eu-west-1</Region></Error>",
            " (it is in 'eu-west-1')",
        ),
        # delta-rs (object_store) on a redirect to the bucket's region
        (
            "Generic S3 error: Received redirect without LOCATION, this normally indicates an"
            " incorrectly configured region",
            "",
        ),
        # pyarrow (the AWS SDK for C++) on the same
        (
            "When getting information for bucket 'b': AWS Error UNKNOWN (HTTP status 301)"
            " during HeadBucket operation: No response body.",
            "",
        ),
    ],
)
def test_a_bucket_in_another_region_is_named_as_such(error: str, named: str) -> None:
    """moto answers in every region: only the stores' words for it can be tested here."""
    location = LakeLocation.from_config("s3://b/lake", {})
    message = str(StoreError.of(location, OSError(error), {"AWS_REGION": "us-east-1"}))
    assert (
        "lake s3://b/lake: S3 at the default AWS endpoint says the bucket 'b' is not in region"
        f" 'us-east-1'{named}; set AWS_REGION (or storage_options.region) to the bucket's region"
    ) in message
