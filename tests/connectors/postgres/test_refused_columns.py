"""Columns the pipeline cannot carry exactly are refused by name before anything is written
(issue 36, "never drop in silence"), and ``ignore_columns`` lets a pipeline replicate the
rest of such a table.

On the real PostgreSQL cluster: types without a logical type (``money``, ``inet``, ``cidr``,
``macaddr``, ``int4range``, ``point[]``), which the stream and the snapshot used to leave out
with a warning, and ``interval``, which a Delta lake has no type for (the writer crashed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cdc_core.lake import META_COLUMNS, LakeTable
from tests.cdc_core.kill_loop import ROOT
from tests.connectors.postgres.helpers import PgCase

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

REFUSED = {
    "cash": "money",
    "addr": "inet",
    "net": "cidr",
    "mac": "macaddr",
    "days": "int4range",
    "shapes": "point[]",
    "span": "interval",
}
TABLE = (
    "CREATE TABLE r (id int PRIMARY KEY, cash money, addr inet, net cidr, mac macaddr,"
    " days int4range, shapes point[], span interval, v text)"
)
ROW = (
    "INSERT INTO r VALUES ({id}, 1.5, '10.0.0.{id}', '10.{id}.0.0/16', '08:00:2b:01:02:0{id}',"
    " '[1,{id}0)', '{{\"(1,{id})\"}}', '{id} days', 'v{id}')"
)


def _config(case: PgCase, work: Path, pipeline: str = "") -> Path:
    config = work / "pipeline.yaml"
    config.write_text(
        "connections:\n"
        f'  src: {{url: "{case.server.url(case.database)}?idle_s=0.2"}}\n'
        f"  lake: {{lake: {work / 'lake'}}}\n"
        "pipelines:\n"
        "  - name: pg\n"
        "    source: src\n"
        "    target: lake\n"
        "    tables: [public.r]\n"
        f"    state_dir: {work / 'state'}\n" + pipeline,
        encoding="utf-8",
    )
    return config


def _run(config: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "validator.cli", "cdc", "run", "--config", str(config)]
    return subprocess.run(
        [*command, "--pipeline", "pg", "--until-caught-up"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _lake(work: Path) -> dict[int, dict[str, Any]]:
    from deltalake import DeltaTable

    mirror = LakeTable(work / "lake", "public.r").mirror
    rows = DeltaTable(str(mirror)).to_pyarrow_table().to_pylist()
    return {row["id"]: {k: v for k, v in row.items() if k not in META_COLUMNS} for row in rows}


def test_columns_the_pipeline_cannot_carry_are_refused_by_name(
    case: PgCase, tmp_path: Path
) -> None:
    case.sql(TABLE, ROW.format(id=1))
    run = _run(_config(case, tmp_path))
    assert run.returncode == 2, run.stderr[-3000:]
    error = run.stderr.strip().splitlines()[-1]
    untyped = ", ".join(f"{c} ({native})" for c, native in REFUSED.items() if c != "span")
    assert error.startswith(f"error: table public.r: columns {untyped}: no logical type"), error
    assert "; column span (interval): no type in a Delta lake" in error, error
    names = ", ".join(REFUSED)
    assert f"ignore_columns: {{public.r: [{names}]}}" in error, error
    assert "replcheck bug" not in run.stderr and "WARNING" not in run.stderr
    assert not (tmp_path / "lake").exists() or not any((tmp_path / "lake").iterdir())


def test_ignored_columns_let_the_rest_of_the_table_replicate(case: PgCase, tmp_path: Path) -> None:
    case.sql(TABLE, ROW.format(id=1), ROW.format(id=2))
    ignored = f"    ignore_columns: {{public.r: [{', '.join(REFUSED)}]}}\n"
    config = _config(case, tmp_path, ignored)
    first = _run(config)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "WARNING" not in first.stderr  # ignored on purpose: nothing to warn about
    assert _lake(tmp_path) == {1: {"id": 1, "v": "v1"}, 2: {"id": 2, "v": "v2"}}
    case.sql(
        ROW.format(id=3),
        "UPDATE r SET span = span * 2, v = 'w2' WHERE id = 2",
        "UPDATE r SET addr = '10.9.9.9', days = '[2,3)' WHERE id = 1",  # ignored columns only
        "DELETE FROM r WHERE id = 3",
        "INSERT INTO r (id, span, v) VALUES (4, '1 hour', 'v4')",
    )
    second = _run(config)
    assert second.returncode == 0, second.stderr[-3000:]
    assert _lake(tmp_path) == {
        1: {"id": 1, "v": "v1"},
        2: {"id": 2, "v": "w2"},
        4: {"id": 4, "v": "v4"},
    }


def test_a_column_added_later_is_refused_by_name_too(case: PgCase, tmp_path: Path) -> None:
    """A DDL gives a captured table a column the lake cannot hold: the run stops naming it
    (never a warning, never a Delta error), and resumes once it is ignored."""
    case.sql("CREATE TABLE r (id int PRIMARY KEY, v text)", "INSERT INTO r VALUES (1, 'a')")
    config = _config(case, tmp_path)
    assert _run(config).returncode == 0
    case.sql("ALTER TABLE r ADD COLUMN span interval", "INSERT INTO r VALUES (2, 'b', '1 day')")
    stopped = _run(config)
    assert stopped.returncode == 2, stopped.stderr[-3000:]
    error = stopped.stderr.strip().splitlines()[-1]
    assert "table public.r: column span (interval): no type in a Delta lake" in error, error
    assert "ignore_columns: {public.r: [span]}" in error, error
    assert "replcheck bug" not in stopped.stderr
    resumed = _run(_config(case, tmp_path, "    ignore_columns: {public.r: [span]}\n"))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert _lake(tmp_path) == {1: {"id": 1, "v": "a"}, 2: {"id": 2, "v": "b"}}
