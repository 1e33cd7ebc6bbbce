"""``replcheck cdc run --until-caught-up`` with a ``postgresql`` source: the initial load
from the slot's snapshot, the changes after it, and a second run that resumes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cdc_core.lake.layout import LakeTable
from cdc_core.names import META_COLUMNS
from tests.cdc_core.kill_loop import ROOT
from tests.connectors.postgres.helpers import PgCase

pytestmark = [pytest.mark.integration, pytest.mark.postgres]


def _config(case: PgCase, work: Path) -> Path:
    url = case.server.url(case.database) + "?idle_s=0.2"
    config = work / "pipeline.yaml"
    config.write_text(
        "connections:\n"
        f'  src: {{url: "{url}"}}\n'
        f"  lake: {{lake: {work / 'lake'}}}\n"
        "pipelines:\n"
        "  - name: pg\n"
        "    source: src\n"
        "    target: lake\n"
        "    tables: [public.a, public.b]\n"
        f"    state_dir: {work / 'state'}\n",
        encoding="utf-8",
    )
    return config


def _run(config: Path) -> str:
    command = [sys.executable, "-m", "validator.cli", "cdc", "run", "--config", str(config)]
    done = subprocess.run(
        [*command, "--pipeline", "pg", "--until-caught-up"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _lake(work: Path, table: str) -> dict[int, dict[str, Any]]:
    from deltalake import DeltaTable

    rows = DeltaTable(str(LakeTable(work / "lake", table).mirror)).to_pyarrow_table().to_pylist()
    return {row["id"]: {k: v for k, v in row.items() if k not in META_COLUMNS} for row in rows}


def test_cdc_run_loads_then_follows_the_slot(case: PgCase, tmp_path: Path) -> None:
    case.sql(
        "CREATE TABLE a (id int PRIMARY KEY, v text)",
        "CREATE TABLE b (id int PRIMARY KEY, n numeric(6,2))",
        "INSERT INTO a VALUES (1, 'x'), (2, 'y')",
    )
    config = _config(case, tmp_path)
    _run(config)
    assert _lake(tmp_path, "public.a") == {1: {"id": 1, "v": "x"}, 2: {"id": 2, "v": "y"}}
    case.sql(
        "UPDATE a SET v = 'z' WHERE id = 1",
        "DELETE FROM a WHERE id = 2",
        "INSERT INTO b VALUES (5, 1.25)",
    )
    out = _run(config)
    assert "everything up to position" in out
    assert _lake(tmp_path, "public.a") == {1: {"id": 1, "v": "z"}}
    assert {k: str(v["n"]) for k, v in _lake(tmp_path, "public.b").items()} == {5: "1.25"}
