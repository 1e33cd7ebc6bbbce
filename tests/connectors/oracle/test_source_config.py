"""The Oracle log source's settings: one list of names (``LogMinerConfig``'s fields), read
from the connection URL, each bad value refused at start with the fix."""

from __future__ import annotations

import dataclasses

import pytest

from cdc_core.errors import ConfigError
from connectors.oracle import source_config as sc
from connectors.oracle.errors import DictionaryMismatchError

URL = "oracle+oracledb://cdc@adg1:1521/?service_name=SALES"


def test_every_setting_is_a_url_parameter_read_from_the_url() -> None:
    assert tuple(f.name for f in dataclasses.fields(sc.LogMinerConfig)) == sc.LOG_PARAMETERS
    config = sc.from_url(
        f"{URL}&mining=standby&dictionary=flat_file:/u01/logmnr/dict.ora&window_scns=5000"
        "&archive_dest=1,3&poll_interval_s=0.5&server_time_zone=Europe/Berlin"
    )
    assert config == sc.LogMinerConfig(
        mining="standby", dictionary=sc.Dictionary("flat_file", "/u01/logmnr/dict.ora"),
        window_scns=5000, archive_dest=(1, 3), poll_interval_s=0.5,
        server_time_zone="Europe/Berlin",
    )  # fmt: skip
    assert not config.flushes  # a standby is never written
    assert sc.from_url(URL) == sc.LogMinerConfig()
    assert sc.from_url(f"{URL}&dictionary=redo_logs").dictionary.kind == "redo_logs"
    assert sc.is_log_parameter("mining") and not sc.is_log_parameter("service_name")


def test_a_mining_instance_is_reached_as_the_same_user() -> None:
    from connectors.oracle.connector import OracleConnector

    url = f"{URL}&mining=standby&dictionary=redo_logs&mining_instance=logmnr1:1522/LOGMNR"
    config = sc.from_url(url)
    assert config.mining_instance == "logmnr1:1522/LOGMNR"
    mining = OracleConnector(url, "pw").at_instance(config.mining_instance)
    parts = mining.endpoint
    assert (parts.username, parts.host, parts.port, parts.query["service_name"]) == (
        "cdc", "logmnr1", 1522, "LOGMNR"
    )  # fmt: skip
    assert mining.password == "pw"


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("mining=replica", "mining=standby to mine on an Active Data Guard"),
        ("dictionary=flat_file", "DBMS_LOGMNR_D.STORE_IN_FLAT_FILE"),
        ("dictionary=catalog", "online_catalog, redo_logs or flat_file:<path"),
        ("window_scns=0", "window_scns must be >= 1"),
        ("window_scns=many", "window_scns='many' is not valid"),
        ("archive_dest=1,40", "V\\$ARCHIVE_DEST_STATUS"),
        ("mining=standby&flush_table=F", "read-only standby cannot be written"),
        ("mining=primary&mining=standby", "more than once"),
        ("mining_instance=logmnr1:1521/LOGMNR", "set dictionary=redo_logs"),
        ("dictionary=redo_logs&mining_instance=tcp://logmnr1", "host:port/service"),
    ],
)
def test_bad_settings_are_refused_naming_the_fix(query: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        sc.from_url(f"{URL}&{query}")


def test_the_dictionary_mismatch_fix_names_a_setting_that_exists() -> None:
    message = DictionaryMismatchError("SHOP.ORDERS", 42, "LogMiner INFO: x").message
    assert "dictionary=redo_logs" in message and "STORE_IN_REDO_LOGS" in message
    assert sc.from_url(f"{URL}&dictionary=redo_logs").dictionary == sc.Dictionary("redo_logs")
