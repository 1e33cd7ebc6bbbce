"""End to end on an Azure lake (Azurite on loopback): the steps of the S3 test
(test_cdc_and_validate.py) on ``az://`` and ``abfss://`` URLs, and the put-if-absent Delta
commits rely on there (eight racing writers, none lost)."""

from __future__ import annotations

import base64
import contextlib
from collections.abc import Callable
from pathlib import Path

import pytest

from cdc_core.lake.layout import LakeTable, append_changelog, high_water_mark
from cdc_core.lake_location import LakeLocation
from tests.object_store.azurite_server import ACCOUNT_KEY, ACCOUNT_NAME, AzureLake
from tests.object_store.test_cdc_and_validate import cdc_run_then_validate
from tests.object_store.test_commits import _events, race_eight_writers
from tests.object_store.test_store_errors_and_canaries import _commands, _config, store_objects
from tests.private_servers import MariaDBServer, _free_port

WRONG_KEY = base64.b64encode(b"not the account's key, 64 bytes long, as a real key is.!").decode()
pytestmark = [pytest.mark.object_store, pytest.mark.azure]


@pytest.mark.integration
@pytest.mark.mariadb
def test_cdc_run_into_azure_then_validate(
    tmp_path: Path,
    azure_lake: AzureLake,
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
) -> None:
    cdc_run_then_validate(tmp_path, azure_lake.url, mariadb_full, mariadb_database(mariadb_full))


def test_an_abfss_url_names_its_account_and_reaches_the_same_objects(
    azure_lake: AzureLake, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AZURE_STORAGE_ACCOUNT_NAME")  # the URL names it
    url = f"abfss://{azure_lake.container}@{ACCOUNT_NAME}.dfs.core.windows.net/lake"
    lake = LakeLocation.from_config(url, {})
    assert (lake.store, lake.bucket, lake.url) == ("Azure", azure_lake.container, url)
    table = LakeTable(lake, "shop.items")
    append_changelog(table, _events(0), 0, "0", "writer-0")
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_NAME", ACCOUNT_NAME)  # az:// does not name it
    same = LakeTable(LakeLocation.from_config(azure_lake.url, {}), "shop.items")
    assert high_water_mark(same) == 0
    assert same.changelog_at.open_delta().to_pyarrow_table()["_commit_pos"].to_pylist() == [0]


def test_racing_writers_each_commit_once(azure_lake: AzureLake) -> None:
    """Eight writers appending to one table at once: every commit lands exactly once, with
    no commit option given (Blob Storage's put-if-absent is native in delta-rs)."""
    assert "conditional_put" not in LakeLocation.from_config(azure_lake.url, {}).delta_options()
    race_eight_writers(LakeLocation.from_config(azure_lake.url, {}))


@pytest.mark.integration
@pytest.mark.mariadb
def test_the_account_key_never_leaks_and_unreachable_stores_are_named(
    tmp_path: Path,
    azure_lake: AzureLake,
    mariadb_full: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The account key, given as ``storage_options: {account_key: {env: ...}}``, is nowhere
    in what the commands print or write, nor in the lake; a missing container and a wrong
    endpoint are each exit 2 with one line naming the store and the fix. (Azurite's key is
    the well-known emulator key, so it is its own canary.)"""
    monkeypatch.setenv("STORE_CANARY", ACCOUNT_KEY)
    monkeypatch.delenv("AZURE_STORAGE_ACCOUNT_KEY")
    database = mariadb_database(mariadb_full)
    with contextlib.closing(mariadb_full.connect(database)) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20))")
        cur.execute("INSERT INTO items VALUES (1, 'a'), (2, 'b')")
        conn.commit()
    url, table = mariadb_full.url(database), f"{database}.items"

    def run(name: str, lake: str, **options: str) -> list[tuple[int, str]]:
        config = _config(tmp_path / name, url, table, lake, "account_key", **options)
        return _commands(config, tmp_path / f"out-{name}")

    good = run("good", azure_lake.url)
    assert [code for code, _ in good] == [0, 0], good
    missing = f"az://no-such-{azure_lake.container}/lake"
    gone = run("gone", missing)
    elsewhere = f"http://127.0.0.1:{_free_port()}/{ACCOUNT_NAME}"
    away = run("away", azure_lake.url, endpoint_url=elsewhere)
    monkeypatch.setenv("STORE_CANARY", WRONG_KEY)  # Azurite checks each request's signature
    denied = run("denied", azure_lake.url)

    for code, printed in gone:
        assert code == 2, printed
        assert f"lake {missing}: the Azure container 'no-such-" in printed, printed
    for code, printed in away:
        assert code == 2, printed
        assert f"lake {azure_lake.url}: cannot reach Azure at" in printed, printed
    for code, printed in denied:
        assert code == 2, printed
        assert f"lake {azure_lake.url}: Azure at" in printed, printed
        assert "refused access (wrong credentials or no permission); check" in printed, printed
        assert "AZURE_STORAGE_ACCOUNT_KEY" in printed, printed
    everything = "\n".join(printed for _, printed in good + gone + away + denied)
    everything += "\n".join(
        path.read_text(errors="replace") for path in tmp_path.rglob("*") if path.is_file()
    )
    everything += store_objects(azure_lake.url, "account_key", ACCOUNT_KEY)
    assert ACCOUNT_KEY not in everything
    assert WRONG_KEY not in everything
