"""HANA trigger capture against a real server: runs only when REPLCHECK_HANA_URL is set (see
``test_live``; the password in REPLCHECK_HANA_PASSWORD or the URL). Creates one table in the
current schema, installs its capture (schema REPLCHECK_CAPTURE), writes, reads, replicates
into a lake, validates, then removes the capture and drops the table. With
REPLCHECK_HANA_RECORD set to a directory, the reader test records its session there in the
replay format (``recorded_session``)."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from cdc_core.capture.position import Position
from connectors.hana.connector import HanaConnector
from connectors.hana.trigger_dialect import HanaTriggerDialect
from connectors.registry import capture_dialect_for
from connectors.trigger_capture.install import apply_plan, plan_capture
from connectors.trigger_capture.log_reader import TriggerLogReader, TriggerReaderConfig
from tests.connectors.hana.recorded_session import RecordingHanaConnector, save
from tests.connectors.mariadb.pipeline_helpers import lake_rows
from tests.connectors.trigger_capture.helpers import (
    read_to_idle,
    replcheck,
    show,
    transactions,
    validate_in_sync,
)

pytestmark = [pytest.mark.hana, pytest.mark.integration]
RECORD = "REPLCHECK_HANA_RECORD"  # a directory: the reader test saves its session there


@pytest.fixture
def url() -> str:
    return os.environ["REPLCHECK_HANA_URL"]


@pytest.fixture
def table(url: str) -> Iterator[str]:
    """A fresh table ``RC_CAPTURE_<hex>`` in the current schema (capture removed after)."""
    connector = HanaConnector(url, os.environ.get("REPLCHECK_HANA_PASSWORD"))
    name = f"RC_CAPTURE_{uuid.uuid4().hex[:10].upper()}"
    columns = "ID BIGINT PRIMARY KEY, NOTE NVARCHAR(40), AMOUNT DECIMAL(10,2)"
    _run(connector, f'CREATE COLUMN TABLE "{name}" ({columns})')
    dialect = _dialect(url, name)
    try:
        yield name
    finally:
        apply_plan(dialect, plan_capture(dialect, "remove", [name]), lambda _: None, False)
        _run(connector, f'DROP TABLE "{name}"')


def _dialect(url: str, table: str) -> HanaTriggerDialect:
    dialect = capture_dialect_for(url, os.environ.get("REPLCHECK_HANA_PASSWORD"), [table])
    assert isinstance(dialect, HanaTriggerDialect)
    return dialect


def _run(connector: HanaConnector, *statements: str, commit: bool = True) -> Any:
    """A connection that ran ``statements`` (committed, or left open for the caller)."""
    connection = connector.connect()
    connection.setautocommit(False)
    cursor = connection.cursor()
    for statement in statements:
        cursor.execute(statement)
    if commit:
        connection.commit()
        connection.close()
        return None
    return connection


def _triggers(connector: HanaConnector, table: str) -> list[str]:
    with contextlib.closing(connector.connect()) as connection:
        cursor = connection.cursor()
        cursor.execute(
            "SELECT TRIGGER_NAME FROM SYS.TRIGGERS WHERE SUBJECT_TABLE_NAME = ?", [table]
        )
        return sorted(str(row[0]) for row in cursor.fetchall())


def test_install_is_idempotent_and_removal_leaves_no_trigger(url: str, table: str) -> None:
    dialect = _dialect(url, table)
    for _ in range(2):
        apply_plan(dialect, plan_capture(dialect, "install", [table]), lambda _: None, False)
        dialect.check_installed([table])
        assert len(_triggers(dialect.connector, table)) == 3
    apply_plan(dialect, plan_capture(dialect, "remove", [table]), lambda _: None, False)
    apply_plan(dialect, plan_capture(dialect, "remove", [table]), lambda _: None, False)
    assert _triggers(dialect.connector, table) == []


def test_a_later_commit_waits_behind_an_open_writer_and_a_rollback_never_shows(
    url: str, table: str
) -> None:
    dialect = _dialect(url, table)
    apply_plan(dialect, plan_capture(dialect, "install", [table]), lambda _: None, False)
    start = dialect.end_position()
    quoted = f'"{table}"'
    open_ = _run(dialect.connector, f"INSERT INTO {quoted} VALUES (1, 'open', 1)", commit=False)
    _run(dialect.connector, f"INSERT INTO {quoted} VALUES (2, 'committed', 2)")
    aborted = _run(
        dialect.connector, f"INSERT INTO {quoted} VALUES (3, 'aborted', 3)", commit=False
    )
    aborted.rollback()
    aborted.close()
    exchanges: list[dict[str, Any]] = []
    recorder = HanaTriggerDialect(RecordingHanaConnector(dialect.connector, exchanges), [table])
    reader = TriggerLogReader(recorder, TriggerReaderConfig(recorder.tables, 0.05))
    try:
        changes = reader.iter_changes(Position.of(start))
        held, _ = read_to_idle(changes)
        _run(dialect.connector, f"UPDATE {quoted} SET ID = 20 WHERE ID = 2")  # a key move
        open_.commit()
        open_.close()
        later: list[Any] = []
        for _ in range(1000):  # polls, each ended by an Idle
            if len(transactions(later)) == 3:
                break
            later += read_to_idle(changes)[0]
    finally:
        reader.close()
    if os.environ.get(RECORD):  # a real session for tests/connectors/hana/data
        path = Path(os.environ[RECORD]) / f"capture_live_{table}.json"
        save(
            path,
            "recorded live: an open writer, a committed insert, a rollback, a key move",
            exchanges,
        )
    assert held == []  # the open insert took the first value: everything waits behind it
    rows = [show(c) for c in later if show(c)[0] in ("c", "u", "d")]
    # By last write: the open insert wrote first (its position is lowest) though it committed
    # last; then the committed insert and the key move (as a delete and an insert).
    assert [(op, key) for op, _, _, key, _ in rows] == [
        ("c", (1,)), ("c", (2,)), ("d", (2,)), ("c", (20,))
    ]  # fmt: skip


def test_cdc_run_then_validate_reports_in_sync(url: str, table: str, tmp_path: Path) -> None:
    config = tmp_path / "pipeline.yaml"
    password = "REPLCHECK_HANA_PASSWORD"
    secret = f", password: {{env: {password}}}" if os.environ.get(password) else ""
    config.write_text(
        "connections:\n"
        f'  src: {{url: "{url}"{secret}}}\n'
        f"  lake: {{lake: {tmp_path / 'lake'}}}\n"
        "pipelines:\n"
        f"  - {{name: p, source: src, target: lake, tables: [{table}],"
        f" state_dir: {tmp_path / 'state'}}}\n",
        encoding="utf-8",
    )
    dialect = _dialect(url, table)
    installed = replcheck("cdc", "install-capture", "-c", str(config), "--pipeline", "p")
    assert installed.returncode == 0, installed.stderr
    quoted = f'"{table}"'
    _run(
        dialect.connector, *(f"INSERT INTO {quoted} VALUES ({i}, 'n{i}', {i}.5)" for i in range(20))
    )
    ran = replcheck("cdc", "run", "-c", str(config), "--pipeline", "p", "--until-caught-up")
    assert ran.returncode == 0, ran.stderr
    _run(
        dialect.connector,
        f"UPDATE {quoted} SET NOTE = 'x' WHERE ID < 5",
        f"DELETE FROM {quoted} WHERE ID = 7",
    )
    ran = replcheck("cdc", "run", "-c", str(config), "--pipeline", "p", "--until-caught-up")
    assert ran.returncode == 0, ran.stderr
    qualified = dialect.tables[0]
    rows = lake_rows(tmp_path / "lake", qualified, ["ID"])
    assert len(rows) == 19 and rows[(1,)]["NOTE"] == "x" and rows[(8,)]["AMOUNT"] == Decimal("8.50")
    validate_in_sync(config, qualified, qualified, tmp_path / "validated")
