"""Re-sync into a lake (issue 38, item 5): a dry run unless ``--apply``, as on database
targets; rows another writer wrote as string views repaired; ``resync.json`` written
whatever a comparison meets.

The lake is fed by the real pipeline from an embedded SQLite source (trigger capture), the
other writer is delta-rs itself.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from cdc_core.lake.layout import LakeTable
from tests.validator.resync.helpers import result_for
from validator.commands.capture import change_capture
from validator.commands.cdc import run_pipeline
from validator.commands.resync import ResyncArguments, run_resync
from validator.config import load_validator_config
from validator.resync.context import prepare
from validator.resync.lake import lake_rows_at

ROWS = [(f"k{i}", f"v{i}", i) for i in range(20)]
DIFFERENCES = [("changed", ("k3",)), ("missing_in_target", ("k5",)), ("extra_in_target", ("zz",))]


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A SQLite table with a text key, in a lake, where another writer (delta-rs, string
    views) changed k3, deleted k5 and added zz."""
    database = tmp_path / "src.db"
    with sqlite3.connect(database) as conn:
        conn.execute("CREATE TABLE items (code TEXT PRIMARY KEY, v TEXT, n INTEGER)")
        conn.executemany("INSERT INTO items VALUES (?, ?, ?)", ROWS)
    config = tmp_path / "replcheck.yaml"
    config.write_text(f"""\
connections:
  src: {{url: "sqlite:///{database}"}}
  lake: {{lake: "{tmp_path / "lake"}"}}
pipelines:
  - {{name: p, source: src, target: lake, tables: [items], state_dir: "{tmp_path / "state"}"}}
comparisons:
  - name: items
    source: {{connection: src, table: items}}
    target: {{connection: lake, table: items}}
""")
    change_capture(config, "p", "install", lambda _: None)
    run_pipeline(config, "p", until_caught_up=True)
    _other_writer(LakeTable(tmp_path / "lake", "items"))
    result = result_for(load_validator_config(config, environ={}).comparison("items"), DIFFERENCES)
    (tmp_path / "result.json").write_text(json.dumps(result), encoding="utf-8")
    return tmp_path


def _views(table: pa.Table) -> pa.Table:
    kinds = [f.with_type(pa.string_view()) if f.type == pa.string() else f for f in table.schema]
    return table.cast(pa.schema(kinds))


def _other_writer(lake: LakeTable) -> None:
    mirror = DeltaTable(str(lake.mirror)).to_pyarrow_table()
    rows = [dict(r, v="drifted") if r["code"] == "k3" else r for r in mirror.to_pylist()]
    rows = [r for r in rows if r["code"] != "k5"]
    rows += [dict(r, code="zz") for r in mirror.to_pylist() if r["code"] == "k4"]
    table = _views(pa.Table.from_pylist(rows, mirror.schema))
    write_deltalake(str(lake.mirror), table, mode="overwrite")


def _lake_state(work: Path) -> dict[str, Any]:
    lake = LakeTable(work / "lake", "items")
    requests = work / "lake" / "_replcheck" / "resync_requests"
    return {
        "changelog": DeltaTable(str(lake.changelog)).version(),
        "mirror": DeltaTable(str(lake.mirror)).version(),
        "requests": sorted(p.name for p in requests.glob("*")) if requests.is_dir() else [],
    }


def _resync(work: Path, *, apply: bool) -> tuple[int, dict[str, Any]]:
    arguments = ResyncArguments(work / "replcheck.yaml", work / "result.json", apply=apply)
    outcome, files = run_resync(arguments)
    return outcome.exit_code, json.loads(files.outcome.read_text(encoding="utf-8"))


def _values(work: Path) -> dict[object, object]:
    config = load_validator_config(work / "replcheck.yaml", environ={})
    context = prepare(config, config.comparison("items"))
    rows = lake_rows_at(context, [("k3",), ("k5",), ("zz",)], None)
    return {row[0]: row[1] for row in rows.values()}


def test_a_lake_resync_without_apply_writes_nothing_and_lists_the_keys(work: Path) -> None:
    before = _lake_state(work)
    code, outcome = _resync(work, apply=False)

    (done,) = outcome["comparisons"]
    assert (code, done["mode"], done["error"], done["revalidation"]) == (0, "dry_run", None, "none")
    actions = sorted((a["kind"], tuple(a["key"])) for a in done["actions"])
    assert actions == [("delete", ("zz",)), ("refresh", ("k3",)), ("refresh", ("k5",))]
    assert done["sql_file"] is None
    assert _lake_state(work) == before
    assert _values(work) == {"k3": "drifted", "zz": "v4"}


def test_apply_repairs_rows_another_writer_wrote_as_string_views(work: Path) -> None:
    code, outcome = _resync(work, apply=True)

    (done,) = outcome["comparisons"]
    assert done["error"] is None, done["error"]
    assert (code, done["mode"], done["repaired"]) == (0, "refreshed", True)
    assert _values(work) == {"k3": "v3", "k5": "v5"}


def test_the_outcome_is_written_when_the_repair_fails_midway(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_kernel(*_: object) -> None:
        raise pa.ArrowNotImplementedError("no kernel matching input types (string, string_view)")

    monkeypatch.setattr("validator.resync.lake.refresh", no_kernel)
    code, outcome = _resync(work, apply=True)

    (done,) = outcome["comparisons"]
    assert (code, done["mode"]) == (2, "failed")
    assert done["error"].startswith("ArrowNotImplementedError: no kernel")


def test_the_outcome_keeps_written_repairs_when_their_check_fails(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_kernel(*_: object) -> None:
        raise pa.ArrowNotImplementedError("no kernel matching input types (string, string_view)")

    monkeypatch.setattr("validator.resync.run.revalidate_lake", no_kernel)
    code, outcome = _resync(work, apply=True)

    (done,) = outcome["comparisons"]
    assert (code, done["mode"], done["action_counts"]) == (
        2,
        "refreshed",
        {"refresh": 2, "delete": 1},
    )
    assert done["error"].startswith("re-validation failed: ArrowNotImplementedError")
    assert _values(work) == {"k3": "v3", "k5": "v5"}  # what it wrote is there, and said
