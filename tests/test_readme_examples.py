"""The README's Python examples, run as written, so they cannot rot.

Each ```python block of README.md is found by what it calls and run in a directory holding
the files it names (a config, a result), against the test's private servers.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.connectors.mariadb.pipeline_helpers import lake_rows
from tests.private_servers import MariaDBServer
from tests.validator.resync.helpers import result_for, write_config
from validator.config import load_validator_config

README = Path(__file__).parents[1] / "README.md"


def _example(calling: str) -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    found = [block for block in blocks if calling in block]
    assert len(found) == 1, f"one README example calls {calling}"
    return found[0]


def _run(example: str, where: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(where)
    exec(compile(example, "README.md", "exec"), {})  # the README's own code


@pytest.mark.integration
@pytest.mark.mariadb
def test_the_pipeline_example_replicates_into_the_lake(
    tmp_path: Path,
    mariadb_minimal: MariaDBServer,
    mariadb_database: Callable[[MariaDBServer], str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    database = mariadb_database(mariadb_minimal)
    with contextlib.closing(mariadb_minimal.connect(database)) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE orders (id INT PRIMARY KEY, note TEXT DEFAULT 'new')")
        cur.execute("INSERT INTO orders (id) VALUES (1)")
    (tmp_path / "pipeline.yaml").write_text(
        f"connections:\n  src: {{url: '{mariadb_minimal.url(database)}?heartbeat_s=0.2'}}\n"
        f"  lake: {{lake: '{tmp_path / 'lake'}'}}\n"
        f"pipelines:\n  - {{name: shop, source: src, target: lake, tables: ['{database}.*'],"
        f" state_dir: '{tmp_path / 'state'}'}}\n"
    )
    _run(_example("open_pipeline"), tmp_path, monkeypatch)
    reached = capsys.readouterr().out.split()[0]
    assert reached.startswith("mariadb-bin.")  # the initial load's position
    assert lake_rows(tmp_path / "lake", f"{database}.orders", ["id"]) == {
        (1,): {"id": 1, "note": "new"}
    }


def test_the_resync_example_repairs_from_a_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import sqlite3

    for name, rows in (("src", [(1, "a"), (2, "b")]), ("tgt", [(1, "a")])):
        with contextlib.closing(sqlite3.connect(tmp_path / f"{name}.db")) as conn, conn:
            conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
            conn.executemany("INSERT INTO t VALUES (?, ?)", rows)
    path = write_config(
        tmp_path / "replcheck.yaml",
        {"src": f"sqlite:///{tmp_path / 'src.db'}", "tgt": f"sqlite:///{tmp_path / 'tgt.db'}"},
        "  - {name: t, source: {connection: src, table: t}, target: {connection: tgt, table: t}}",
        "validation: {recheck_lag_s: 0}\nresync: {audit: file}",
    )
    config = load_validator_config(path, environ={})
    result = result_for(config.comparison("t"), [("missing_in_target", ("2",))])
    (tmp_path / "replcheck-out").mkdir()
    (tmp_path / "replcheck-out/result.json").write_text(json.dumps(result))
    _run(_example("resync("), tmp_path, monkeypatch)
    assert capsys.readouterr().out.strip() == "0 applied"
